# Compiled from driver.py (pipeline.compiled.SOURCE_MODULES): the driver and its state as extension
# types, its in-order path calling the tracker and the model typed.

import cython

from pipeline.reassembly.connections cimport ConnectionTracker as CConnectionTracker
from pipeline.session.model cimport SessionModel as CSessionModel
from pipeline.tls.transport cimport TlsTransport as CTlsTransport


cdef class DriverState:
    cdef public CConnectionTracker tracker
    cdef public CSessionModel model
    cdef public object transport


cdef class ConnectionDriver:
    cdef public object config, _first_source
    cdef public DriverState _state
    cdef public dict _out
    cdef public list _ended

    @cython.locals(tracker=CConnectionTracker, model=CSessionModel, tls=CTlsTransport)
    cpdef data_run(self, src_ip, src_port, data, list sizes, list timestamps, list sources, last_ns)

    cpdef _fast_path(self)
