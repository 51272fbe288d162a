"""An index of 64-bit key hashes to slot numbers, several slots a hash: the reference of the
compiled ``_key_index.pyx``, which holds each entry in 16 bytes of one C array where a dict
holds an int object, a list and their pointers.

The index never sees a key, only its hash: the caller keeps the keys and checks the slots a
hash gives (`SpilledDeliveries.find`), so two keys of one hash cost a check, never a wrong
answer. `tests/pipeline/session/test_key_index.py` holds the two to the same answers.
"""

from __future__ import annotations

from pipeline.compiled import kernel

HASH_MASK = (1 << 64) - 1


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
        self._slots.setdefault(hash_, []).append(slot)
        self._count += 1

    def remove(self, hash_: int, slot: int) -> bool:
        """Removes the entry ``(hash_, slot)``; False when there was none."""
        slots = self._slots.get(hash_)
        if slots is None or slot not in slots:
            return False
        slots.remove(slot)
        if not slots:
            del self._slots[hash_]
        self._count -= 1
        return True

    def candidates(self, hash_: int) -> list[int]:
        """The slots of ``hash_``, in no particular order."""
        return list(self._slots.get(hash_, ()))


def new_key_index() -> PythonKeyIndex:
    """The compiled index, or the reference (not built, or pure Python asked for)."""
    compiled = kernel("key_index")
    if compiled is not None:
        index: PythonKeyIndex = compiled.KeyIndex()
        return index
    return PythonKeyIndex()
