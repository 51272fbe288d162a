# Compiled from session.py (pipeline.compiled.SOURCE_MODULES): a connection's TLS state and its
# two directions as extension types, so that the bulk path (`open_run`, `takes_run`) reads them
# as C struct members.

import cython

from pipeline.tls.records cimport RecordReader as CRecordReader


cdef class _Side:
    cdef public CRecordReader reader
    cdef public object framer, cipher, pending, secret, plain_offset
    cdef public bint handshake_done, stopped
    cdef public Py_ssize_t failed
    cdef public long long bulk_bytes, bulk_last_ns


cdef class TlsSession:
    cdef public object facts, _keys, _random, _suite, _bulk
    cdef public dict _sides
    cdef public bint _etm, _tls13

    @cython.locals(side=_Side)
    cpdef bint takes_run(self, direction)

    @cython.locals(side=_Side, reader=CRecordReader)
    cpdef tuple open_run(self, direction, bytes data, list sizes, list timestamps, list plain_starts, list tcp_starts)
