from cpython cimport array
from libc.string cimport memcpy


cdef extern from *:
    # the array's C struct, as Cython's own array.pxd names it, for its allocated length
    ctypedef struct _ArrayObject "arrayobject":
        Py_ssize_t allocated


cdef inline int resized(array.array values, Py_ssize_t size) except -1:
    """``values`` made ``size`` items long, its allocation doubled when it must grow: joins
    and appends then copy what is held a bounded number of times (Python's own array.extend
    allocates 6% ahead, and copied a row group's columns again at each join)."""
    cdef Py_ssize_t allocated = (<_ArrayObject*><void*>values).allocated
    if size > allocated:
        array.resize(values, max(size, 2 * allocated, 16))
    values.ob_size = size
    return 0


cdef inline int extended(array.array values, array.array more) except -1:
    """``more``'s items (of the same type) added after those of ``values``."""
    cdef Py_ssize_t size = values.ob_size, count = more.ob_size
    cdef Py_ssize_t width = values.ob_descr.itemsize
    if count:
        resized(values, size + count)
        memcpy(values.data.as_chars + size * width, more.data.as_chars, count * width)
    return 0


cdef class Column:
    cdef object type_
    cdef list fallback  # the values as objects, once one did not fit; None before
    cdef Py_ssize_t length, nulls
    cdef array.array valid  # a byte per value: 1 when not null
    cdef int add(self, object value) except -1
    cdef int _take(self, object value) except -1
    cdef list _values(self)
    cdef object _value(self, Py_ssize_t index)
    cdef bint _joins(self, Column other)
    cdef int _join(self, Column other) except -1
    cdef object _validity(self)


cdef class TextColumn(Column):
    cdef array.array ends, data
    cdef bint binary
    cdef Py_ssize_t limit


cdef class FixedColumn(Column):
    cdef array.array values
    cdef object _data(self)


cdef class Int64Column(FixedColumn):
    pass


cdef class Float64Column(FixedColumn):
    pass


cdef class SmallColumn(FixedColumn):
    cdef int kind


cdef struct PairsMark:
    Py_ssize_t frames, pairs, name_bytes, value_bytes


cdef class HeaderPairs:
    cdef array.array frame_ends, name_ends, value_ends, names, values
    cdef readonly bint as_dicts
    cdef Py_ssize_t limit
    cdef HeaderPairs view(self, bint as_dicts)
    cdef HeaderPairs copy(self, bint as_dicts)
    cdef bint fits(self, Py_ssize_t pairs, Py_ssize_t name_bytes, Py_ssize_t value_bytes)
    cdef PairsMark mark(self)
    cdef int rewind(self, PairsMark mark) except -1
    cdef bint add_list(self, object pairs) except -1
    cdef bint add_dict(self, object headers) except -1
    cdef bint _push(self, array.array data, array.array ends, object text) except -1
    cdef bint _frame_added(self, PairsMark mark) except -1
    cdef bint _refused(self, PairsMark mark) except -1
    cdef int extend(self, HeaderPairs other) except -1
    cdef bint can_extend(self, HeaderPairs other)
    cdef str _text(self, array.array data, array.array ends, Py_ssize_t pair)


cdef class MapColumn(Column):
    cdef HeaderPairs pairs


cpdef Column column_for(object type_)
