# Compiled from outbox.py (pipeline.compiled.SOURCE_MODULES): Outbox as an extension type, read
# typed by the model and the protocol state (model.pxd, protocol.pxd).

cdef class Outbox:
    cdef public object session_id, frames, secrets, last, unsettled
    cdef public dict tables, counts

    cpdef anomaly(self, source, kind, direction, at, stream_offset, detail)
    cpdef violation(self, kind, direction, at, offset, detail)
