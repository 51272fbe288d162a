# cython: language_level=3, boundscheck=True, wraparound=False
"""`key_index.PythonKeyIndex` compiled: open addressing over one C array of (hash, slot) pairs,
16 bytes an entry, at most 3/4 full counting removed entries' marks and at most half full
after it grows: 21 to 43 bytes a key.

`tests/pipeline/session/test_key_index.py` holds the two to the same answers.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int64_t, uint64_t

cdef int64_t EMPTY = -1
cdef int64_t REMOVED = -2
cdef Py_ssize_t FIRST_CAPACITY = 64


cdef struct Entry:
    uint64_t hash_
    int64_t slot


cdef class KeyIndex:
    cdef Entry* _entries
    cdef Py_ssize_t _capacity  # a power of two
    cdef Py_ssize_t _count  # entries
    cdef Py_ssize_t _removed  # marks left by removed entries

    def __cinit__(self):
        self._entries = NULL
        self._allocate(FIRST_CAPACITY)

    def __dealloc__(self):
        PyMem_Free(self._entries)

    def __reduce__(self):
        raise TypeError("a KeyIndex is made again by its owner, not pickled")

    cdef int _allocate(self, Py_ssize_t capacity) except -1:
        cdef Entry* entries = <Entry*>PyMem_Malloc(capacity * sizeof(Entry))
        if entries == NULL:
            raise MemoryError()
        cdef Py_ssize_t i
        for i in range(capacity):
            entries[i].slot = EMPTY
        PyMem_Free(self._entries)
        self._entries = entries
        self._capacity = capacity
        self._count = 0
        self._removed = 0
        return 0

    def __len__(self):
        return self._count

    cdef int _grow(self) except -1:
        cdef Entry* old = self._entries
        cdef Py_ssize_t old_capacity = self._capacity, i
        cdef Py_ssize_t capacity = old_capacity
        while (self._count + 1) * 2 > capacity:  # at most half full after a rebuild
            capacity *= 2
        self._entries = NULL
        try:
            self._allocate(capacity)
        except MemoryError:
            self._entries = old
            raise
        for i in range(old_capacity):
            if old[i].slot >= 0:
                self._put(old[i].hash_, old[i].slot)
        PyMem_Free(old)
        return 0

    cdef void _put(self, uint64_t hash_, int64_t slot) noexcept:
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t at = <Py_ssize_t>(hash_ & <uint64_t>mask)
        while self._entries[at].slot >= 0:
            at = (at + 1) & mask
        if self._entries[at].slot == REMOVED:
            self._removed -= 1
        self._entries[at].hash_ = hash_
        self._entries[at].slot = slot
        self._count += 1

    def add(self, uint64_t hash_, int64_t slot):
        if slot < 0:
            raise ValueError("a slot is a number >= 0")
        if (self._count + self._removed + 1) * 4 > self._capacity * 3:
            self._grow()
        self._put(hash_, slot)

    def remove(self, uint64_t hash_, int64_t slot):
        """Removes the entry ``(hash_, slot)``; False when there was none."""
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t at = <Py_ssize_t>(hash_ & <uint64_t>mask)
        while self._entries[at].slot != EMPTY:
            if self._entries[at].slot == slot and self._entries[at].hash_ == hash_:
                self._entries[at].slot = REMOVED
                self._count -= 1
                self._removed += 1
                return True
            at = (at + 1) & mask
        return False

    def candidates(self, uint64_t hash_):
        """The slots of ``hash_``, in no particular order."""
        cdef list found = []
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t at = <Py_ssize_t>(hash_ & <uint64_t>mask)
        while self._entries[at].slot != EMPTY:
            if self._entries[at].slot >= 0 and self._entries[at].hash_ == hash_:
                found.append(self._entries[at].slot)
            at = (at + 1) & mask
        return found
