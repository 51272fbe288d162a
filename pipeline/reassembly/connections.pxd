# Compiled from connections.py (pipeline.compiled.SOURCE_MODULES): the tracker and its connection
# as extension types, with the per-packet methods typed (the connection driver reads the tracker
# typed: driver.pxd).

import cython

from pipeline.reassembly.stream cimport StreamReassembler as CStreamReassembler


cdef class Connection:
    cdef public object connection_id, client_ip, client_port, server_ip, server_port
    cdef public object role_source, first_ts_ns, last_ts_ns, client_isn, server_isn
    cdef public object client_end, server_end
    cdef public Py_ssize_t client_packets, server_packets


cdef class ConnectionTracker:
    cdef public object broker_ports, max_pending_bytes, history_bytes, reuse_after_idle_ns
    cdef public Connection connection
    cdef public object connections_opened, foreign_packets
    cdef public dict _streams

    @cython.locals(stream=CStreamReassembler, conn=Connection)
    cpdef add_bare_ack(self, src_ip, src_port, ts_ns, count=*)

    cpdef takes_bare_ack(self, src_ip, src_port)

    @cython.locals(stream=CStreamReassembler, conn=Connection)
    cpdef in_order_position(self, src_ip, src_port)

    @cython.locals(stream=CStreamReassembler, conn=Connection)
    cpdef add_run(self, src_ip, src_port, data, list sizes, ts_ns, last_ns)

    @cython.locals(conn=Connection)
    cpdef _known_sender(self, src_ip, src_port)


cpdef _count(Connection conn, bint from_client, ts_ns, Py_ssize_t count=*)
