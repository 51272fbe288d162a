# Compiled from deliveries.py (pipeline.compiled.SOURCE_MODULES): DeliveryLedger, the
# subscriptions and the deliveries as extension types, their fields read as C struct members
# (by the protocol state too: protocol.pxd).

import cython

from pipeline.session.message_rows cimport MessageFields as CMessageFields
from pipeline.session.streams cimport Stamp as CStamp


cdef class Subscription:
    cdef public object sub_id, destination, ack_mode, selector, headers, frame_index
    cdef public object subscribed, unsubscribed, pending
    cdef public Py_ssize_t delivered, acked, nacked, abandoned


cdef class Delivery:
    cdef public object frame_index, row, keys, delivered
    cdef public Subscription subscription
    cdef public Py_ssize_t held


cdef class SpilledDelivery(Delivery):
    cdef public Py_ssize_t slot


cdef class DeliveryLedger:
    cdef public dict active, by_destination, by_key, spilled_numbers
    cdef public object pending, unacked, recent_ids, spilled
    cdef public list spilled_subscriptions
    cdef public Py_ssize_t held_bytes

    cpdef Py_ssize_t pending_count(self)
    cpdef Py_ssize_t pending_bytes(self)
    cpdef spill_oldest(self, Py_ssize_t max_count)
    cpdef subscription_for(self, sub_id, destination)
    cpdef bint seen_before(self, message_id)
    cpdef deliver(
        self, frame_index, row, Subscription subscription, ack, message_id, at, Py_ssize_t held
    )
    cpdef find(self, tuple keys)
    @cython.locals(subscription=Subscription, delivery=Delivery)
    cpdef list settle(self, Delivery named, outcome, at, ack_frame_index)
    cpdef _forget(self, Delivery delivery)


# a MESSAGE's row settled: its fields set as C struct members
cpdef settle_message(CMessageFields row, outcome, CStamp at, ack_frame_index)
