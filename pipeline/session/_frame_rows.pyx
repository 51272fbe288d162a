# cython: language_level=3, boundscheck=True, wraparound=False
"""`frame_rows.FrameColumns` compiled: the same lists, appended to without Python's calls.

`tests/pipeline/session/test_frame_rows.py` holds the two to the same columns and rows.
"""

from cpython cimport array
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject

import array as _array

# The integer columns: int64 values in C arrays, taken by Arrow without a Python object per value
# (`pipeline.spark.table_files.frame_batch`); the other columns are lists, as in the reference.
INT64_COLUMNS = (
    "frame_index", "ts_ns", "ts_end_ns", "body_length", "stream_offset", "frame_length",
    "tcp_offset",
)
cdef array.array _INT64 = _array.array("q")


cdef inline int _push(array.array column, long long value) except -1:
    cdef Py_ssize_t size = len(column)
    array.resize_smart(column, size + 1)
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
    cdef readonly tuple columns
    cdef public bint regular
    cdef list session_id, direction, command, headers, header_list, content_length
    cdef list body_sha256, body_preview, body, violation
    cdef array.array frame_index, ts_ns, ts_end_ns, body_length, stream_offset, frame_length
    cdef array.array tcp_offset

    def __cinit__(self):
        self.session_id, self.direction, self.command, self.headers = [], [], [], []
        self.header_list, self.content_length, self.violation = [], [], []
        self.body_sha256, self.body_preview, self.body = [], [], []
        self.frame_index = array.clone(_INT64, 0, False)
        self.ts_ns = array.clone(_INT64, 0, False)
        self.ts_end_ns = array.clone(_INT64, 0, False)
        self.body_length = array.clone(_INT64, 0, False)
        self.stream_offset = array.clone(_INT64, 0, False)
        self.frame_length = array.clone(_INT64, 0, False)
        self.tcp_offset = array.clone(_INT64, 0, False)
        self.columns = (
            self.session_id,
            self.direction,
            self.frame_index,
            self.ts_ns,
            self.ts_end_ns,
            self.command,
            self.headers,
            self.header_list,
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
        self.regular = True

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
        # Every integer converted before any column grows: one that cannot be held raises with
        # the columns still of one length.
        cdef long long c_frame_index = frame_index, c_ts_ns = ts_ns, c_ts_end_ns = ts_end_ns
        cdef long long c_body_length = body[0], c_stream_offset = stream_offset
        cdef long long c_frame_length = frame_length, c_tcp_offset = tcp_offset
        self.session_id.append(session_id)
        self.direction.append(direction)
        _push(self.frame_index, c_frame_index)
        _push(self.ts_ns, c_ts_ns)
        _push(self.ts_end_ns, c_ts_end_ns)
        self.command.append(command)
        self.headers.append(headers)
        self.header_list.append(header_list)
        self.content_length.append(content_length)
        _push(self.body_length, c_body_length)
        self.body_sha256.append(body[1])
        self.body_preview.append(body[2])
        self.body.append(body[3])
        _push(self.stream_offset, c_stream_offset)
        _push(self.frame_length, c_frame_length)
        _push(self.tcp_offset, c_tcp_offset)
        self.violation.append(violation)
        if self.regular and not headers_follow_list(headers, header_list):
            self.regular = False

    def add_columns(self, other):
        for mine, theirs in zip(self.columns, other.columns):
            mine.extend(theirs)
        self.regular = self.regular and other.regular

    def __len__(self):
        return len(self.session_id)

    def __reduce__(self):
        return (_rebuilt, (type(self), self.columns, self.regular))


def _rebuilt(cls, columns, regular):
    rows = cls()
    for mine, theirs in zip(rows.columns, columns):
        mine.extend(theirs)
    rows.regular = regular
    return rows
