# cython: language_level=3, boundscheck=True, wraparound=False
"""`message_rows.MessageRow` and `AckRow` compiled: their slots as C fields, made and read out
as columns without Python's attribute calls, as lists (`columns`) or straight into Arrow's
layout (`arrays`, through `_arrow_columns`). The mapping by column name is `SlotRow`'s, which
the Python classes made from these add (`message_rows.CompiledMessageRow`).

`tests/pipeline/session/test_message_rows.py` holds the two twins to the same rows and columns.
"""

from pipeline.session._arrow_columns cimport Column, column_for
from pipeline.session.rows import parse_length, user_headers


cdef class MessageSlots:
    cdef public object session_id, direction, frame_index, ts_ns, command, destination
    cdef public object message_id, subscription, ack_id, transaction, transaction_outcome
    cdef public object content_type, content_length, body_length, body_sha256, body_preview
    cdef public object body, receipt, user_headers, ack_mode, ack_outcome, acked_at_ns
    cdef public object ack_latency_ms, ack_frame_index

    @classmethod
    def make(
        cls,
        session_id,
        direction,
        frame_index,
        command,
        dict headers not None,
        tuple body not None,
        ts_ns,
        ack_mode,
    ):
        if len(body) != 4:
            raise ValueError(f"a body is 4 values, not {len(body)}")
        cdef MessageSlots row = MessageSlots.__new__(cls)
        row.session_id = session_id
        row.direction = direction
        row.frame_index = frame_index
        row.ts_ns = ts_ns
        row.command = command
        row.destination = headers.get("destination")
        row.message_id = headers.get("message-id")
        row.subscription = headers.get("subscription")
        row.ack_id = headers.get("ack")
        row.transaction = headers.get("transaction")
        row.transaction_outcome = None
        row.content_type = headers.get("content-type")
        row.content_length = parse_length(headers.get("content-length"))
        row.body_length = body[0]
        row.body_sha256 = body[1]
        row.body_preview = body[2]
        row.body = body[3]
        row.receipt = headers.get("receipt")
        row.user_headers = user_headers(headers)
        row.ack_mode = ack_mode
        row.ack_outcome = None
        row.acked_at_ns = None
        row.ack_latency_ms = None
        row.ack_frame_index = None
        return row

    @staticmethod
    def columns(list rows not None):
        return _lists(rows, MessageSlots, 24)

    @staticmethod
    def arrays(list rows not None, tuple types not None):
        """The held columns of ``rows`` as Arrow arrays of ``types`` (in the order of `columns`),
        built as the rows are read (`_arrow_columns`)."""
        return _arrays(rows, MessageSlots, types, 24)

    cdef int add_to(self, list columns) except -1:
        """This row's held values added to ``columns``, in the order of `columns`."""
        (<Column>columns[0]).add(self.session_id)
        (<Column>columns[1]).add(self.direction)
        (<Column>columns[2]).add(self.frame_index)
        (<Column>columns[3]).add(self.ts_ns)
        (<Column>columns[4]).add(self.command)
        (<Column>columns[5]).add(self.destination)
        (<Column>columns[6]).add(self.message_id)
        (<Column>columns[7]).add(self.subscription)
        (<Column>columns[8]).add(self.ack_id)
        (<Column>columns[9]).add(self.transaction)
        (<Column>columns[10]).add(self.transaction_outcome)
        (<Column>columns[11]).add(self.content_type)
        (<Column>columns[12]).add(self.content_length)
        (<Column>columns[13]).add(self.body_length)
        (<Column>columns[14]).add(self.body_sha256)
        (<Column>columns[15]).add(self.body_preview)
        (<Column>columns[16]).add(self.body)
        (<Column>columns[17]).add(self.receipt)
        (<Column>columns[18]).add(self.user_headers)
        (<Column>columns[19]).add(self.ack_mode)
        (<Column>columns[20]).add(self.ack_outcome)
        (<Column>columns[21]).add(self.acked_at_ns)
        (<Column>columns[22]).add(self.ack_latency_ms)
        (<Column>columns[23]).add(self.ack_frame_index)
        return 0


cdef class AckSlots:
    cdef public object session_id, frame_index, ts_ns, command, ack_id, message_id
    cdef public object subscription, ack_mode, transaction, transaction_outcome
    cdef public object acked_message_count, delivered_at_ns, latency_ms, receipt

    @classmethod
    def make(cls, session_id, frame_index, command, dict headers not None, ack_id, ts_ns):
        cdef AckSlots row = AckSlots.__new__(cls)
        row.session_id = session_id
        row.frame_index = frame_index
        row.ts_ns = ts_ns
        row.command = command
        row.ack_id = ack_id
        row.message_id = headers.get("message-id")
        row.subscription = headers.get("subscription")
        row.ack_mode = None
        row.transaction = headers.get("transaction")
        row.transaction_outcome = None
        row.acked_message_count = 0
        row.delivered_at_ns = None
        row.latency_ms = None
        row.receipt = headers.get("receipt")
        return row

    @staticmethod
    def columns(list rows not None):
        return _lists(rows, AckSlots, 14)

    @staticmethod
    def arrays(list rows not None, tuple types not None):
        """`MessageSlots.arrays` for acks."""
        return _arrays(rows, AckSlots, types, 14)

    cdef int add_to(self, list columns) except -1:
        """`MessageSlots.add_to` for acks."""
        (<Column>columns[0]).add(self.session_id)
        (<Column>columns[1]).add(self.frame_index)
        (<Column>columns[2]).add(self.ts_ns)
        (<Column>columns[3]).add(self.command)
        (<Column>columns[4]).add(self.ack_id)
        (<Column>columns[5]).add(self.message_id)
        (<Column>columns[6]).add(self.subscription)
        (<Column>columns[7]).add(self.ack_mode)
        (<Column>columns[8]).add(self.transaction)
        (<Column>columns[9]).add(self.transaction_outcome)
        (<Column>columns[10]).add(self.acked_message_count)
        (<Column>columns[11]).add(self.delivered_at_ns)
        (<Column>columns[12]).add(self.latency_ms)
        (<Column>columns[13]).add(self.receipt)
        return 0


cdef int _fill(list rows, type kind, list columns) except -1:
    """Each row's held values added to ``columns``; every row checked to be of ``kind`` first."""
    for item in rows:
        if not isinstance(item, kind):
            raise TypeError(f"a {kind.__name__} was expected, not {type(item).__name__}")
    if kind is MessageSlots:
        for item in rows:
            (<MessageSlots>item).add_to(columns)
    else:
        for item in rows:
            (<AckSlots>item).add_to(columns)
    return 0


cdef tuple _lists(list rows, type kind, Py_ssize_t count):
    """The held columns of ``rows`` as lists."""
    cdef list columns = []
    cdef Column column
    for _ in range(count):
        column = Column(None)
        column.fallback = []
        columns.append(column)
    _fill(rows, kind, columns)
    return tuple([(<Column>column).fallback for column in columns])


cdef list _arrays(list rows, type kind, tuple types, Py_ssize_t count):
    if len(types) != count:
        raise ValueError(f"a {kind.__name__} row holds {count} columns, not {len(types)}")
    cdef list columns = [column_for(type_) for type_ in types]
    _fill(rows, kind, columns)
    return [(<Column>column).arrow() for column in columns]
