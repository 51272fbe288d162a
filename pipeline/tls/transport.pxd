# Compiled from transport.py (pipeline.compiled.SOURCE_MODULES): the TLS transport as an
# extension type; the driver's in-order path calls `receive_run` (driver.pxd).

import cython

from pipeline.session.model cimport SessionModel as CSessionModel
from pipeline.tls.offsets cimport RecordOffsets as CRecordOffsets
from pipeline.tls.session cimport TlsSession as CTlsSession


cdef class TlsTransport:
    cdef public CTlsSession tls
    cdef public object inner
    cdef public dict _maps
    cdef public bint runs

    @cython.locals(offsets=CRecordOffsets)
    cpdef receive_run(self, CSessionModel model, direction, tcp_offset, bytes data, list sizes, list timestamps, list sources)
