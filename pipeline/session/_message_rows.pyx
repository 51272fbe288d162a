# cython: language_level=3, boundscheck=True, wraparound=False
"""`message_rows.MessageRow` and `AckRow` compiled: their slots as C fields, made and read out
as columns without Python's attribute calls. The mapping by column name is `SlotRow`'s, which
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
        cdef list session_id = [], direction = [], frame_index = [], ts_ns = [], command = []
        cdef list destination = [], message_id = [], subscription = [], ack_id = []
        cdef list transaction = [], transaction_outcome = [], content_type = []
        cdef list content_length = [], body_length = [], body_sha256 = [], body_preview = []
        cdef list body = [], receipt = [], user_headers = [], ack_mode = [], ack_outcome = []
        cdef list acked_at_ns = [], ack_latency_ms = [], ack_frame_index = []
        cdef MessageSlots row
        for item in rows:
            row = <MessageSlots?>item
            session_id.append(row.session_id)
            direction.append(row.direction)
            frame_index.append(row.frame_index)
            ts_ns.append(row.ts_ns)
            command.append(row.command)
            destination.append(row.destination)
            message_id.append(row.message_id)
            subscription.append(row.subscription)
            ack_id.append(row.ack_id)
            transaction.append(row.transaction)
            transaction_outcome.append(row.transaction_outcome)
            content_type.append(row.content_type)
            content_length.append(row.content_length)
            body_length.append(row.body_length)
            body_sha256.append(row.body_sha256)
            body_preview.append(row.body_preview)
            body.append(row.body)
            receipt.append(row.receipt)
            user_headers.append(row.user_headers)
            ack_mode.append(row.ack_mode)
            ack_outcome.append(row.ack_outcome)
            acked_at_ns.append(row.acked_at_ns)
            ack_latency_ms.append(row.ack_latency_ms)
            ack_frame_index.append(row.ack_frame_index)
        return (
            session_id,
            direction,
            frame_index,
            ts_ns,
            command,
            destination,
            message_id,
            subscription,
            ack_id,
            transaction,
            transaction_outcome,
            content_type,
            content_length,
            body_length,
            body_sha256,
            body_preview,
            body,
            receipt,
            user_headers,
            ack_mode,
            ack_outcome,
            acked_at_ns,
            ack_latency_ms,
            ack_frame_index,
        )


    @staticmethod
    def arrays(list rows not None, tuple types not None):
        """The held columns of ``rows`` as Arrow arrays of ``types`` (in the order of `columns`),
        built as the rows are read (`_arrow_columns`)."""
        if len(types) != 24:
            raise ValueError(f"a messages row holds 24 columns, not {len(types)}")
        cdef list built = [column_for(type_) for type_ in types]
        cdef Column c0 = built[0], c1 = built[1], c2 = built[2], c3 = built[3], c4 = built[4]
        cdef Column c5 = built[5], c6 = built[6], c7 = built[7], c8 = built[8], c9 = built[9]
        cdef Column c10 = built[10], c11 = built[11], c12 = built[12], c13 = built[13]
        cdef Column c14 = built[14], c15 = built[15], c16 = built[16], c17 = built[17]
        cdef Column c18 = built[18], c19 = built[19], c20 = built[20], c21 = built[21]
        cdef Column c22 = built[22], c23 = built[23]
        cdef MessageSlots row
        for item in rows:
            row = <MessageSlots?>item
            c0.add(row.session_id)
            c1.add(row.direction)
            c2.add(row.frame_index)
            c3.add(row.ts_ns)
            c4.add(row.command)
            c5.add(row.destination)
            c6.add(row.message_id)
            c7.add(row.subscription)
            c8.add(row.ack_id)
            c9.add(row.transaction)
            c10.add(row.transaction_outcome)
            c11.add(row.content_type)
            c12.add(row.content_length)
            c13.add(row.body_length)
            c14.add(row.body_sha256)
            c15.add(row.body_preview)
            c16.add(row.body)
            c17.add(row.receipt)
            c18.add(row.user_headers)
            c19.add(row.ack_mode)
            c20.add(row.ack_outcome)
            c21.add(row.acked_at_ns)
            c22.add(row.ack_latency_ms)
            c23.add(row.ack_frame_index)
        return [column.arrow() for column in built]


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
        cdef list session_id = [], frame_index = [], ts_ns = [], command = [], ack_id = []
        cdef list message_id = [], subscription = [], ack_mode = [], transaction = []
        cdef list transaction_outcome = [], acked_message_count = [], delivered_at_ns = []
        cdef list latency_ms = [], receipt = []
        cdef AckSlots row
        for item in rows:
            row = <AckSlots?>item
            session_id.append(row.session_id)
            frame_index.append(row.frame_index)
            ts_ns.append(row.ts_ns)
            command.append(row.command)
            ack_id.append(row.ack_id)
            message_id.append(row.message_id)
            subscription.append(row.subscription)
            ack_mode.append(row.ack_mode)
            transaction.append(row.transaction)
            transaction_outcome.append(row.transaction_outcome)
            acked_message_count.append(row.acked_message_count)
            delivered_at_ns.append(row.delivered_at_ns)
            latency_ms.append(row.latency_ms)
            receipt.append(row.receipt)
        return (
            session_id,
            frame_index,
            ts_ns,
            command,
            ack_id,
            message_id,
            subscription,
            ack_mode,
            transaction,
            transaction_outcome,
            acked_message_count,
            delivered_at_ns,
            latency_ms,
            receipt,
        )

    @staticmethod
    def arrays(list rows not None, tuple types not None):
        """`MessageSlots.arrays` for acks."""
        if len(types) != 14:
            raise ValueError(f"an acks row holds 14 columns, not {len(types)}")
        cdef list built = [column_for(type_) for type_ in types]
        cdef Column c0 = built[0], c1 = built[1], c2 = built[2], c3 = built[3], c4 = built[4]
        cdef Column c5 = built[5], c6 = built[6], c7 = built[7], c8 = built[8], c9 = built[9]
        cdef Column c10 = built[10], c11 = built[11], c12 = built[12], c13 = built[13]
        cdef AckSlots row
        for item in rows:
            row = <AckSlots?>item
            c0.add(row.session_id)
            c1.add(row.frame_index)
            c2.add(row.ts_ns)
            c3.add(row.command)
            c4.add(row.ack_id)
            c5.add(row.message_id)
            c6.add(row.subscription)
            c7.add(row.ack_mode)
            c8.add(row.transaction)
            c9.add(row.transaction_outcome)
            c10.add(row.acked_message_count)
            c11.add(row.delivered_at_ns)
            c12.add(row.latency_ms)
            c13.add(row.receipt)
        return [column.arrow() for column in built]
