# Compiled from streams.py (pipeline.compiled.SOURCE_MODULES): stamps, chunks and streams as
# extension types, read as C structs by the model (model.pxd); a chunk is made per packet.

import cython


cdef class Stamp:
    cdef public object ts_ns, _ts

    cpdef tuple fields(self)


cdef class Chunk(Stamp):
    cdef public object start, end, file, file_offset, tcp_start, tcp_frames
    cdef public bint beat_message


cpdef Stamp make_stamp(ts_ns)

@cython.locals(chunk=Chunk)
cpdef Chunk make_chunk(start, end, ts_ns, source)


cdef class DirectionStream:
    cdef public object direction, decoder, origin, next_offset, keep_from, trailer_end
    cdef public object trailer_chunk, expected_ms, bytes, frames, heartbeats
    cdef public list chunks
    cdef public bint eof

    cpdef Chunk make_chunk(self, start, end, ts_ns, source)
    cpdef Stamp make_stamp(self, ts_ns)
    cpdef add_chunk(self, Chunk chunk)

    @cython.locals(index=Py_ssize_t, at="long long", size="long long")
    cpdef add_packets(self, start, list sizes, list timestamps, sources)

    @cython.locals(chunks=list, index=Py_ssize_t, chunk=Chunk)
    cpdef chunk_at(self, long long offset)

    cpdef is_trailing_eol(self, Chunk chunk, offset)
    cpdef consumed(self, end)

    @cython.locals(chunks=list, drop=Py_ssize_t, last=Py_ssize_t, chunk=Chunk)
    cpdef prune(self)
