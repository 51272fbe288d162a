# Compiled from stream.py (pipeline.compiled.SOURCE_MODULES): the reassembler and its tail as
# extension types, with the in-order path's methods typed (the connection tracker reads them
# typed: connections.pxd). stream.py stays the source and the pure-Python reference.

cdef class DeliveredTail:
    cdef public list pieces
    cdef public object skip, used

    cpdef keep(self, data, kept)


cdef class StreamReassembler:
    cdef public object _origin, _next, _pending_bytes, _history_start, _fin, _high, _last_ts
    cdef public list _starts, _segments, _holes
    cdef public DeliveredTail _history
    cdef public object max_pending_bytes, history_bytes, stats

    cpdef in_order_position(self)
    cpdef add_run(self, data, list sizes, ts_ns)
    cpdef touch(self, ts_ns)
    cpdef _history_after(self, data, list sizes)
    cpdef _keep_tail(self, data, kept, end)
