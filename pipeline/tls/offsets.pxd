# Compiled from offsets.py (pipeline.compiled.SOURCE_MODULES): a direction's record offsets as
# an extension type; the model looks up the TCP offset of each frame of STOMP inside TLS in C
# (model.pxd), the transport adds the records (transport.pxd).

cdef class RecordOffsets:
    cdef public list plain, tcp

    cpdef tcp_of(self, plain_offset)
