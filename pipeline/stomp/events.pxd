# Compiled from events.py (pipeline.compiled.SOURCE_MODULES): Frame as an extension type, so
# that the modules that read frames typed (pipeline/session/model.pxd) read its fields as C
# struct members. events.py stays the source and the pure-Python reference.

cdef class Frame:
    cdef public object command, body, start, end, content_length
    cdef public object _header_list, _headers, _violations, _undecoded
