# Compiled from decoder.py (pipeline.compiled.SOURCE_MODULES): Decoder as an extension type, its
# per-feed methods called in C from within it. decoder.py stays the source and the pure-Python
# reference.

cdef class Decoder:
    cdef public object _version, lenient, limits, _buf, _pos, _base, _state, _pending, _nl
    cdef public object _scan, _line_start, _lines, _head_end, _body_start, _content_length
    cdef public object _command, _problems, _frame_version, _header_list, _resync_from
    cdef public object _resync_here, _nuls_from, _eof_noted

    cpdef feed(self, data)
    cpdef list events(self)
    cpdef _fast(self, buf, list out, limit)
