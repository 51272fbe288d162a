# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""The flow pass's per-packet loop compiled: `packet_loop.feed_packets`, which stays the
readable reference, step for step (see its docstring for what the loop does).

Packets are read through a typed view of their records; a run's payloads are read with
`pread` straight into one buffer, which becomes the run's bytes when it is passed on. Payloads
that lie close together in a file are read by one `pread` (`_Files`): the reference reads each
on its own, with the same result.
`tests/pipeline/spark/test_packet_loop.py` holds this loop and the reference to the same driver
calls and tables.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport errno
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from posix.types cimport off_t
from posix.unistd cimport pread

import os

from pipeline.ingest.records import TcpPacket
from pipeline.net import FIN, RST, SYN

cdef unsigned int NOT_BARE = SYN | FIN | RST
# A span read takes the payloads that follow within SPAN_GAP bytes of one another (the records'
# own headers, a bare ACK or two) up to SPAN_BYTES in all.
cdef enum:
    SPAN_GAP = 512
    SPAN_BYTES = 1 << 18


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
    are read into.

    Payloads are read by span: where the flow's next packets lie close behind a packet in the
    same file (a sender's burst: only their own record headers between them), one `pread`
    fetches them all, and each payload is then copied out of the span. A payload outside the
    span is read on its own, exactly as before, so a file cut short still reads short."""

    cdef object files
    cdef list fds
    cdef const Packet[::1] packets
    cdef char* buffer
    cdef Py_ssize_t used, capacity
    cdef char* span
    cdef int32_t span_file
    cdef int64_t span_start, span_stop

    def __cinit__(self, files, const Packet[::1] packets):
        self.files = files
        self.fds = [None] * len(files.paths)
        self.packets = packets
        self.buffer = self.span = NULL
        self.used = self.capacity = 0
        self.span_file, self.span_start, self.span_stop = -1, 0, 0

    def __dealloc__(self):
        free(self.buffer)
        free(self.span)

    cdef int fd(self, int32_t file_id) except -1:
        fd = self.fds[file_id]
        if fd is None:
            fd = self.fds[file_id] = self.files.fd(file_id)
        return fd

    cdef Py_ssize_t append(self, Py_ssize_t index) except -1:
        """Packet ``index``'s payload added to the buffer; its length as read (a file cut
        short reads short, as `os.pread` does)."""
        cdef const Packet* p = &self.packets[index]
        cdef Py_ssize_t length = p.payload_len
        cdef char* grown
        cdef Py_ssize_t wanted = self.used + length
        if length < 0:
            raise ValueError(f"negative payload length {length}")
        if wanted > self.capacity:
            wanted = max(wanted, 2 * self.capacity, 1 << 16)
            grown = <char*>realloc(self.buffer, wanted)
            if grown == NULL:
                raise MemoryError()
            self.buffer, self.capacity = grown, wanted
        if not self.in_span(p):
            self.read_span(index)
        if self.in_span(p):
            memcpy(self.buffer + self.used, self.span + (p.payload_offset - self.span_start), length)
            self.used += length
            return length
        cdef Py_ssize_t got = pread(self.fd(p.file_id), self.buffer + self.used, length,
                                    <off_t>p.payload_offset)
        if got < 0:
            raise OSError(errno, os.strerror(errno))
        self.used += got
        return got

    cdef inline bint in_span(self, const Packet* p):
        return (
            p.file_id == self.span_file
            and p.payload_offset >= self.span_start
            and p.payload_offset + p.payload_len <= self.span_stop
        )

    cdef int read_span(self, Py_ssize_t index) except -1:
        """Reads the span from packet ``index``'s payload to the end of the last payload that
        follows it closely in the same file (at most SPAN_BYTES), when there is more than one;
        otherwise leaves the span empty."""
        cdef const Packet* first = &self.packets[index]
        cdef const Packet* q
        cdef int64_t start = first.payload_offset
        cdef int64_t stop = start + first.payload_len
        cdef Py_ssize_t j
        cdef Py_ssize_t followers = 0
        self.span_file, self.span_start, self.span_stop = -1, 0, 0
        for j in range(index + 1, self.packets.shape[0]):
            q = &self.packets[j]
            if q.file_id != first.file_id or q.payload_offset < stop:
                break
            if q.payload_len <= 0:
                continue
            if q.payload_offset - stop > SPAN_GAP or q.payload_offset + q.payload_len - start > SPAN_BYTES:
                break
            stop = q.payload_offset + q.payload_len
            followers += 1
        if not followers:
            return 0
        if self.span == NULL:
            self.span = <char*>malloc(SPAN_BYTES)
            if self.span == NULL:
                raise MemoryError()
        cdef Py_ssize_t got = pread(self.fd(first.file_id), self.span, stop - start, <off_t>start)
        if got < 0:
            raise OSError(errno, os.strerror(errno))
        self.span_file, self.span_start, self.span_stop = first.file_id, start, start + got
        return 0

    cdef bytes take(self):
        data = PyBytes_FromStringAndSize(self.buffer, self.used)
        self.used = 0
        return data

    cdef bytes read(self, Py_ssize_t index):
        self.append(index)
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

    cdef int add(self, Py_ssize_t index) except -1:
        cdef const Packet* p = &self.reader.packets[index]
        cdef Py_ssize_t got = self.reader.append(index)
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
    cdef _Files reader = _Files(files, packets)
    cdef _Run run = _Run(driver, reader, paths)
    cdef Py_ssize_t i
    cdef const Packet* p
    cdef bint plain

    for i in range(packets.shape[0]):
        p = &packets[i]
        plain = not (p.flags & NOT_BARE)
        if run.active:
            if run.takes(p, plain):
                run.add(i)
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
                    run.add(i)
                    continue
            payload = reader.read(i)
        packet = TcpPacket(
            p.ts_ns, src_ip, src_port, dst_ip, dst_port, p.seq, p.ack, p.flags, p.window,
            p.payload_offset, p.payload_len, p.wire_len, p.record_offset,
        )
        driver.packet(packet, payload, (paths[p.file_id], p.record_offset))
    run.flush()
