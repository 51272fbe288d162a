"""Unsettled MESSAGEs of a connection moved out of memory: their rows on disk, a compact record
of each in memory.

A consumer that lags far behind its deliveries (ACKs hours late, or never for part of them) is
traffic worth recording, not a fault; holding every unsettled MESSAGE's row in memory would
bound it by the memory of a task. Past ``ModelOptions.max_pending_in_memory`` the oldest
unsettled MESSAGEs come here (`DeliveryLedger.spill_oldest`): the row is pickled to an
unnamed temporary file, and memory keeps 32 bytes of record a MESSAGE in five arrays and its
ack / message-id keys in a `key_index` (11 to 22 bytes a key): 53 to 75 bytes a MESSAGE,
about 60 MB for a million (`benchmarks/results/pending.md`). What the model decides never
depends on where a MESSAGE is held: a spilled one is found, settled, given up and closed
exactly as one in memory would be.

Slots number the spilled MESSAGEs in the order they came, which is the order they were
delivered in. Rows are written a `WRITE_BYTES` buffer at a time (read from the buffer until
then), and the file is rewritten without the settled rows once they are most of it.
"""

from __future__ import annotations

import os
import pickle
import struct
import tempfile
from array import array
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from pipeline.session.key_index import key_hash, new_key_index, slot_near

if TYPE_CHECKING:
    from pipeline.session.message_rows import MessageRow

# Memory a spilled MESSAGE holds, as `DeliveryLedger.pending_bytes` counts it: its record (32
# bytes) and two keys' index entries (11 to 22 bytes each), rounded up. A constant, so that both
# twins give up the same MESSAGEs.
SPILLED_BYTES = 80
SETTLED = -1  # the length of a slot whose row is no longer wanted
REWRITE_AFTER = 64 << 20  # settled bytes in the file before it may be rewritten without them
WRITE_BYTES = 256 << 10  # rows spilled are written to the file this many bytes at a time
PROTOCOL = pickle.HIGHEST_PROTOCOL
_HEADER_LENGTH = struct.Struct("<I")

Keys = tuple[str, ...]


class SpilledDeliveries:
    __slots__ = (
        "_file",
        "_end",
        "_written",
        "_unwritten",
        "_settled_bytes",
        "_counts",
        "_frame_index",
        "_delivered_ns",
        "_subscription",
        "_offset",
        "_length",
        "_base",
        "_head",
        "_count",
        "_index",
        "_dropped",
        "_subscription_heads",
        "_last_read",
        "_last_header",
    )

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None  # made at the first spill
        self._end = 0  # bytes of the file, with those still in `_unwritten`
        self._written = 0  # of them, bytes written to the file; the rest are in `_unwritten`
        self._unwritten = bytearray()
        self._settled_bytes = 0  # of them, rows no longer wanted
        self._counts: dict[int, int] = {}  # slots not settled, by subscription
        # a record a slot, slot ``_base + i`` at index i
        self._frame_index = array("q")
        self._delivered_ns = array("q")
        self._subscription = array("i")
        self._offset = array("q")
        self._length = array("i")
        self._base = 0
        self._head = 0  # the oldest slot not settled (or the next slot)
        self._count = 0  # slots not settled
        self._index = new_key_index()
        self._dropped: dict[int, set[str]] = {}  # keys a later delivery took from a slot
        self._subscription_heads: dict[int, int] = {}  # no slot of it before this one
        # the slot last read and its bytes: an ACK checks the keys, reads the row and settles
        self._last_read: tuple[int, bytes] = (-1, b"")
        self._last_header: tuple[int, Keys, int, int] = (-1, (), 0, 0)  # `_header_of` a slot

    def __len__(self) -> int:
        return self._count

    @property
    def held_bytes(self) -> int:
        """The memory the spilled MESSAGEs hold, as `DeliveryLedger.pending_bytes` counts it."""
        return self._count * SPILLED_BYTES

    def count(self, subscription: int) -> int:
        return self._counts.get(subscription, 0)

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # carried with the connection: the records in arrays, and the rows as the bytes they
        # were spilled as, end to end in a `SpillPayload` of their own, which the carried state
        # moves in chunks beside its pickle (`pipeline.spark.carried_state`): however many
        # MESSAGEs are spilled, their rows are not in memory at once. The file and the index
        # are made again where the connection resumes.
        payload = SpillPayload()
        frame_index, delivered_ns = array("q"), array("q")
        subscription, length = array("i"), array("i")
        dropped: dict[int, tuple[str, ...]] = {}
        for slot in self.slots():
            blob = self._blob(slot)
            gone = self._dropped.get(slot)
            if gone:
                dropped[len(length)] = tuple(sorted(gone))
            frame_index.append(self.frame_index(slot))
            delivered_ns.append(self.delivered_ns(slot))
            subscription.append(self.subscription(slot))
            length.append(len(blob))
            payload.append(blob)
        return _restore, (frame_index, delivered_ns, subscription, length, dropped, payload)

    def add(
        self,
        frame_index: int,
        delivered_ns: int,
        subscription: int,
        keys: Keys,
        held: int,
        row: MessageRow,
    ) -> int:
        """Spill a MESSAGE known by ``keys`` whose row held ``held`` bytes; returns its slot."""
        # the keys first, read alone when a key is checked, after their length
        header = pickle.dumps((keys, held), PROTOCOL)
        blob = _HEADER_LENGTH.pack(len(header)) + header + pickle.dumps(row, PROTOCOL)
        return self._add_blob(frame_index, delivered_ns, subscription, keys, blob)

    def _add_blob(
        self, frame_index: int, delivered_ns: int, subscription: int, keys: Keys, blob: bytes
    ) -> int:
        if self._file is None:
            self._file = _new_file()
        self._unwritten += blob
        slot = self._add_record(frame_index, delivered_ns, subscription, keys, len(blob))
        if len(self._unwritten) >= WRITE_BYTES:
            self._write()
        return slot

    def _write(self) -> None:
        """The rows spilled since the last write, to the file."""
        if self._unwritten:
            assert self._file is not None
            os.pwrite(self._file.fileno(), self._unwritten, self._written)
            self._written = self._end
            del self._unwritten[:]

    def _add_record(
        self, frame_index: int, delivered_ns: int, subscription: int, keys: Keys, length: int
    ) -> int:
        """The record of a row just written at the end of the file."""
        slot = self._base + len(self._length)
        self._frame_index.append(frame_index)
        self._delivered_ns.append(delivered_ns)
        self._subscription.append(subscription)
        self._offset.append(self._end)
        self._length.append(length)
        self._end += length
        self._count += 1
        self._counts[subscription] = self._counts.get(subscription, 0) + 1
        for key in keys:
            self._index.add(key_hash(key), slot)
        return slot

    def find(self, key: str) -> int:
        """The slot known by ``key``, or -1."""
        for held in self._index.candidates(key_hash(key)):
            slot = slot_near(held, self._head)  # every slot in the index is one not settled
            if key in self._keys(slot):
                return slot
        return -1

    def drop_key(self, key: str) -> None:
        """A MESSAGE delivered since took ``key``: the spilled one it named is no longer found
        by it (as a dict keeps the latest value of a key)."""
        slot = self.find(key)
        if slot >= 0:
            self._index.remove(key_hash(key), slot)
            self._dropped.setdefault(slot, set()).add(key)

    def frame_index(self, slot: int) -> int:
        return self._frame_index[slot - self._base]

    def delivered_ns(self, slot: int) -> int:
        return self._delivered_ns[slot - self._base]

    def subscription(self, slot: int) -> int:
        return self._subscription[slot - self._base]

    def oldest(self) -> int:
        """The oldest slot, or -1."""
        return self._head if self._count else -1

    def slots(self) -> list[int]:
        """Every slot not settled, oldest first."""
        lengths, base = self._length, self._base
        return [s for s in range(self._head, base + len(lengths)) if lengths[s - base] != SETTLED]

    def through(self, subscription: int, last: int | None) -> list[int]:
        """The slots of ``subscription`` up to ``last`` (every one when None), oldest first,
        for the caller to take all of (a cumulative ACK)."""
        lengths, base = self._length, self._base
        end = base + len(lengths) if last is None else last + 1
        start = max(self._subscription_heads.get(subscription, self._head), self._head)
        found = [
            s
            for s in range(start, end)
            if lengths[s - base] != SETTLED and self._subscription[s - base] == subscription
        ]
        self._subscription_heads[subscription] = end
        return found

    def take(self, slot: int) -> None:
        """Settle ``slot`` (its row read first, with `read`, when it is wanted)."""
        at = slot - self._base
        keys, held = self._header(slot)
        for key in keys:
            self._index.remove(key_hash(key), slot)
        self._dropped.pop(slot, None)
        self._settled_bytes += self._length[at]
        self._length[at] = SETTLED
        self._count -= 1
        subscription = self._subscription[at]
        self._counts[subscription] -= 1
        if not self._counts[subscription]:
            del self._counts[subscription]
        self._advance()

    def close(self) -> None:
        """Forget every slot (the connection is over, its rows taken) and the file."""
        if self._file is not None:
            self._file.close()
        self.__init__()  # type: ignore[misc]

    def take_rows(self, limit: int) -> list[MessageRow]:
        """The rows of the oldest ``limit`` slots, oldest first, read back and settled; the
        file goes with the last. Only once the connection is over: nothing is looked up by
        key afterwards, so the keys are left in the index (to go with it)."""
        rows: list[MessageRow] = []
        lengths, base = self._length, self._base
        end = base + len(lengths)
        slot = self._head
        while slot < end and len(rows) < limit:
            if lengths[slot - base] != SETTLED:
                rows.append(self.read(slot)[2])
                lengths[slot - base] = SETTLED
                self._count -= 1
            slot += 1
        if not self._count:
            self.close()
            return rows
        while lengths[slot - base] == SETTLED:
            slot += 1
        self._head = slot
        return rows

    def _keys(self, slot: int) -> Keys:
        return self._header(slot)[0]

    def _header(self, slot: int) -> tuple[Keys, int]:
        keys, held, _ = self._parts(slot, with_row=False)
        return keys, held

    def read(self, slot: int) -> tuple[Keys, int, MessageRow]:
        """The keys that still name ``slot``, what its row held, and the row."""
        keys, held, row = self._parts(slot, with_row=True)
        assert row is not None
        return keys, held, row

    def _parts(self, slot: int, *, with_row: bool) -> tuple[Keys, int, MessageRow | None]:
        blob = self._blob(slot)
        cached, keys, held, end = self._last_header
        if cached != slot:
            keys, held, end = _header_of(blob)
            self._last_header = (slot, keys, held, end)
        dropped = self._dropped.get(slot)
        if dropped:
            keys = tuple(key for key in keys if key not in dropped)
        return keys, held, pickle.loads(blob[end:]) if with_row else None

    def _blob(self, slot: int) -> bytes:
        at = slot - self._base
        length = self._length[at]
        if length == SETTLED or self._file is None:
            raise KeyError(f"no spilled MESSAGE in slot {slot}")
        if self._last_read[0] == slot:
            return self._last_read[1]
        offset = self._offset[at]
        if offset >= self._written:
            start = offset - self._written
            blob = bytes(self._unwritten[start : start + length])
        else:
            blob = os.pread(self._file.fileno(), length, offset)
        self._last_read = (slot, blob)
        return blob

    def _advance(self) -> None:
        lengths, base = self._length, self._base
        while self._head < base + len(lengths) and lengths[self._head - base] == SETTLED:
            self._head += 1
        if self._count == 0:
            self._rewrite()
            return
        behind = self._head - base
        if behind >= 4096 and behind * 2 >= len(lengths):  # drop the settled records' space
            for column in self._columns():
                del column[:behind]
            self._base = self._head
        if self._settled_bytes >= REWRITE_AFTER and self._settled_bytes * 2 >= self._end:
            self._rewrite()

    def _columns(self) -> tuple[array, ...]:
        return (
            self._frame_index,
            self._delivered_ns,
            self._subscription,
            self._offset,
            self._length,
        )

    def _rewrite(self) -> None:
        """The file again with only the rows still wanted (none: no file)."""
        old = self._file
        if old is None:
            return
        if self._count == 0:
            old.close()
            self._file = None
            self._end = self._written = self._settled_bytes = 0
            del self._unwritten[:]
            for column in self._columns():
                del column[:]
            self._base = self._head
            return
        self._write()
        new = _new_file()
        end = 0
        base = self._base
        for slot in self.slots():
            at = slot - base
            blob = os.pread(old.fileno(), self._length[at], self._offset[at])
            os.pwrite(new.fileno(), blob, end)
            self._offset[at] = end
            end += len(blob)
        old.close()
        self._file, self._end, self._written, self._settled_bytes = new, end, end, 0


def _new_file() -> IO[bytes]:
    """An unnamed file: nothing is left on disk however the process ends."""
    return tempfile.TemporaryFile(prefix="stomp-lake-pending-")  # noqa: SIM115 - kept open


def _header_of(blob: bytes) -> tuple[Keys, int, int]:
    """A spilled blob's keys, what its row held, and where the row's pickle starts."""
    end = _HEADER_LENGTH.size + _HEADER_LENGTH.unpack_from(blob)[0]
    keys, held = pickle.loads(blob[_HEADER_LENGTH.size : end])
    return keys, held, end


def _restore(
    frame_index: array,
    delivered_ns: array,
    subscription: array,
    length: array,
    dropped: dict[int, tuple[str, ...]],
    payload: SpillPayload,
) -> SpilledDeliveries:
    """The spilled MESSAGEs of a carried connection, their rows in ``payload``'s file, which
    becomes theirs."""
    spilled = SpilledDeliveries()
    spilled._file = file = payload.take_file()  # None when nothing was spilled
    offset = 0
    for at in range(len(length)):
        assert file is not None
        blob = os.pread(file.fileno(), length[at], offset)
        offset += length[at]
        keys, _, _ = _header_of(blob)
        gone = dropped.get(at, ())
        kept = tuple(key for key in keys if key not in gone)
        slot = spilled._add_record(
            frame_index[at], delivered_ns[at], subscription[at], kept, length[at]
        )
        if gone:
            spilled._dropped[slot] = set(gone)
    spilled._written = spilled._end  # every row is in the file
    return spilled


class SpillPayload:
    """Rows of spilled MESSAGEs on their way to the next run: their bytes end to end in an
    unnamed file (none while empty). `pipeline.spark.carried_state` carries the bytes in chunks
    beside the state's pickle; pickled alone, the payload is its bytes."""

    __slots__ = ("_file", "size")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self.size = 0

    def append(self, data: bytes) -> None:
        if self._file is None:
            self._file = _new_file()
        os.pwrite(self._file.fileno(), data, self.size)
        self.size += len(data)

    def chunks(self, limit: int) -> Iterator[bytes]:
        """Its bytes, ``limit`` at most at a time."""
        for start in range(0, self.size, limit):
            yield self.read(start, min(limit, self.size - start))

    def read(self, offset: int, length: int) -> bytes:
        if self._file is None:
            return b""
        return os.pread(self._file.fileno(), length, offset)

    def take_file(self) -> IO[bytes] | None:
        """The file, now the caller's to close."""
        file, self._file = self._file, None
        return file

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return _payload_of, (self.read(0, self.size),)


def _payload_of(data: bytes) -> SpillPayload:
    payload = SpillPayload()
    if data:
        payload.append(data)
    return payload
