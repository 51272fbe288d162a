# cython: language_level=3, boundscheck=True, wraparound=False
"""Table columns built in Arrow's layout as their values come, a value at a time.

`pyarrow.array` over a list of Python objects checks every value's type through Python's
protocols before it copies it; here a value (text, bytes, an int, a float, a bool, a date, a
dict of text) is copied straight into the column's buffers, and Arrow takes the buffers whole.
A value of another type (or one the buffers cannot hold: text past int32 offsets, an integer
past the column's width) turns the column into a list from then on, converted by
`pyarrow.array` as before, so that the result and its errors are Arrow's own. Columns of other
types (lists, structs) are lists throughout.

`tests/pipeline/session/test_arrow_columns.py` holds them to `pyarrow.array` of the same values.
"""

from cpython cimport array
from cpython.datetime cimport date_day, date_month, date_year, import_datetime
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject
from libc.string cimport memcpy

import array as _array
from datetime import date

import numpy as np
import pyarrow as pa


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object value, int* overflow) except? -1
    # PyUnicode_AsUTF8AndSize, its error left to the caller
    const char* _utf8 "PyUnicode_AsUTF8AndSize"(object text, Py_ssize_t* size)
    void PyErr_Clear()
    object PyUnicode_DecodeUTF8(const char* data, Py_ssize_t size, const char* errors)
    object PyBytes_FromStringAndSize(const char* data, Py_ssize_t size)
    char* PyBytes_AS_STRING(object data)
    Py_ssize_t PyBytes_GET_SIZE(object data)


import_datetime()

cdef array.array _INT64 = _array.array("q")
cdef array.array _DOUBLE = _array.array("d")
cdef array.array _INT32 = _array.array("i")
cdef array.array _BYTES = _array.array("B")
# Arrow's string and list offsets are int32: values that would pass this many bytes or pairs are
# held as Python objects instead, and converted by Arrow.
OFFSET_LIMIT = 2**31 - 1


cdef class Column:
    """A column of values given one by one (`add`), as an Arrow array of its type (`arrow`)."""

    def __cinit__(self, type_):
        self.type_ = type_
        self.valid = array.clone(_BYTES, 0, False)

    cdef int add(self, object value) except -1:
        if self.fallback is not None:
            self.fallback.append(value)
            return 0
        if self._take(value) == 0:
            self.fallback = self._values()
            self.fallback.append(value)
            return 0
        resized(self.valid, self.length + 1)
        self.valid.data.as_uchars[self.length] = value is not None
        self.nulls += value is None
        self.length += 1
        return 0

    cdef int _take(self, object value) except -1:
        """1 when the value was added to the buffers, 0 when it does not fit them."""
        return 0

    cdef list _values(self):
        return []

    cdef object _value(self, Py_ssize_t index):
        return None

    cdef bint _joins(self, Column other):
        """Whether ``other``'s buffers can be added to these as they are."""
        return False

    cdef int _join(self, Column other) except -1:
        return 0

    def append(self, value):
        self.add(value)

    def extend(self, values):
        cdef Column other
        if isinstance(values, Column):
            other = <Column>values
            if self.fallback is None and other.fallback is None and self._joins(other):
                self._join(other)
                extended(self.valid, other.valid)
                self.length += other.length
                self.nulls += other.nulls
                return
        for value in values:
            self.add(value)

    def __len__(self):
        return self.length if self.fallback is None else len(self.fallback)

    def __getitem__(self, Py_ssize_t index):
        cdef Py_ssize_t length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("column index out of range")
        if self.fallback is not None:
            return self.fallback[index]
        return self._value(index) if self.valid.data.as_uchars[index] else None

    def __iter__(self):
        return iter(self.fallback if self.fallback is not None else self._values())

    def arrow(self, type_=None):
        """As an Arrow array of ``type_`` (cast from the column's own type), or of its own."""
        built = pa.array(self.fallback, self.type_) if self.fallback is not None else self._arrow()
        return built if type_ is None or built.type == type_ else built.cast(type_)

    def _arrow(self):
        raise NotImplementedError

    cdef object _validity(self):
        if not self.nulls:
            return None
        bits = np.packbits(np.frombuffer(self.valid, np.uint8), bitorder="little")
        return pa.py_buffer(bits)


cdef class TextColumn(Column):
    """Text (str, as UTF-8) or binary (bytes) values, or None."""

    def __cinit__(self, type_):
        self.ends = array.clone(_INT32, 1, True)
        self.data = array.clone(_BYTES, 0, False)
        self.binary = pa.types.is_binary(type_)
        self.limit = OFFSET_LIMIT

    cdef int _take(self, object value) except -1:
        cdef Py_ssize_t length = 0
        cdef const char* text = NULL
        if value is None:
            pass
        elif self.binary and type(value) is bytes:
            text, length = PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value)
        elif not self.binary and isinstance(value, str):  # a StrEnum too, as Arrow takes it
            text = _utf8_or_null(<str>value, &length)
            if text == NULL:
                return 0
        else:
            return 0
        return _append(self.data, self.ends, text, length, self.limit)

    cdef list _values(self):
        cdef list values = []
        cdef Py_ssize_t i
        for i in range(self.length):
            values.append(self._value(i) if self.valid.data.as_uchars[i] else None)
        return values

    cdef object _value(self, Py_ssize_t index):
        cdef int start = self.ends.data.as_ints[index], end = self.ends.data.as_ints[index + 1]
        if self.binary:
            return PyBytes_FromStringAndSize(self.data.data.as_chars + start, end - start)
        return PyUnicode_DecodeUTF8(self.data.data.as_chars + start, end - start, NULL)

    cdef bint _joins(self, Column other):
        return (
            type(other) is TextColumn
            and (<TextColumn>other).binary == self.binary
            and len(self.data) + len((<TextColumn>other).data) <= self.limit
        )

    cdef int _join(self, Column other) except -1:
        cdef TextColumn text = <TextColumn>other
        _extend_ends(self.ends, text.ends, len(self.data))
        extended(self.data, text.data)
        return 0

    def _arrow(self):
        return pa.Array.from_buffers(
            self.type_,
            self.length,
            [self._validity(), _buffer(self.ends), _buffer(self.data)],
            null_count=self.nulls,
        )


cdef class FixedColumn(Column):
    """Values of one width, in a C array (`values`), or None."""

    cdef list _values(self):
        cdef const unsigned char* valid = self.valid.data.as_uchars
        return [self._value(i) if valid[i] else None for i in range(self.length)]

    cdef bint _joins(self, Column other):
        return type(other) is type(self)

    cdef int _join(self, Column other) except -1:
        extended(self.values, (<FixedColumn>other).values)
        return 0

    cdef object _data(self):
        return _buffer(self.values)

    def _arrow(self):
        return pa.Array.from_buffers(
            self.type_, self.length, [self._validity(), self._data()], null_count=self.nulls
        )


cdef class Int64Column(FixedColumn):
    """Integers that int64 holds, or None."""

    def __cinit__(self, type_):
        self.values = array.clone(_INT64, 0, False)

    cdef int _take(self, object value) except -1:
        cdef long long number = 0
        if value is not None and not _as_int(value, &number):
            return 0
        self.values.data.as_longlongs[_grown(self.values)] = number
        return 1

    cdef object _value(self, Py_ssize_t index):
        return self.values.data.as_longlongs[index]


cdef class Float64Column(FixedColumn):
    """Floats, or None (an int is Arrow's to convert: the column becomes a list)."""

    def __cinit__(self, type_):
        self.values = array.clone(_DOUBLE, 0, False)

    cdef int _take(self, object value) except -1:
        cdef double number = 0.0
        if value is not None:
            if type(value) is not float:
                return 0
            number = value
        self.values.data.as_doubles[_grown(self.values)] = number
        return 1

    cdef object _value(self, Py_ssize_t index):
        return self.values.data.as_doubles[index]


cdef class SmallColumn(FixedColumn):
    """Values held as int32 whatever Arrow's type: int32, the days of date32, and booleans (as 0
    or 1, packed into bits at the end), or None."""

    def __cinit__(self, type_):
        self.values = array.clone(_INT32, 0, False)
        self.kind = _INT32_KIND
        if pa.types.is_boolean(type_):
            self.kind = _BOOLEAN
        elif pa.types.is_date32(type_):
            self.kind = _DAYS

    cdef int _take(self, object value) except -1:
        cdef long long number = 0
        if value is not None:
            if self.kind == _BOOLEAN:
                if type(value) is not bool:
                    return 0
                number = value is True
            elif self.kind == _DAYS:
                if type(value) is not date:
                    return 0
                number = _days(date_year(value), date_month(value), date_day(value))
            elif not _as_int(value, &number) or not -2**31 <= number < 2**31:
                return 0
        self.values.data.as_ints[_grown(self.values)] = <int>number
        return 1

    cdef object _value(self, Py_ssize_t index):
        cdef int number = self.values.data.as_ints[index]
        if self.kind == _BOOLEAN:
            return number != 0
        if self.kind == _DAYS:
            return date.fromordinal(number + _EPOCH_ORDINAL)
        return number

    cdef bint _joins(self, Column other):
        return type(other) is SmallColumn and (<SmallColumn>other).kind == self.kind

    cdef object _data(self):
        if self.kind != _BOOLEAN:
            return _buffer(self.values)
        bits = np.packbits(np.frombuffer(self.values, np.int32).astype(np.uint8), bitorder="little")
        return pa.py_buffer(bits)


cdef inline Py_ssize_t _grown(array.array values) except -1:
    """The index of a new last value of ``values``."""
    cdef Py_ssize_t size = len(values)
    resized(values, size + 1)
    return size


cdef inline bint _as_int(object value, long long* number) except -1:
    """Whether ``value`` is an int that int64 holds, set into ``number`` (past int64, without
    raising and catching Python's OverflowError: that cost more than the rest of a value)."""
    if type(value) is not int:
        return False
    cdef int overflow = 0
    number[0] = PyLong_AsLongLongAndOverflow(value, &overflow)
    return overflow == 0


cdef enum:
    _INT32_KIND = 0
    _BOOLEAN = 1
    _DAYS = 2

cdef int _EPOCH_ORDINAL = 719163  # date(1970, 1, 1).toordinal()


cdef inline long long _days(long long year, long long month, long long day):
    """Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil)."""
    year -= month <= 2
    cdef long long era = (year if year >= 0 else year - 399) // 400
    cdef long long of_era = year - era * 400
    cdef long long of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719468


cdef inline int _push32(array.array column, Py_ssize_t value) except -1:
    cdef Py_ssize_t size = len(column)
    resized(column, size + 1)
    column.data.as_ints[size] = <int>value
    return 0


cdef inline bint _append(
    array.array data, array.array ends, const char* text, Py_ssize_t length, Py_ssize_t limit
) except -1:
    """``length`` bytes of ``text`` added as one value of a column of bytes (``data``) and
    their offsets (``ends``), unless the bytes would pass ``limit``."""
    cdef Py_ssize_t size = len(data)
    if size + length > limit:
        return False
    if length:
        resized(data, size + length)
        memcpy(data.data.as_uchars + size, text, length)
    _push32(ends, size + length)
    return True


cdef class HeaderPairs:
    """The header list or the headers map of frames, held as Arrow holds it: each frame's pairs
    a range of two string columns, their text as UTF-8 (`frame_batch` takes the buffers whole).

    Copied while the frame's strings are fresh, the pairs cost no Python objects held for a row
    group: converted from lists, a frame's tuples and strings were read again, cold, and
    converting them was a twentieth of the flow pass. Read as a sequence (the rows, pickling),
    a frame's pairs are a list of tuples, or a dict when ``as_dicts``."""

    def __cinit__(self, bint as_dicts=False):
        self.frame_ends = array.clone(_INT32, 1, True)
        self.name_ends = array.clone(_INT32, 1, True)
        self.value_ends = array.clone(_INT32, 1, True)
        self.names = array.clone(_BYTES, 0, False)
        self.values = array.clone(_BYTES, 0, False)
        self.as_dicts = as_dicts
        self.limit = OFFSET_LIMIT

    cdef HeaderPairs view(self, bint as_dicts):
        """The same pairs, sharing their buffers, read as lists or dicts."""
        cdef HeaderPairs other = HeaderPairs(as_dicts)
        other.frame_ends, other.name_ends, other.value_ends = (
            self.frame_ends, self.name_ends, self.value_ends
        )
        other.names, other.values = self.names, self.values
        return other

    cdef HeaderPairs copy(self, bint as_dicts):
        cdef HeaderPairs other = HeaderPairs(as_dicts)
        other.extend(self)
        return other

    cdef bint fits(self, Py_ssize_t pairs, Py_ssize_t name_bytes, Py_ssize_t value_bytes):
        return (
            len(self.name_ends) - 1 + pairs <= self.limit
            and len(self.names) + name_bytes <= self.limit
            and len(self.values) + value_bytes <= self.limit
        )

    cdef PairsMark mark(self):
        """Where the pairs end now, to `rewind` to."""
        cdef PairsMark mark
        mark.frames = len(self.frame_ends)
        mark.pairs = len(self.name_ends)
        mark.name_bytes = len(self.names)
        mark.value_bytes = len(self.values)
        return mark

    cdef int rewind(self, PairsMark mark) except -1:
        """The pairs as they were at ``mark``."""
        resized(self.frame_ends, mark.frames)
        resized(self.name_ends, mark.pairs)
        resized(self.value_ends, mark.pairs)
        resized(self.names, mark.name_bytes)
        resized(self.values, mark.value_bytes)
        return 0

    cdef bint add_list(self, object pairs) except -1:
        """A frame's pairs when ``pairs`` is a list of (str, str) tuples that fits, each text
        encoded; else False, and nothing added (checked as each pair is added, and undone)."""
        if type(pairs) is not list:
            return False
        cdef PairsMark mark = self.mark()
        for pair in <list>pairs:
            if type(pair) is not tuple or len(<tuple>pair) != 2:
                return self._refused(mark)
            name, value = <tuple>pair
            if not self._push(self.names, self.name_ends, name):
                return self._refused(mark)
            if not self._push(self.values, self.value_ends, value):
                return self._refused(mark)
        return self._frame_added(mark)

    cdef bint add_dict(self, object headers) except -1:
        """A frame's pairs when ``headers`` is a dict of str to str that fits, as `add_list`."""
        if type(headers) is not dict:
            return False
        cdef PairsMark mark = self.mark()
        cdef Py_ssize_t position = 0
        cdef PyObject* key
        cdef PyObject* value
        while PyDict_Next(<dict>headers, &position, &key, &value):
            if not self._push(self.names, self.name_ends, <object>key):
                return self._refused(mark)
            if not self._push(self.values, self.value_ends, <object>value):
                return self._refused(mark)
        return self._frame_added(mark)

    cdef bint _push(self, array.array data, array.array ends, object text) except -1:
        """``text`` added when it is a str with UTF-8 that fits the column."""
        if type(text) is not str:
            return False
        cdef Py_ssize_t length
        cdef const char* utf8 = _utf8_or_null(<str>text, &length)
        return utf8 != NULL and _append(data, ends, utf8, length, self.limit)

    cdef bint _frame_added(self, PairsMark mark) except -1:
        cdef Py_ssize_t pairs = len(self.name_ends) - 1
        if pairs > self.limit:
            return self._refused(mark)
        _push32(self.frame_ends, pairs)
        return True

    cdef bint _refused(self, PairsMark mark) except -1:
        self.rewind(mark)
        return False

    cdef int extend(self, HeaderPairs other) except -1:
        _extend_ends(self.frame_ends, other.frame_ends, len(self.name_ends) - 1)
        _extend_ends(self.name_ends, other.name_ends, len(self.names))
        _extend_ends(self.value_ends, other.value_ends, len(self.values))
        extended(self.names, other.names)
        extended(self.values, other.values)
        return 0

    cdef bint can_extend(self, HeaderPairs other):
        return self.fits(len(other.name_ends) - 1, len(other.names), len(other.values))

    def arrow(self, type_):
        """As an Arrow array of ``type_``: a list of (name, value) structs, or a map."""
        cdef Py_ssize_t pairs = len(self.name_ends) - 1
        names = pa.Array.from_buffers(
            pa.string(), pairs, [None, _buffer(self.name_ends), _buffer(self.names)]
        )
        values = pa.Array.from_buffers(
            pa.string(), pairs, [None, _buffer(self.value_ends), _buffer(self.values)]
        )
        offsets = pa.Array.from_buffers(
            pa.int32(), len(self.frame_ends), [None, _buffer(self.frame_ends)]
        )
        if pa.types.is_map(type_):
            return pa.MapArray.from_arrays(offsets, names, values, type=type_)
        struct = type_.value_type
        entries = pa.StructArray.from_arrays([names, values], fields=list(struct))
        return pa.ListArray.from_arrays(offsets, entries, type=type_)

    cdef str _text(self, array.array data, array.array ends, Py_ssize_t pair):
        cdef int start = ends.data.as_ints[pair]
        cdef int end = ends.data.as_ints[pair + 1]
        return PyUnicode_DecodeUTF8(data.data.as_chars + start, end - start, NULL)

    def __len__(self):
        return len(self.frame_ends) - 1

    def __getitem__(self, Py_ssize_t index):
        cdef Py_ssize_t frames = len(self.frame_ends) - 1
        if index < 0:
            index += frames
        if not 0 <= index < frames:
            raise IndexError("frame index out of range")
        cdef Py_ssize_t pair
        cdef list pairs = [
            (
                self._text(self.names, self.name_ends, pair),
                self._text(self.values, self.value_ends, pair),
            )
            for pair in range(self.frame_ends[index], self.frame_ends[index + 1])
        ]
        return dict(pairs) if self.as_dicts else pairs

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    def __reduce__(self):
        raise TypeError("HeaderPairs are pickled with their FrameColumns, as lists")


cdef int _extend_ends(array.array mine, array.array theirs, Py_ssize_t base) except -1:
    """Their offsets (after their leading 0) after mine, moved by ``base``."""
    cdef Py_ssize_t size = len(mine), count = len(theirs) - 1, i
    resized(mine, size + count)
    for i in range(count):
        mine.data.as_ints[size + i] = <int>(base + theirs.data.as_ints[i + 1])
    return 0


cdef class MapColumn(Column):
    """Maps of text to text, given as dicts."""

    def __cinit__(self, type_):
        self.pairs = HeaderPairs(True)

    cdef int _take(self, object value) except -1:
        # None among them (rare): Arrow converts the list
        return self.pairs.add_dict(value)

    cdef list _values(self):
        return list(self.pairs)

    cdef object _value(self, Py_ssize_t index):
        return self.pairs[index]

    def _arrow(self):
        return self.pairs.arrow(self.type_)


cdef inline const char* _utf8_or_null(str text, Py_ssize_t* length):
    """``text`` as UTF-8, or NULL when it has none (lone surrogates: the values are then held
    as objects, and Arrow's conversion raises as it did)."""
    cdef const char* utf8 = _utf8(text, length)
    if utf8 == NULL:
        PyErr_Clear()
    return utf8


cdef object _buffer(array.array column):
    return pa.py_buffer(column.tobytes())  # a copy: the held column may grow after


cpdef Column column_for(object type_):
    """The column for values of the Arrow type ``type_``: text, binary, int64, float64, int32,
    boolean, date32 and maps of text in buffers, any other type in a list."""
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        return TextColumn(type_)
    if type_ == pa.int64():
        return Int64Column(type_)
    if type_ == pa.float64():
        return Float64Column(type_)
    if type_ == pa.int32() or pa.types.is_boolean(type_) or pa.types.is_date32(type_):
        return SmallColumn(type_)
    if _text_map(type_):
        return MapColumn(type_)
    cdef Column column = Column(type_)
    column.fallback = []
    return column


cdef bint _text_map(object type_):
    return (
        pa.types.is_map(type_)
        and pa.types.is_string(type_.key_type)
        and pa.types.is_string(type_.item_type)
    )


def dict_arrays(list rows not None, tuple names not None, tuple types not None):
    """The columns ``names`` of rows given as dicts, as Arrow arrays of ``types``: each row's
    values added to their columns as the rows are read, a name the row lacks a null, equal to
    ``pyarrow.array`` of the rows as structs of those fields."""
    cdef Py_ssize_t index, count = len(names)
    if len(types) != count:
        raise ValueError(f"{count} names and {len(types)} types")
    cdef list columns = [column_for(type_) for type_ in types]
    cdef dict values
    for row in rows:
        if type(row) is not dict:
            raise TypeError(f"a dict was expected, not {type(row).__name__}")
        values = <dict>row
        for index in range(count):
            (<Column>columns[index]).add(values.get(names[index]))
    return [(<Column>column).arrow(type_) for column, type_ in zip(columns, types)]


def held_arrays(list rows not None, tuple types not None):
    """The held columns of slot rows (`pipeline.session.message_rows`) as Arrow arrays of
    ``types``: each row's `held` values added to their columns as the rows are read, equal to
    ``pyarrow.array`` of `SlotRow.columns`."""
    cdef Py_ssize_t index, count = len(types)
    cdef list columns = [column_for(type_) for type_ in types]
    cdef tuple values
    for row in rows:
        values = row.held()
        if len(values) != count:
            raise ValueError(f"a row holds {len(values)} values, not {count}")
        for index in range(count):
            (<Column>columns[index]).add(values[index])
    return [(<Column>column).arrow(type_) for column, type_ in zip(columns, types)]
