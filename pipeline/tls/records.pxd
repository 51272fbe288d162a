# Compiled from records.py (pipeline.compiled.SOURCE_MODULES): the record reader as an extension
# type, its fields read as C struct members by the session (session.pxd).

cdef class RecordReader:
    cdef public bytearray _buffer
    cdef public object _offset, failure

    cpdef tuple take(self)
    cpdef hold(self, rest, tcp_offset)
