# cython: language_level=3
"""`pipeline/session/streams.py` compiled: the same classes and functions, with a chunk made per
capture packet and the datetime of a stamp made in C. ``streams.py`` is the readable reference;
`pipeline.session.streams.implementation` chooses between them, and
``tests/pipeline/session/test_streams.py`` runs every test on both."""

from bisect import bisect_right
from datetime import UTC
from operator import itemgetter

from cpython.datetime cimport date_new, datetime_new, import_datetime

from pipeline.stomp import Decoder

import_datetime()

cdef Py_ssize_t _MAX_CHUNKS = 8192  # as in streams.py
cdef Py_ssize_t _KEEP_RECENT = 4096
cdef long long _US_PER_DAY = 86_400_000_000
cdef object _UTC = UTC


cdef inline void _civil_from_days(long long days, int* year, int* month, int* day):
    """The proleptic Gregorian date ``days`` after 1970-01-01 (H. Hinnant's civil_from_days)."""
    cdef long long z = days + 719_468
    cdef long long era = (z if z >= 0 else z - 146_096) // 146_097
    cdef long long doe = z - era * 146_097
    cdef long long yoe = (doe - doe // 1_460 + doe // 36_524 - doe // 146_096) // 365
    cdef long long doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    cdef long long mp = (5 * doy + 2) // 153
    cdef long long m = mp + 3 if mp < 10 else mp - 9
    year[0] = <int>(yoe + era * 400 + (1 if m <= 2 else 0))
    month[0] = <int>m
    day[0] = <int>(doy - (153 * mp + 2) // 5 + 1)


cdef class Stamp:
    """A capture time; its datetime is made when first asked for."""

    def __init__(self, ts_ns):
        self.ts_ns = ts_ns
        self._ts = None

    @property
    def ts(self):
        # Floor division throughout, as `clock.to_datetime` rounds (times before 1970 too).
        cdef long long micros, days, rest
        cdef int year, month, day
        if self._ts is None:
            micros = (<long long>self.ts_ns) // 1000
            days = micros // _US_PER_DAY
            rest = micros - days * _US_PER_DAY
            _civil_from_days(days, &year, &month, &day)
            self._ts = datetime_new(
                year, month, day, <int>(rest // 3_600_000_000), <int>(rest // 60_000_000 % 60),
                <int>(rest // 1_000_000 % 60), <int>(rest % 1_000_000), _UTC
            )
        return self._ts

    @property
    def date(self):
        cdef int year, month, day
        _civil_from_days((<long long>self.ts_ns) // 1000 // _US_PER_DAY, &year, &month, &day)
        return date_new(year, month, day)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == (<Stamp>other)._fields()

    __hash__ = None

    def __repr__(self):
        return f"{type(self).__name__}{self._fields()!r}"

    def __reduce__(self):
        return type(self), self._fields()

    cpdef tuple _fields(self):
        return (self.ts_ns,)


cdef class Chunk(Stamp):
    """Bytes [start, end) of one direction, delivered by one capture packet (or segment)."""

    def __init__(
        self, ts_ns, start, end, file, file_offset, tcp_start=None, beat_message=False,
        tcp_frames=(),
    ):
        self.ts_ns = ts_ns
        self._ts = None
        self.start = start
        self.end = end
        self.file = file
        self.file_offset = file_offset
        self.tcp_start = tcp_start
        self.beat_message = beat_message
        self.tcp_frames = tcp_frames

    def tcp_offset_of(self, offset):
        frames = self.tcp_frames
        if not frames or offset < frames[0][0]:
            return self.tcp_start
        return frames[bisect_right(frames, offset, key=itemgetter(0)) - 1][1]

    cpdef tuple _fields(self):
        return (
            self.ts_ns, self.start, self.end, self.file, self.file_offset, self.tcp_start,
            self.beat_message, self.tcp_frames,
        )


cdef inline Chunk _chunk(object start, object end, object ts_ns, object source):
    cdef Chunk chunk = Chunk.__new__(Chunk)
    chunk.ts_ns = ts_ns
    chunk.start = start
    chunk.end = end
    if source is not None:
        chunk.file = source[0]
        chunk.file_offset = source[1]
    chunk.tcp_frames = ()
    return chunk


def make_stamp(ts_ns):
    return Stamp(ts_ns)


def make_chunk(start, end, ts_ns, source):
    return _chunk(start, end, ts_ns, source)


cdef class DirectionStream:
    """One direction of a connection (see streams.py)."""

    def __init__(self, direction):
        self.direction = direction
        self.decoder = None
        self.origin = 0
        self.next_offset = 0
        self.chunks = []
        self.keep_from = 0
        self.trailer_end = -1
        self.trailer_chunk = None
        self.expected_ms = None
        self.bytes = 0
        self.frames = 0
        self.heartbeats = 0
        self.eof = False

    def start(self, offset, version, *, lenient, resync):
        self.origin = self.next_offset = self.keep_from = offset
        self.decoder = Decoder(version, lenient=lenient, offset=offset, resync=resync)
        return self.decoder

    cpdef make_chunk(self, start, end, ts_ns, source):
        return _chunk(start, end, ts_ns, source)

    cpdef make_stamp(self, ts_ns):
        return Stamp(ts_ns)

    cpdef add_chunk(self, Chunk chunk):
        self.chunks.append(chunk)
        self.next_offset = chunk.end
        self.bytes += chunk.end - chunk.start

    cpdef add_packets(self, start, list sizes, list timestamps, sources):
        cdef Py_ssize_t index, count = len(sizes)
        cdef long long at = start, size, total = 0
        if len(timestamps) != count or len(sources) != count:
            raise ValueError("sizes, timestamps and sources differ in length")
        for index in range(count):
            size = sizes[index]
            self.chunks.append(_chunk(at, at + size, timestamps[index], sources[index]))
            at += size
            total += size
        if count:
            self.next_offset = at
            self.bytes += total

    cpdef chunk_at(self, long long offset):
        cdef list chunks = self.chunks
        cdef Py_ssize_t index
        for index in range(len(chunks) - 1, -1, -1):
            if (<Chunk?>chunks[index]).start <= offset:
                return chunks[index]
        return chunks[0] if chunks else None

    cpdef is_trailing_eol(self, Chunk chunk, offset):
        if chunk.beat_message:
            return False
        if chunk is self.trailer_chunk or self.expected_ms is None:
            return True
        previous = self.chunk_at(offset - 1)
        if previous is None or previous is chunk:
            return True
        return (chunk.ts_ns - previous.ts_ns) * 2 < self.expected_ms * 1_000_000

    cpdef consumed(self, end):
        self.keep_from = end - 1

    cpdef prune(self):
        cdef list chunks = self.chunks
        keep_from = self.keep_from
        cdef Py_ssize_t drop = 0, last = len(chunks) - 1
        while drop < last and (<Chunk?>chunks[drop]).end <= keep_from:
            drop += 1
        if drop:
            del chunks[:drop]
        if len(chunks) > _MAX_CHUNKS:
            del chunks[1 : len(chunks) - _KEEP_RECENT]



def adopt(stream):
    """``stream`` as a compiled stream: a stream of the reference module (streams.py, carried
    by a pure-Python run) is copied into these classes, its chunks with it, so that the compiled
    model, which reads its streams typed, resumes it."""
    if type(stream) is DirectionStream:
        return stream
    cdef DirectionStream copy = DirectionStream.__new__(DirectionStream)
    copied = {}
    cdef list chunks = []
    for chunk in stream.chunks:
        copied[id(chunk)] = _copied_chunk(chunk)
        chunks.append(copied[id(chunk)])
    trailer = stream.trailer_chunk
    copy.direction = stream.direction
    copy.decoder = stream.decoder
    copy.origin = stream.origin
    copy.next_offset = stream.next_offset
    copy.chunks = chunks
    copy.keep_from = stream.keep_from
    copy.trailer_end = stream.trailer_end
    copy.trailer_chunk = (
        None if trailer is None else copied.get(id(trailer)) or _copied_chunk(trailer)
    )
    copy.expected_ms = stream.expected_ms
    copy.bytes = stream.bytes
    copy.frames = stream.frames
    copy.heartbeats = stream.heartbeats
    copy.eof = stream.eof
    return copy


cdef Chunk _copied_chunk(chunk):
    return Chunk(
        chunk.ts_ns, chunk.start, chunk.end, chunk.file, chunk.file_offset, chunk.tcp_start,
        chunk.beat_message, chunk.tcp_frames,
    )
