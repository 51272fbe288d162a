# The classes of _streams.pyx, declared for the compiled modules that use them typed
# (pipeline/session/model.pxd): their fields are read as C struct members there.

cdef class Stamp:
    cdef public object ts_ns
    cdef readonly object _ts

    cpdef tuple _fields(self)


cdef class Chunk(Stamp):
    cdef public object start, end, file, file_offset, tcp_start, tcp_frames
    cdef public bint beat_message


cdef class DirectionStream:
    cdef public object direction, decoder, origin, next_offset, keep_from, trailer_end
    cdef public object trailer_chunk, expected_ms, bytes, frames, heartbeats
    cdef public list chunks
    cdef public bint eof

    cpdef make_chunk(self, start, end, ts_ns, source)
    cpdef make_stamp(self, ts_ns)
    cpdef add_chunk(self, Chunk chunk)
    cpdef add_packets(self, start, list sizes, list timestamps, sources)
    cpdef chunk_at(self, long long offset)
    cpdef is_trailing_eol(self, Chunk chunk, offset)
    cpdef consumed(self, end)
    cpdef prune(self)
