# Compiled from connections.py (pipeline.compiled.SOURCE_MODULES): the tracker as an extension
# type, with its per-packet methods typed (the connection driver reads it typed: driver.pxd).

import cython

from pipeline.reassembly.stream cimport StreamReassembler as CStreamReassembler


cdef class ConnectionTracker:
    cdef public object broker_ports, max_pending_bytes, history_bytes, reuse_after_idle_ns
    cdef public object connection, connections_opened, foreign_packets
    cdef public dict _streams

    @cython.locals(stream=CStreamReassembler)
    cpdef add_bare_ack(self, src_ip, src_port, ts_ns, count=*)

    cpdef takes_bare_ack(self, src_ip, src_port)

    cpdef in_order_position(self, src_ip, src_port)

    @cython.locals(stream=CStreamReassembler)
    cpdef add_run(self, src_ip, src_port, data, list sizes, ts_ns, last_ns)

    cpdef _known_sender(self, src_ip, src_port)
