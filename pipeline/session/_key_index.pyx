# cython: language_level=3, boundscheck=True, wraparound=False
"""`key_index.PythonKeyIndex` compiled: open addressing over one C array of entries of 8 bytes,
the lower 32 bits of a hash (which place it, and place it again when the array grows) and the
slot modulo `SLOT_SPAN`; at most 3/4 full counting removed entries' marks, and at most 5/8
full after it is rebuilt: 11 to 22 bytes a key. An array of 1 MiB or more is mapped on its own
(and shown to tracemalloc), so that it goes back to the system when the index grows or goes:
from the heap, the arrays an index grows out of stay held as free space between live objects.

`tests/pipeline/session/test_key_index.py` holds the two to the same answers.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uintptr_t
from posix.mman cimport MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE, mmap, munmap


cdef extern from "Python.h":
    int PyTraceMalloc_Track(unsigned int domain, uintptr_t ptr, size_t size)
    int PyTraceMalloc_Untrack(unsigned int domain, uintptr_t ptr)

cdef int32_t EMPTY = -1
cdef int32_t REMOVED = -2
cdef Py_ssize_t FIRST_CAPACITY = 64
cdef int64_t SLOT_MASK = (1 << 31) - 1  # key_index.SLOT_SPAN - 1
cdef size_t MAPPED_BYTES = 1 << 20  # arrays this large are mapped on their own
cdef unsigned int TRACE_DOMAIN = 0


cdef struct Entry:
    uint32_t tag  # the hash's lower 32 bits
    int32_t slot


cdef inline uint32_t tag_of(uint64_t hash_) noexcept:
    return <uint32_t>hash_


cdef Entry* new_entries(Py_ssize_t capacity) noexcept:
    """An array of ``capacity`` entries, or NULL."""
    cdef size_t size = capacity * sizeof(Entry)
    cdef void* memory
    if size < MAPPED_BYTES:
        return <Entry*>PyMem_Malloc(size)
    memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if memory == MAP_FAILED:
        return NULL
    PyTraceMalloc_Track(TRACE_DOMAIN, <uintptr_t>memory, size)
    return <Entry*>memory


cdef void free_entries(Entry* entries, Py_ssize_t capacity) noexcept:
    cdef size_t size = capacity * sizeof(Entry)
    if entries == NULL:
        return
    if size < MAPPED_BYTES:
        PyMem_Free(entries)
        return
    PyTraceMalloc_Untrack(TRACE_DOMAIN, <uintptr_t>entries)
    munmap(entries, size)


cdef class KeyIndex:
    cdef Entry* _entries
    cdef Py_ssize_t _capacity  # a power of two
    cdef Py_ssize_t _count  # entries
    cdef Py_ssize_t _removed  # marks left by removed entries

    def __cinit__(self):
        self._entries = NULL
        self._allocate(FIRST_CAPACITY)

    def __dealloc__(self):
        free_entries(self._entries, self._capacity)

    def __reduce__(self):
        raise TypeError("a KeyIndex is made again by its owner, not pickled")

    cdef int _allocate(self, Py_ssize_t capacity) except -1:
        cdef Entry* entries = new_entries(capacity)
        if entries == NULL:
            raise MemoryError()
        cdef Py_ssize_t i
        for i in range(capacity):
            entries[i].slot = EMPTY
        free_entries(self._entries, self._capacity)
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
        while (self._count + 1) * 8 > capacity * 5:  # at most 5/8 full after a rebuild
            capacity *= 2
        self._entries = NULL
        try:
            self._allocate(capacity)
        except MemoryError:
            self._entries = old
            raise
        for i in range(old_capacity):
            if old[i].slot >= 0:
                self._put_entry(old[i], <uint64_t>old[i].tag)
        free_entries(old, old_capacity)
        return 0

    cdef void _put_entry(self, Entry entry, uint64_t low) noexcept:
        """``entry`` placed by the lower bits of ``low`` (its hash, or its tag)."""
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t at = <Py_ssize_t>(low & <uint64_t>mask)
        while self._entries[at].slot >= 0:
            at = (at + 1) & mask
        if self._entries[at].slot == REMOVED:
            self._removed -= 1
        self._entries[at] = entry
        self._count += 1

    def add(self, uint64_t hash_, int64_t slot):
        if slot < 0:
            raise ValueError("a slot is a number >= 0")
        if (self._count + self._removed + 1) * 4 > self._capacity * 3:
            self._grow()
        cdef Entry entry
        entry.tag = tag_of(hash_)
        entry.slot = <int32_t>(slot & SLOT_MASK)
        self._put_entry(entry, hash_)

    def remove(self, uint64_t hash_, int64_t slot):
        """Removes the entry ``(hash_, slot)``; False when there was none."""
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t at = <Py_ssize_t>(hash_ & <uint64_t>mask)
        cdef uint32_t tag = tag_of(hash_)
        cdef int32_t held = <int32_t>(slot & SLOT_MASK)
        if slot < 0:
            return False
        while self._entries[at].slot != EMPTY:
            if self._entries[at].slot == held and self._entries[at].tag == tag:
                self._entries[at].slot = REMOVED
                self._count -= 1
                self._removed += 1
                return True
            at = (at + 1) & mask
        return False

    def candidates(self, uint64_t hash_):
        """The slots of ``hash_`` modulo `SLOT_SPAN`, in no particular order."""
        cdef list found = []
        cdef Py_ssize_t mask = self._capacity - 1
        cdef Py_ssize_t at = <Py_ssize_t>(hash_ & <uint64_t>mask)
        cdef uint32_t tag = tag_of(hash_)
        while self._entries[at].slot != EMPTY:
            if self._entries[at].slot >= 0 and self._entries[at].tag == tag:
                found.append(self._entries[at].slot)
            at = (at + 1) & mask
        return found
