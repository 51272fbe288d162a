"""A connection still open at the end of a batch, as the rows that carry it to the next batch.

A connection's state is a pickle, except the rows of the unsettled MESSAGEs its model spilled
to disk (`pipeline.session.spilled.SpillPayload`): those stay in their file and follow the
pickle in chunks of at most `CHUNK_BYTES`, so that a consumer lagging a million MESSAGEs behind
is carried without its rows in memory at once, here or in Spark's JVM. The first chunk holds
the sizes of the payloads, then the pickle; the payloads' bytes come in the chunks after it, in
order (the state rows' ``record_offset``).
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pipeline.driver import DriverState
from pipeline.session.spilled import SpillPayload

STATE_VERSION = 9  # 1: pipeline.flows.FlowState, before the connection driver; 2: eager stamps;
# 3: messages and acks rows as dicts; 5: the WebSocket transport's bound on held bytes and the
# de-framer's count of messages skipped after an inflate failure; 6: the model's TLS facts;
# 7: streams, chunks and message rows of one class each, compiled from their source; 8: a TLS
# connection's record offsets (pipeline.tls.offsets), shared with its model; 9: spilled rows
# in chunks beside the pickle
CHUNK_BYTES = 8 << 20  # a state row's bytes at most, past the first
_MAGIC = b"SLC\x09"  # a chunked state (an earlier release's state is a bare pickle)
_COUNT = struct.Struct("<I")
_SIZE = struct.Struct("<Q")


@dataclass(slots=True)
class CarriedState:
    driver: DriverState
    version: int = STATE_VERSION


@dataclass(frozen=True, slots=True)
class CarriedChunks:
    """A connection's state as the bytes of its state rows, made as they are taken."""

    head: bytes  # the payloads' sizes, then the pickle
    payloads: tuple[SpillPayload, ...]

    def chunks(self) -> Iterator[bytes]:
        yield self.head
        for payload in self.payloads:
            yield from payload.chunks(CHUNK_BYTES)


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, payloads: list[SpillPayload]) -> None:
        super().__init__(file, protocol=5)
        self.payloads = payloads

    def persistent_id(self, obj: object) -> int | None:
        if type(obj) is SpillPayload:
            self.payloads.append(obj)
            return len(self.payloads) - 1
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, payloads: list[SpillPayload]) -> None:
        super().__init__(file)
        self.payloads = payloads

    def persistent_load(self, pid: object) -> SpillPayload:
        if type(pid) is not int or not 0 <= pid < len(self.payloads):
            raise pickle.UnpicklingError(f"carried state names no payload {pid!r}")
        return self.payloads[pid]


def dump_state(state: DriverState) -> CarriedChunks:
    payloads: list[SpillPayload] = []
    pickled = io.BytesIO()
    _Pickler(pickled, payloads).dump(CarriedState(state))
    sizes = b"".join(_SIZE.pack(payload.size) for payload in payloads)
    head = _MAGIC + _COUNT.pack(len(payloads)) + sizes + pickled.getvalue()
    return CarriedChunks(head, tuple(payloads))


class StateReader:
    """A carried connection's state rows, given in order (`add`), back into its state (`load`):
    the payloads' chunks go straight to their files."""

    def __init__(self) -> None:
        self._pickle: bytes | None = None
        self._sizes: list[int] = []
        self._payloads: list[SpillPayload] = []
        self._filling = 0  # the payload the next chunk goes to

    def add(self, chunk: bytes) -> None:
        if self._pickle is None:
            self._read_head(chunk)
            return
        sizes, payloads = self._sizes, self._payloads
        while self._filling < len(sizes) and payloads[self._filling].size == sizes[self._filling]:
            self._filling += 1
        if self._filling == len(sizes):
            raise ValueError(_DAMAGED + ": more rows than its payloads hold")
        payload = payloads[self._filling]
        if payload.size + len(chunk) > sizes[self._filling]:
            raise ValueError(_DAMAGED + ": a row past its payload's size")
        payload.append(chunk)

    def load(self) -> DriverState:
        if self._pickle is None:
            raise ValueError(_DAMAGED + ": no rows")
        if [p.size for p in self._payloads] != self._sizes:
            raise ValueError(_DAMAGED + ": its payloads are cut short")
        try:
            carried = _Unpickler(io.BytesIO(self._pickle), self._payloads).load()
        except (ImportError, AttributeError) as error:  # classes of another release
            raise ValueError(_INCOMPATIBLE) from error
        if not isinstance(carried, CarriedState) or carried.version != STATE_VERSION:
            raise ValueError(_INCOMPATIBLE)
        return carried.driver

    def _read_head(self, chunk: bytes) -> None:
        if not chunk.startswith(_MAGIC):
            try:  # an earlier release's bare pickle: refused by its version
                pickle.loads(chunk)
            except (ImportError, AttributeError, TypeError) as error:  # its classes, changed
                raise ValueError(_INCOMPATIBLE) from error
            raise ValueError(_INCOMPATIBLE)
        at = len(_MAGIC)
        if len(chunk) < at + _COUNT.size:
            raise ValueError(_DAMAGED + ": its first row is cut short")
        (count,) = _COUNT.unpack_from(chunk, at)
        at += _COUNT.size
        if len(chunk) < at + count * _SIZE.size:
            raise ValueError(_DAMAGED + ": its first row is cut short")
        self._sizes = [_SIZE.unpack_from(chunk, at + i * _SIZE.size)[0] for i in range(count)]
        self._pickle = chunk[at + count * _SIZE.size :]
        self._payloads = [SpillPayload() for _ in range(count)]


def load_state(rows: Iterable[bytes]) -> DriverState:
    """The state of a connection's state rows, all of them, in order."""
    reader = StateReader()
    for row in rows:
        reader.add(row)
    return reader.load()


_INCOMPATIBLE = (
    "carried connection state from an incompatible version of stomp-lake: close the open "
    "connections with the release that carried them (--open-connections close), then upgrade"
)
_DAMAGED = "carried connection state is damaged"
