# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""The flow pass's per-packet loop compiled: `packet_loop.feed_packets`, which stays the
readable reference, step for step (see its docstring for what the loop does).

Packets are read through a typed view of their records; a run's payloads are read with
`pread` straight into one buffer, which becomes the run's bytes when it is passed on.
`tests/pipeline/spark/test_packet_loop.py` holds this loop and the reference to the same tables.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport errno
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from posix.types cimport off_t
from posix.unistd cimport pread

import os

from pipeline.ingest.records import TcpPacket

DEF SYN = 0x02
DEF FIN = 0x01
DEF RST = 0x04
DEF NOT_BARE = SYN | FIN | RST


cdef packed struct Packet:  # pipeline.spark.pieces: PACKET_DTYPE and the merger's file_id
    int64_t ts_ns
    int64_t payload_offset
    int64_t record_offset
    uint32_t seq
    uint32_t ack
    int32_t payload_len
    int32_t wire_len
    int32_t window
    uint16_t flags
    uint8_t reverse
    uint8_t _pad
    int32_t file_id


cdef inline bint continues(int64_t nxt, int64_t high, uint32_t seq, int64_t size):
    """pipeline.reassembly.stream.continues"""
    return seq == <uint32_t>(nxt & 0xFFFFFFFF) and not (size <= 1 and nxt == high - 1)


cdef class _Files:
    """The capture files' descriptors, from `PayloadFiles`, and a buffer a run's payloads
    are read into."""

    cdef object files
    cdef list fds
    cdef char* buffer
    cdef Py_ssize_t used, capacity

    def __cinit__(self, files):
        self.files = files
        self.fds = [None] * len(files.paths)
        self.buffer = NULL
        self.used = self.capacity = 0

    def __dealloc__(self):
        free(self.buffer)

    cdef int fd(self, int32_t file_id) except -1:
        fd = self.fds[file_id]
        if fd is None:
            fd = self.fds[file_id] = self.files.fd(file_id)
        return fd

    cdef Py_ssize_t append(self, int32_t file_id, int64_t offset, Py_ssize_t length) except -1:
        """The payload at ``offset`` added to the buffer; its length as read (a file cut
        short reads short, as `os.pread` does)."""
        cdef char* grown
        cdef Py_ssize_t wanted = self.used + length
        if wanted > self.capacity:
            grown = <char*>realloc(self.buffer, max(wanted, 2 * self.capacity, 1 << 16))
            if grown == NULL:
                raise MemoryError()
            self.buffer = grown
            self.capacity = max(wanted, 2 * self.capacity, 1 << 16)
        cdef int fd = self.fd(file_id)
        cdef Py_ssize_t got = pread(fd, self.buffer + self.used, length, <off_t>offset)
        if got < 0:
            raise OSError(errno, os.strerror(errno))
        self.used += got
        return got

    cdef bytes take(self):
        data = PyBytes_FromStringAndSize(self.buffer, self.used)
        self.used = 0
        return data

    cdef bytes read(self, int32_t file_id, int64_t offset, Py_ssize_t length):
        self.append(file_id, offset, length)
        return self.take()


def feed_packets(const Packet[::1] packets, driver, tuple ends, files, Py_ssize_t run_packets):
    ip_a, port_a, ip_b, port_b = ends
    paths = files.paths
    cdef _Files reader = _Files(files)
    cdef Py_ssize_t i, got
    cdef const Packet* p
    cdef bint plain
    # the run: see packet_loop._Run
    cdef bint active = False, run_reverse = False, other_known = False
    cdef int64_t nxt = 0, high = 0, last_ns = 0, acked_ns = 0
    cdef Py_ssize_t acked = 0
    cdef list sizes = [], timestamps = [], sources = []
    run_src_ip = run_dst_ip = run_src_port = run_dst_port = None

    for i in range(packets.shape[0]):
        p = &packets[i]
        plain = not (p.flags & NOT_BARE)
        if active:
            if p.reverse == run_reverse:
                if (
                    plain
                    and p.payload_len
                    and p.payload_len == p.wire_len
                    and continues(nxt, high, p.seq, p.payload_len)
                ):
                    got = reader.append(p.file_id, p.payload_offset, p.payload_len)
                    sizes.append(got)
                    timestamps.append(p.ts_ns)
                    sources.append((paths[p.file_id], p.record_offset))
                    nxt += got
                    if nxt > high:
                        high = nxt
                    last_ns = p.ts_ns
                    if len(timestamps) >= run_packets:
                        if acked:
                            driver.bare_ack(run_dst_ip, run_dst_port, acked_ns, acked)
                            acked = 0
                        driver.data_run(
                            run_src_ip, run_src_port, reader.take(), sizes, timestamps,
                            sources, last_ns,
                        )
                        sizes, timestamps, sources = [], [], []
                    continue
            elif plain and not p.payload_len and not p.wire_len and other_known:
                acked += 1
                acked_ns = last_ns = p.ts_ns
                continue
            # the run ends
            active = False
            if acked:
                driver.bare_ack(run_dst_ip, run_dst_port, acked_ns, acked)
                acked = 0
            if timestamps:
                driver.data_run(
                    run_src_ip, run_src_port, reader.take(), sizes, timestamps, sources, last_ns
                )
                sizes, timestamps, sources = [], [], []
        if p.reverse:
            src_ip, src_port, dst_ip, dst_port = ip_b, port_b, ip_a, port_a
        else:
            src_ip, src_port, dst_ip, dst_port = ip_a, port_a, ip_b, port_b
        if not p.payload_len:
            if plain and not p.wire_len and driver.bare_ack(src_ip, src_port, p.ts_ns):
                continue
            payload = b""
        else:
            if plain and p.payload_len == p.wire_len:
                position = driver.in_order_position(src_ip, src_port)
                if position is not None and continues(
                    position[0], position[1], p.seq, p.payload_len
                ):
                    active, run_reverse = True, p.reverse
                    run_src_ip, run_src_port, run_dst_ip, run_dst_port = (
                        src_ip, src_port, dst_ip, dst_port
                    )
                    nxt, high = position
                    other_known = driver.takes_bare_ack(dst_ip, dst_port)
                    got = reader.append(p.file_id, p.payload_offset, p.payload_len)
                    sizes.append(got)
                    timestamps.append(p.ts_ns)
                    sources.append((paths[p.file_id], p.record_offset))
                    nxt += got
                    if nxt > high:
                        high = nxt
                    last_ns = p.ts_ns
                    continue
            payload = reader.read(p.file_id, p.payload_offset, p.payload_len)
        packet = TcpPacket(
            p.ts_ns, src_ip, src_port, dst_ip, dst_port, p.seq, p.ack, p.flags, p.window,
            p.payload_offset, p.payload_len, p.wire_len, p.record_offset,
        )
        driver.packet(packet, payload, (paths[p.file_id], p.record_offset))
    if acked:
        driver.bare_ack(run_dst_ip, run_dst_port, acked_ns, acked)
    if timestamps:
        driver.data_run(
            run_src_ip, run_src_port, reader.take(), sizes, timestamps, sources, last_ns
        )
