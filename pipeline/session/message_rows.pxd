# Compiled from message_rows.py (pipeline.compiled.SOURCE_MODULES): the rows' held columns as C
# fields, made (`message_row`, `ack_row`) and read out (`held`) without Python's attribute calls.
# The rows themselves (`MessageRow`, `AckRow`) are Python classes deriving from these and the
# mapping.

import cython


cdef class MessageFields:
    cdef public object session_id, direction, frame_index, ts_ns, command, destination
    cdef public object message_id, subscription, ack_id, transaction, transaction_outcome
    cdef public object content_type, content_length, body_length, body_sha256, body_preview
    cdef public object body, receipt, user_headers, ack_mode, ack_outcome, acked_at_ns
    cdef public object ack_latency_ms, ack_frame_index

    cpdef tuple held(self)
    cpdef fill(self, tuple held)


cdef class AckFields:
    cdef public object session_id, frame_index, ts_ns, command, ack_id, message_id
    cdef public object subscription, ack_mode, transaction, transaction_outcome
    cdef public object acked_message_count, delivered_at_ns, latency_ms, receipt

    cpdef tuple held(self)
    cpdef fill(self, tuple held)


@cython.locals(user=dict)
cpdef dict user_headers(dict headers)

cpdef parse_length(value)

@cython.locals(row=MessageFields)
cpdef message_row(
    session_id, direction, frame_index, command, dict headers, tuple body, ts_ns, ack_mode
)

@cython.locals(row=AckFields)
cpdef ack_row(session_id, frame_index, command, dict headers, ack_id, ts_ns)
