# cython: language_level=3, boundscheck=True, wraparound=False
"""`frame_rows.FrameColumns` compiled: the same columns, appended to without Python's calls.

`tests/pipeline/session/test_frame_rows.py` holds the two to the same columns and rows.
"""

from cpython cimport array
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject

from pipeline.session._arrow_columns cimport (
    Column,
    HeaderPairs,
    Int64Column,
    PairsMark,
    TextColumn,
    extended,
    resized,
)

import array as _array

import pyarrow as pa

# The integer columns: int64 values in C arrays, taken by Arrow without a Python object per value
# (`pipeline.spark.table_files.frame_batch`); the others are built in Arrow's buffers as well
# (`_arrow_columns`), the two header columns as `HeaderPairs`, but for the direction and the
# command: lists of a few shared strings, which the pass counts by (`flows.RunCounters`).
INT64_COLUMNS = (
    "frame_index", "ts_ns", "ts_end_ns", "body_length", "stream_offset", "frame_length",
    "tcp_offset",
)
cdef array.array _INT64 = _array.array("q")
# Where the two header columns are in `FrameColumns.columns` (`frame_rows.FRAME_COLUMNS`).
cdef Py_ssize_t HEADERS = 6, HEADER_LIST = 7


cdef inline int _push(array.array column, long long value) except -1:
    cdef Py_ssize_t size = len(column)
    resized(column, size + 1)
    column.data.as_longlongs[size] = value
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
    cdef Column session_id, content_length, body_sha256, body_preview, body, violation
    # A few values shared by every frame, counted by the pass as rows go out (`RunCounters`)
    cdef list direction, command
    cdef list headers, header_list  # the header pairs held as objects, else None
    cdef array.array frame_index, ts_ns, ts_end_ns, body_length, stream_offset, frame_length
    cdef array.array tcp_offset
    cdef HeaderPairs pair_list  # None once the pairs are held as objects
    cdef HeaderPairs pair_map  # None while the map follows the list, or as objects

    def __cinit__(self):
        self.session_id = TextColumn(pa.string())
        self.direction, self.command = [], []
        self.content_length = Int64Column(pa.int64())
        self.body_sha256 = TextColumn(pa.string())
        self.body_preview = TextColumn(pa.string())
        self.body = TextColumn(pa.binary())
        self.violation = TextColumn(pa.string())
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
        # Every integer converted before any column grows: one that cannot be raises with the
        # columns still of one length (a value the other columns cannot take is held as an
        # object instead).
        cdef long long c_frame_index = frame_index, c_ts_ns = ts_ns, c_ts_end_ns = ts_end_ns
        cdef long long c_body_length = body[0], c_stream_offset = stream_offset
        cdef long long c_frame_length = frame_length, c_tcp_offset = tcp_offset
        self.session_id.add(session_id)
        self.direction.append(direction)
        _push(self.frame_index, c_frame_index)
        _push(self.ts_ns, c_ts_ns)
        _push(self.ts_end_ns, c_ts_end_ns)
        self.command.append(command)
        self._add_headers(headers, header_list)
        self.content_length.add(content_length)
        _push(self.body_length, c_body_length)
        self.body_sha256.add(body[1])
        self.body_preview.add(body[2])
        self.body.add(body[3])
        _push(self.stream_offset, c_stream_offset)
        _push(self.frame_length, c_frame_length)
        _push(self.tcp_offset, c_tcp_offset)
        self.violation.add(violation)

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
            if position == HEADERS or position == HEADER_LIST:
                continue
            if type(mine) is array.array and type(given) is array.array and (
                (<array.array>mine).ob_descr.typecode == (<array.array>given).ob_descr.typecode
            ):
                extended(mine, given)
            else:
                mine.extend(given)
        self.regular = self.regular and regular
        return 0

    cdef int _add_headers(self, object headers, object header_list) except -1:
        """One frame's headers: as pairs where they fit, else as the objects given. A frame
        whose headers follow its list adds to the map only once the map has pairs of its own
        (until then the map is a view of the list)."""
        cdef bint follows = headers_follow_list(headers, header_list)
        cdef PairsMark mark
        if self.pair_list is not None:
            if not follows and self.pair_map is None:
                self.pair_map = self.pair_list.copy(True)
            mark = self.pair_list.mark()
            if not self.pair_list.add_list(header_list) or (
                self.pair_map is not None and not self.pair_map.add_dict(headers)
            ):
                self.pair_list.rewind(mark)
                self._hold_as_objects()
        if self.pair_list is None:
            self.headers.append(headers)
            self.header_list.append(header_list)
        if not follows:
            self.regular = False
        return 0

    cdef bint _can_extend(self, FrameColumns theirs):
        cdef HeaderPairs map_pairs = self.pair_list if self.pair_map is None else self.pair_map
        cdef HeaderPairs their_map = theirs.pair_list if theirs.pair_map is None else theirs.pair_map
        return self.pair_list.can_extend(theirs.pair_list) and map_pairs.can_extend(their_map)

    def __len__(self):
        return len(self.frame_index)

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
