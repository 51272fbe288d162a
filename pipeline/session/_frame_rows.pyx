# cython: language_level=3, boundscheck=True, wraparound=False
"""`frame_rows.FrameColumns` compiled: the same columns, appended to without Python's calls.

`tests/pipeline/session/test_frame_rows.py` holds the two to the same columns and rows.
"""

from cpython cimport array
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memcpy

import array as _array

import pyarrow as pa


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL

# The integer columns: int64 values in C arrays, taken by Arrow without a Python object per value
# (`pipeline.spark.table_files.frame_batch`); the other columns are lists, as in the reference.
INT64_COLUMNS = (
    "frame_index", "ts_ns", "ts_end_ns", "body_length", "stream_offset", "frame_length",
    "tcp_offset",
)
cdef array.array _INT64 = _array.array("q")
cdef array.array _INT32 = _array.array("i")
cdef array.array _BYTES = _array.array("B")
# Arrow's string and list offsets are int32: header pairs that would pass this many bytes or
# pairs are held as Python objects instead, and converted as the reference's are.
OFFSET_LIMIT = 2**31 - 1
# Where the two header columns are in `FrameColumns.columns` (`frame_rows.FRAME_COLUMNS`).
cdef Py_ssize_t HEADERS = 6, HEADER_LIST = 7


cdef inline int _push(array.array column, long long value) except -1:
    cdef Py_ssize_t size = len(column)
    array.resize_smart(column, size + 1)
    column.data.as_longlongs[size] = value
    return 0


cdef inline int _push32(array.array column, Py_ssize_t value) except -1:
    cdef Py_ssize_t size = len(column)
    array.resize_smart(column, size + 1)
    column.data.as_ints[size] = <int>value
    return 0


cdef inline int _push_text(array.array data, array.array ends, str text) except -1:
    cdef Py_ssize_t length
    cdef const char* utf8 = PyUnicode_AsUTF8AndSize(text, &length)
    cdef Py_ssize_t size = len(data)
    array.resize_smart(data, size + length)
    memcpy(data.data.as_uchars + size, utf8, length)
    return _push32(ends, size + length)


cdef class HeaderPairs:
    """The header list or the headers map of frames, held as Arrow holds it: each frame's pairs
    a range of two string columns, their text as UTF-8 (`frame_batch` takes the buffers whole).

    Copied while the frame's strings are fresh, the pairs cost no Python objects held for a row
    group: converted from lists, a frame's tuples and strings were read again, cold, and
    converting them was a twentieth of the flow pass. Read as a sequence (the rows, pickling),
    a frame's pairs are a list of tuples, or a dict when ``as_dicts``."""

    cdef array.array frame_ends, name_ends, value_ends, names, values
    cdef readonly bint as_dicts
    cdef Py_ssize_t limit

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

    cdef bint takes_list(self, object pairs) except -1:
        """Whether ``pairs`` is a list of (str, str) tuples that fits: checked, and each text
        encoded, before anything is added, so that a text that cannot be raises with the
        columns unchanged."""
        if type(pairs) is not list:
            return False
        cdef Py_ssize_t name_bytes = 0, value_bytes = 0, length
        for pair in <list>pairs:
            if type(pair) is not tuple or len(<tuple>pair) != 2:
                return False
            name, value = <tuple>pair
            if type(name) is not str or type(value) is not str:
                return False
            PyUnicode_AsUTF8AndSize(name, &length)
            name_bytes += length
            PyUnicode_AsUTF8AndSize(value, &length)
            value_bytes += length
        return self.fits(len(<list>pairs), name_bytes, value_bytes)

    cdef bint takes_dict(self, object headers) except -1:
        if type(headers) is not dict:
            return False
        cdef Py_ssize_t name_bytes = 0, value_bytes = 0, length, position = 0
        cdef PyObject* key
        cdef PyObject* value
        while PyDict_Next(<dict>headers, &position, &key, &value):
            if type(<object>key) is not str or type(<object>value) is not str:
                return False
            PyUnicode_AsUTF8AndSize(<object>key, &length)
            name_bytes += length
            PyUnicode_AsUTF8AndSize(<object>value, &length)
            value_bytes += length
        return self.fits(len(<dict>headers), name_bytes, value_bytes)

    cdef int add_list(self, list pairs) except -1:
        """A frame's pairs, that `takes_list` took."""
        cdef tuple pair
        for item in pairs:
            pair = <tuple>item
            _push_text(self.names, self.name_ends, <str>pair[0])
            _push_text(self.values, self.value_ends, <str>pair[1])
        return _push32(self.frame_ends, len(self.name_ends) - 1)

    cdef int add_dict(self, dict headers) except -1:
        """A frame's pairs, that `takes_dict` took."""
        cdef Py_ssize_t position = 0
        cdef PyObject* key
        cdef PyObject* value
        while PyDict_Next(headers, &position, &key, &value):
            _push_text(self.names, self.name_ends, <str>key)
            _push_text(self.values, self.value_ends, <str>value)
        return _push32(self.frame_ends, len(self.name_ends) - 1)

    cdef int extend(self, HeaderPairs other) except -1:
        _extend_ends(self.frame_ends, other.frame_ends, len(self.name_ends) - 1)
        _extend_ends(self.name_ends, other.name_ends, len(self.names))
        _extend_ends(self.value_ends, other.value_ends, len(self.values))
        self.names.extend(other.names)
        self.values.extend(other.values)
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


cdef object _buffer(array.array column):
    return pa.py_buffer(column.tobytes())  # a copy: the held column may grow after


cdef int _extend_ends(array.array mine, array.array theirs, Py_ssize_t base) except -1:
    """Their offsets (after their leading 0) after mine, moved by ``base``."""
    cdef Py_ssize_t size = len(mine), count = len(theirs) - 1, i
    array.resize_smart(mine, size + count)
    for i in range(count):
        mine.data.as_ints[size + i] = <int>(base + theirs.data.as_ints[i + 1])
    return 0


cdef bint headers_follow_list(object headers, object header_list):
    """frame_rows.headers_follow_list"""
    if type(headers) is not dict or type(header_list) is not list:
        return False
    cdef dict names = <dict>headers
    cdef list entries = <list>header_list
    if len(names) != len(entries):
        return False
    cdef Py_ssize_t position = 0
    cdef Py_ssize_t i = 0
    cdef PyObject* key
    cdef PyObject* value
    cdef object entry
    while PyDict_Next(names, &position, &key, &value):
        entry = entries[i]
        i += 1
        if type(entry) is not tuple or len(<tuple>entry) != 2:
            return False
        if not ((<tuple>entry)[0] is <object>key or (<tuple>entry)[0] == <object>key):
            return False
        if not ((<tuple>entry)[1] is <object>value or (<tuple>entry)[1] == <object>value):
            return False
    return True


cdef class FrameColumns:
    """The header list and the headers map are `HeaderPairs` (the map a view of the list while
    every frame's headers follow their list), or lists of Python objects from the first frame
    whose pairs are not all text (rows given as dicts may hold anything) or would not fit."""

    cdef public bint regular
    cdef list session_id, direction, command, headers, header_list, content_length
    cdef list body_sha256, body_preview, body, violation
    cdef array.array frame_index, ts_ns, ts_end_ns, body_length, stream_offset, frame_length
    cdef array.array tcp_offset
    cdef HeaderPairs pair_list  # None once the pairs are held as objects
    cdef HeaderPairs pair_map  # None while the map follows the list, or as objects

    def __cinit__(self):
        self.session_id, self.direction, self.command = [], [], []
        self.content_length, self.violation = [], []
        self.body_sha256, self.body_preview, self.body = [], [], []
        self.frame_index = array.clone(_INT64, 0, False)
        self.ts_ns = array.clone(_INT64, 0, False)
        self.ts_end_ns = array.clone(_INT64, 0, False)
        self.body_length = array.clone(_INT64, 0, False)
        self.stream_offset = array.clone(_INT64, 0, False)
        self.frame_length = array.clone(_INT64, 0, False)
        self.tcp_offset = array.clone(_INT64, 0, False)
        self.pair_list = HeaderPairs(False)
        self.regular = True

    @property
    def columns(self):
        return (
            self.session_id,
            self.direction,
            self.frame_index,
            self.ts_ns,
            self.ts_end_ns,
            self.command,
            self._headers_column(),
            self.header_list if self.pair_list is None else self.pair_list,
            self.content_length,
            self.body_length,
            self.body_sha256,
            self.body_preview,
            self.body,
            self.stream_offset,
            self.frame_length,
            self.tcp_offset,
            self.violation,
        )

    cdef object _headers_column(self):
        if self.pair_list is None:
            return self.headers
        if self.pair_map is None:
            return self.pair_list.view(True)
        return self.pair_map

    def add(
        self,
        session_id,
        direction,
        frame_index,
        ts_ns,
        ts_end_ns,
        command,
        headers,
        header_list,
        content_length,
        tuple body,
        stream_offset,
        frame_length,
        tcp_offset,
        violation,
    ):
        if len(body) != 4:
            raise ValueError(f"a body is 4 values, not {len(body)}")
        # Every integer converted, and every header text encoded, before any column grows: one
        # that cannot be raises with the columns still of one length.
        cdef long long c_frame_index = frame_index, c_ts_ns = ts_ns, c_ts_end_ns = ts_end_ns
        cdef long long c_body_length = body[0], c_stream_offset = stream_offset
        cdef long long c_frame_length = frame_length, c_tcp_offset = tcp_offset
        cdef bint follows = headers_follow_list(headers, header_list)
        if self.pair_list is not None and not self._takes(headers, header_list, follows):
            self._hold_as_objects()
        self.session_id.append(session_id)
        self.direction.append(direction)
        _push(self.frame_index, c_frame_index)
        _push(self.ts_ns, c_ts_ns)
        _push(self.ts_end_ns, c_ts_end_ns)
        self.command.append(command)
        if self.pair_list is None:
            self.headers.append(headers)
            self.header_list.append(header_list)
        else:
            self._add_pairs(<dict>headers, <list>header_list, follows)
        self.content_length.append(content_length)
        _push(self.body_length, c_body_length)
        self.body_sha256.append(body[1])
        self.body_preview.append(body[2])
        self.body.append(body[3])
        _push(self.stream_offset, c_stream_offset)
        _push(self.frame_length, c_frame_length)
        _push(self.tcp_offset, c_tcp_offset)
        self.violation.append(violation)
        if self.regular and not follows:
            self.regular = False

    cdef bint _takes(self, object headers, object header_list, bint follows) except -1:
        """Whether the frame's pairs can join the pairs held (a frame whose headers follow its
        list adds to the map only once the map has pairs of its own)."""
        if not self.pair_list.takes_list(header_list):
            return False
        if follows and self.pair_map is None:
            return True
        cdef HeaderPairs map_pairs = self.pair_list if self.pair_map is None else self.pair_map
        return map_pairs.takes_dict(headers)

    cdef int _add_pairs(self, dict headers, list header_list, bint follows) except -1:
        if not follows and self.pair_map is None:
            self.pair_map = self.pair_list.copy(True)
        self.pair_list.add_list(header_list)
        if self.pair_map is not None:
            self.pair_map.add_dict(headers)
        return 0

    cdef int _hold_as_objects(self) except -1:
        self.headers = list(self._headers_column())
        self.header_list = list(self.pair_list)
        self.pair_list = self.pair_map = None
        return 0

    def add_columns(self, other):
        self._join(other.columns, other.regular, other if isinstance(other, FrameColumns) else None)

    cdef int _join(self, tuple columns, bint regular, FrameColumns theirs) except -1:
        if self.pair_list is None:
            self.headers.extend(columns[HEADERS])
            self.header_list.extend(columns[HEADER_LIST])
        elif theirs is not None and theirs.pair_list is not None and self._can_extend(theirs):
            if theirs.pair_map is not None and self.pair_map is None:
                self.pair_map = self.pair_list.copy(True)
            self.pair_list.extend(theirs.pair_list)
            if self.pair_map is not None:
                self.pair_map.extend(
                    theirs.pair_list if theirs.pair_map is None else theirs.pair_map
                )
        else:
            for headers, header_list in zip(columns[HEADERS], columns[HEADER_LIST]):
                self._add_headers(headers, header_list)
        for position, (mine, given) in enumerate(zip(self.columns, columns)):
            if position != HEADERS and position != HEADER_LIST:
                mine.extend(given)
        self.regular = self.regular and regular
        return 0

    cdef int _add_headers(self, object headers, object header_list) except -1:
        """One frame's headers, given as objects."""
        cdef bint follows = headers_follow_list(headers, header_list)
        if self.pair_list is not None and not self._takes(headers, header_list, follows):
            self._hold_as_objects()
        if self.pair_list is None:
            self.headers.append(headers)
            self.header_list.append(header_list)
        else:
            self._add_pairs(<dict>headers, <list>header_list, follows)
        return 0

    cdef bint _can_extend(self, FrameColumns theirs):
        cdef HeaderPairs map_pairs = self.pair_list if self.pair_map is None else self.pair_map
        cdef HeaderPairs their_map = theirs.pair_list if theirs.pair_map is None else theirs.pair_map
        return self.pair_list.can_extend(theirs.pair_list) and map_pairs.can_extend(their_map)

    def __len__(self):
        return len(self.session_id)

    def __reduce__(self):
        held = tuple(
            column if isinstance(column, (list, array.array)) else list(column)
            for column in self.columns
        )
        return (_rebuilt, (type(self), held, self.regular))


def _rebuilt(cls, columns, regular):
    cdef FrameColumns rows = cls()
    rows._join(tuple(columns), regular, None)
    return rows
