"""An index of 64-bit key hashes to slot numbers, several slots a hash: the reference of the
compiled ``_key_index.pyx``, which holds each entry in 8 bytes of one C array where a dict
holds an int object, a list and their pointers.

The index never sees a key, only its hash: the caller keeps the keys and checks the slots a
hash gives (`SpilledDeliveries.find`), so two keys of one hash cost a check, never a wrong
answer. The compiled index keeps 32 bits of a hash, so it may give a slot of another hash
too, one of the same lower 32 bits: the same check catches it.
Slots are held modulo `SLOT_SPAN`: the caller, whose slots in the index at any time span less
than that, maps a slot given back to its own number (`slot_near`).
`tests/pipeline/session/test_key_index.py` holds the two to the same answers.
"""

from __future__ import annotations

from pipeline.compiled import kernel

HASH_MASK = (1 << 64) - 1
SLOT_SPAN = 1 << 31  # slots are held modulo this (a C int32 in the compiled index)


def key_hash(key: str) -> int:
    """A key's hash as the index takes it (Python's own: the index lives in one process, and is
    made again, never pickled, when its owner is)."""
    return hash(key) & HASH_MASK


class PythonKeyIndex:
    __slots__ = ("_slots", "_count")

    def __init__(self) -> None:
        self._slots: dict[int, list[int]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, hash_: int, slot: int) -> None:
        if slot < 0:
            raise ValueError("a slot is a number >= 0")
        self._slots.setdefault(hash_, []).append(slot % SLOT_SPAN)
        self._count += 1

    def remove(self, hash_: int, slot: int) -> bool:
        """Removes the entry ``(hash_, slot)``; False when there was none."""
        slot %= SLOT_SPAN
        slots = self._slots.get(hash_)
        if slots is None or slot not in slots:
            return False
        slots.remove(slot)
        if not slots:
            del self._slots[hash_]
        self._count -= 1
        return True

    def candidates(self, hash_: int) -> list[int]:
        """The slots of ``hash_`` modulo `SLOT_SPAN`, in no particular order."""
        return list(self._slots.get(hash_, ()))


def slot_near(held: int, first: int) -> int:
    """The slot that the index holds as ``held``, among slots from ``first`` on that span less
    than `SLOT_SPAN`."""
    return first + (held - first) % SLOT_SPAN


def new_key_index() -> PythonKeyIndex:
    """The compiled index, or the reference (not built, or pure Python asked for)."""
    compiled = kernel("key_index")
    if compiled is not None:
        index: PythonKeyIndex = compiled.KeyIndex()
        return index
    return PythonKeyIndex()
