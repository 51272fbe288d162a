# cython: language_level=3, boundscheck=True, wraparound=False
"""`frame_rows.FrameColumns` compiled: the same lists, appended to without Python's calls.

`tests/pipeline/session/test_frame_rows.py` holds the two to the same columns and rows.
"""

from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject


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
    cdef list session_id, direction, frame_index, ts_ns, ts_end_ns, command, headers
    cdef list header_list, content_length, body_length, body_sha256, body_preview, body
    cdef list stream_offset, frame_length, tcp_offset, violation

    def __cinit__(self):
        self.session_id, self.direction, self.frame_index = [], [], []
        self.ts_ns, self.ts_end_ns, self.command, self.headers = [], [], [], []
        self.header_list, self.content_length, self.body_length = [], [], []
        self.body_sha256, self.body_preview, self.body = [], [], []
        self.stream_offset, self.frame_length, self.tcp_offset = [], [], []
        self.violation = []
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
        self.session_id.append(session_id)
        self.direction.append(direction)
        self.frame_index.append(frame_index)
        self.ts_ns.append(ts_ns)
        self.ts_end_ns.append(ts_end_ns)
        self.command.append(command)
        self.headers.append(headers)
        self.header_list.append(header_list)
        self.content_length.append(content_length)
        self.body_length.append(body[0])
        self.body_sha256.append(body[1])
        self.body_preview.append(body[2])
        self.body.append(body[3])
        self.stream_offset.append(stream_offset)
        self.frame_length.append(frame_length)
        self.tcp_offset.append(tcp_offset)
        self.violation.append(violation)
        if self.regular and not headers_follow_list(headers, header_list):
            self.regular = False

    def add_columns(self, other):
        cdef list mine
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
