"""Where the plaintext of a TLS connection's records was in its TCP stream: the plaintext offset
at which each record's plaintext starts and the TCP offset of the record, by direction, for the
TCP offsets of what is found in the plaintext (frames, WebSocket frames, anomalies)."""

from __future__ import annotations

from bisect import bisect_right

from pipeline.compiled import set_slot_values, slot_values

# Records whose plaintext offsets are remembered per direction (at least), to give inner events
# their TCP offsets: a WebSocket frame longer than this many records may get the offset of the
# earliest kept.
MAX_RECORDS_MAPPED = 1 << 14


class RecordOffsets:
    """Plaintext offsets of one direction's records, and the TCP offsets of the records: at
    least the latest `MAX_RECORDS_MAPPED`, in lists (a deque's indexing, which `bisect` does, is
    linear in the middle)."""

    __slots__ = ("plain", "tcp")

    def __init__(self) -> None:
        self.plain: list[int] = []
        self.tcp: list[int] = []

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    def add(self, plain_offset: int, tcp_offset: int) -> None:
        self.plain.append(plain_offset)
        self.tcp.append(tcp_offset)
        self.trim()

    def trim(self) -> None:
        """Drop the oldest records when more than twice `MAX_RECORDS_MAPPED` are held."""
        if len(self.plain) > 2 * MAX_RECORDS_MAPPED:
            drop = len(self.plain) - MAX_RECORDS_MAPPED
            del self.plain[:drop]
            del self.tcp[:drop]

    def tcp_of(self, plain_offset: int) -> int:
        index = bisect_right(self.plain, plain_offset) - 1
        return self.tcp[max(index, 0)] if self.tcp else 0

    def records(self, plain_offset: int, size: int) -> tuple[tuple[int, int], ...]:
        """(plaintext offset, TCP offset) of the records that carried these bytes, the first
        from ``plain_offset``."""
        plain, tcp = self.plain, self.tcp
        first = max(bisect_right(plain, plain_offset) - 1, 0)
        last = bisect_right(plain, plain_offset + size - 1, first)
        if last <= first + 1:  # one record, as when each TCP chunk completes one
            return ((plain_offset, tcp[first] if tcp else 0),)
        carried = [(plain_offset, tcp[first])]
        carried += [(plain[i], tcp[i]) for i in range(first + 1, last)]
        return tuple(carried)
