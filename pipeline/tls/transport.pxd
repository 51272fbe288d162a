# Compiled from transport.py (pipeline.compiled.SOURCE_MODULES): the TLS transport and its record
# offsets as extension types; the driver's in-order path calls `receive_run` (driver.pxd), the
# model `RecordOffsets.tcp_of` for each frame of STOMP inside TLS.

import cython

from pipeline.tls.session cimport TlsSession as CTlsSession


cdef class RecordOffsets:
    cdef public list plain, tcp

    cpdef tcp_of(self, plain_offset)


cdef class TlsTransport:
    cdef public CTlsSession tls
    cdef public object inner
    cdef public dict _maps
    cdef public bint runs

    @cython.locals(offsets=RecordOffsets)
    cpdef receive_run(self, model, direction, tcp_offset, bytes data, list sizes, list timestamps, list sources)
