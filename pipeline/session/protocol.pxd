# Compiled from protocol.py (pipeline.compiled.SOURCE_MODULES): ProtocolState as an extension
# type, read typed by the model (model.pxd). The hot handlers take the frame untyped: `_HANDLERS`
# holds them as Python callables, which Cython cannot make of a method of a cimported type.

import cython

# Aliased: protocol.py imports the Python names itself.
from pipeline.session.deliveries cimport Delivery as CDelivery
from pipeline.session.deliveries cimport DeliveryLedger as CDeliveryLedger
from pipeline.session.deliveries cimport Subscription as CSubscription
from pipeline.session.message_rows cimport AckFields as CAckFields
from pipeline.session.message_rows cimport MessageFields as CMessageFields
from pipeline.session.outbox cimport Outbox as COutbox
from pipeline.session.streams cimport Stamp as CStamp
from pipeline.stomp.events cimport Frame as CFrame


cdef class ProtocolState:
    cdef public object options, handshake, receipts, disconnect_receipt, last_command
    cdef public COutbox out
    cdef public dict rows, transactions
    cdef public CDeliveryLedger ledger
    cdef public list open_errors
    cdef public bint disconnected, disconnect_answered, pending_overflowed

    cpdef on_frame(self, direction, index, dict headers, CFrame frame, body, at)
    cpdef _on_send(self, index, dict headers, frame, body, at)
    @cython.locals(subscription=CSubscription)
    cpdef _on_message(self, index, dict headers, frame, body, at)
    cpdef _on_ack(self, index, dict headers, frame, body, at)
    cpdef _on_receipt(self, index, dict headers, frame, body, at)
    cpdef _violation(self, kind, direction, at, offset, detail)
    cpdef _answer_receipt(self, receipt_id, outcome, at, offset)
    # the rows' and the stamp's fields read and set as C struct members
    @cython.locals(named=CMessageFields, delivery=CDelivery, subscription=CSubscription)
    cpdef _apply_ack(self, CAckFields row, tuple keys, CStamp at)
