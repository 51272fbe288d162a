# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""The flow pass's per-packet loop compiled: `packet_loop.feed_packets`, which stays the
readable reference, step for step (see its docstring for what the loop does).

Packets are read through a typed view of their records; a run's payloads are read with
`pread` straight into one buffer, which becomes the run's bytes when it is passed on.
`tests/pipeline/spark/test_packet_loop.py` holds this loop and the reference to the same driver
calls and tables.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport errno
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, realloc
from posix.types cimport off_t
from posix.unistd cimport pread

import os

from pipeline.ingest.records import TcpPacket
from pipeline.net import FIN, RST, SYN

cdef unsigned int NOT_BARE = SYN | FIN | RST


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
            wanted = max(wanted, 2 * self.capacity, 1 << 16)
            grown = <char*>realloc(self.buffer, wanted)
            if grown == NULL:
                raise MemoryError()
            self.buffer, self.capacity = grown, wanted
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


cdef class _Run:
    """packet_loop._Run: in-order data packets of one sender, their payloads in the reader's
    buffer, and the other sender's bare ACKs in between, counted."""

    cdef object driver, paths
    cdef _Files reader
    cdef bint active
    cdef bint reverse, other_known
    cdef object src_ip, src_port, dst_ip, dst_port
    cdef int64_t nxt, high, last_ns, acked_ns
    cdef Py_ssize_t acked
    cdef list sizes, timestamps, sources

    def __cinit__(self, driver, _Files reader, paths):
        self.driver, self.reader, self.paths = driver, reader, paths
        self.active = False
        self.acked = 0
        self.sizes, self.timestamps, self.sources = [], [], []

    cdef int start(self, const Packet* p, src_ip, src_port, dst_ip, dst_port, position) except -1:
        self.active, self.reverse = True, p.reverse
        self.src_ip, self.src_port, self.dst_ip, self.dst_port = src_ip, src_port, dst_ip, dst_port
        self.nxt, self.high = position
        self.other_known = self.driver.takes_bare_ack(dst_ip, dst_port)
        return 0

    cdef inline bint takes(self, const Packet* p, bint plain):
        """Whether ``p`` continues the run exactly."""
        return (
            p.reverse == self.reverse
            and plain
            and p.payload_len
            and p.payload_len == p.wire_len
            and continues(self.nxt, self.high, p.seq, p.payload_len)
        )

    cdef inline bint takes_ack(self, const Packet* p, bint plain):
        """Whether ``p`` is a bare ACK of the other sender the run counts."""
        return (
            p.reverse != self.reverse
            and plain
            and not p.payload_len
            and not p.wire_len
            and self.other_known
        )

    cdef int add(self, const Packet* p) except -1:
        cdef Py_ssize_t got = self.reader.append(p.file_id, p.payload_offset, p.payload_len)
        self.sizes.append(got)
        self.timestamps.append(p.ts_ns)
        self.sources.append((self.paths[p.file_id], p.record_offset))
        self.nxt += got
        if self.nxt > self.high:
            self.high = self.nxt
        self.last_ns = p.ts_ns
        return 0

    cdef inline void add_ack(self, const Packet* p):
        self.acked += 1
        self.acked_ns = self.last_ns = p.ts_ns

    cdef int flush(self) except -1:
        """End the run, passing on what it gathered."""
        self.active = False
        return self.pass_on()

    cdef int pass_on(self) except -1:
        """Pass the packets and bare ACKs gathered on; the run goes on."""
        if self.acked:
            self.driver.bare_ack(self.dst_ip, self.dst_port, self.acked_ns, self.acked)
            self.acked = 0
        if self.timestamps:
            self.driver.data_run(
                self.src_ip, self.src_port, self.reader.take(), self.sizes, self.timestamps,
                self.sources, self.last_ns,
            )
            self.sizes, self.timestamps, self.sources = [], [], []
        return 0


def feed_packets(const Packet[::1] packets, driver, tuple ends, files, Py_ssize_t run_packets):
    ip_a, port_a, ip_b, port_b = ends
    paths = files.paths
    cdef _Files reader = _Files(files)
    cdef _Run run = _Run(driver, reader, paths)
    cdef Py_ssize_t i
    cdef const Packet* p
    cdef bint plain

    for i in range(packets.shape[0]):
        p = &packets[i]
        plain = not (p.flags & NOT_BARE)
        if run.active:
            if run.takes(p, plain):
                run.add(p)
                if len(run.timestamps) >= run_packets:
                    run.pass_on()
                continue
            if run.takes_ack(p, plain):
                run.add_ack(p)
                continue
            run.flush()
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
                    run.start(p, src_ip, src_port, dst_ip, dst_port, position)
                    run.add(p)
                    continue
            payload = reader.read(p.file_id, p.payload_offset, p.payload_len)
        packet = TcpPacket(
            p.ts_ns, src_ip, src_port, dst_ip, dst_port, p.seq, p.ack, p.flags, p.window,
            p.payload_offset, p.payload_len, p.wire_len, p.record_offset,
        )
        driver.packet(packet, payload, (paths[p.file_id], p.record_offset))
    run.flush()
