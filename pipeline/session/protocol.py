"""What the frames of a connection mean: handshake, subscriptions and deliveries, ACK/NACK,
transactions, receipts, ERRORs and DISCONNECT. Fed decoded frames in time order; writes the
messages, acks, receipts, errors, subscriptions and transactions rows into the outbox.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.compiled import set_slot_values, slot_values
from pipeline.net import Direction
from pipeline.session.clock import elapsed_ms
from pipeline.session.deliveries import AUTO, DeliveryLedger, Subscription, held_bytes
from pipeline.session.message_rows import AckRow, ack_row, message_row
from pipeline.session.negotiation import Handshake, Problem
from pipeline.session.options import ModelOptions
from pipeline.session.outbox import Outbox
from pipeline.session.privacy import preview, scrub
from pipeline.session.receipts import ReceiptBook
from pipeline.session.rows import Body, Row, error_row
from pipeline.session.streams import Chunk, Stamp
from pipeline.session.transactions import ABORTED, COMMITTED, UNFINISHED, BoundAck, Transaction
from pipeline.stomp import Frame

C2S = Direction.C2S
S2C = Direction.S2C
SIDE: dict[str, str] = {C2S: C2S.side, S2C: S2C.side}  # by Direction or its value
ACK_MODES: frozenset[str] = frozenset({"auto", "client", "client-individual"})
# An ACK/NACK naming no unsettled MESSAGE on a connection that gave MESSAGEs up (pending_overflow):
# the validation gate leaves these out of the share of acks that resolve.
UNMATCHED_AFTER_OVERFLOW = "ack_unmatched_after_overflow"

Headers = dict[str, str]


class ProtocolState:
    __slots__ = (
        "options",
        "out",
        "rows",
        "handshake",
        "ledger",
        "transactions",
        "receipts",
        "open_errors",
        "disconnected",
        "disconnect_receipt",
        "disconnect_answered",
        "last_command",
        "pending_overflowed",
    )

    def __init__(self, options: ModelOptions, out: Outbox) -> None:
        self.options = options
        self.out = out
        self.rows = out.tables
        self.handshake = Handshake()
        self.ledger = DeliveryLedger()
        self.transactions: dict[str, Transaction] = {}
        self.receipts = ReceiptBook(out.session_id)
        self.open_errors: list[Row] = []  # ERRORs waiting to learn whether they closed it
        self.disconnected = False
        self.disconnect_receipt: str | None = None
        self.disconnect_answered = False
        self.last_command: str | None = None
        self.pending_overflowed = False

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    # ---- events ----------------------------------------------------------------------------

    def on_frame(
        self,
        direction: str,
        index: int,
        headers: Headers,
        frame: Frame,
        body: Body,
        at: Chunk,
    ) -> None:
        command = frame.command
        if self.open_errors:
            self.settle_errors(False)
        self.last_command = command
        if direction == C2S:
            if self.disconnected:
                self._violation("frame_after_disconnect", C2S, at, frame.start, command)
            receipt = headers.get("receipt")
            if receipt is not None and not self.receipts.request(receipt, command, index, at):
                detail = f"receipt {receipt!r} requested again by {command}"
                self._violation("duplicate_receipt", C2S, at, frame.start, detail)
        handler = _HANDLERS.get(command)
        if handler is None:
            return
        expected_direction, handle = handler
        if expected_direction != direction:
            detail = f"{command} is a {SIDE[expected_direction]} frame"
            self._violation("wrong_direction", direction, at, frame.start, detail)
            return
        handle(self, index, headers, frame, body, at)

    def settle_errors(self, closed: bool | None) -> None:
        for row in self.open_errors:
            row["connection_closed"] = closed
        self.rows["errors"].extend(self.open_errors)
        self.open_errors = []

    def finish(self, closed: bool | None) -> None:
        """The connection is over: everything still open becomes final."""
        if self.open_errors:
            self.settle_errors(closed)
        counts, rows = self.out.counts, self.rows
        for transaction in self.transactions.values():
            counts["transactions_unfinished"] += 1
            self._end_transaction(transaction, UNFINISHED, None, None)
        self.transactions.clear()
        ledger = self.ledger
        session_id = self.out.session_id
        for subscription in ledger.active.values():
            spilled = ledger.spilled_count(subscription)
            rows["subscriptions"].append(subscription.row(session_id, "session_end", spilled))
        ledger.active.clear()
        unsettled = ledger.close()
        if len(unsettled):
            self.out.unsettled = unsettled
        missing = self.receipts.close()
        counts["receipts_missing"] += len(missing)
        rows["receipts"].extend(missing)

    def end_reason(self, close: str | None, reason: str | None) -> str:
        if self.disconnected:
            return "disconnect_receipt" if self.disconnect_answered else "disconnect"
        if self.last_command == "ERROR":
            return "error"
        return close or reason or "capture_end"

    # ---- anomalies ---------------------------------------------------------------------------

    def _violation(
        self, kind: str, direction: str, at: Stamp, offset: int | None, detail: str
    ) -> None:
        self.out.violation(kind, direction, at, offset, detail)

    def _problems(self, problems: list[Problem], direction: str, at: Chunk, offset: int) -> None:
        for kind, detail in problems:
            self._violation(kind, direction, at, offset, detail)

    def _unknown(self, kind: str, direction: str, at: Chunk, offset: int, detail: str) -> None:
        """A reference to something never seen: a violation only if the start was seen."""
        if self.handshake.connect_at is not None:
            self._violation(kind, direction, at, offset, detail)

    # ---- handlers: (index, headers, frame, body, at) ---------------------------------------

    def _on_connect(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        self._problems(self.handshake.connect(frame.command, headers, at), C2S, at, frame.start)

    def _on_connected(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        self._problems(self.handshake.connected(headers, at), S2C, at, frame.start)

    def _on_send(self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk) -> None:
        self.out.counts["messages_sent"] += 1
        if "destination" not in headers:
            self._violation("missing_header", C2S, at, frame.start, "SEND without destination")
        row = message_row(
            self.out.session_id, C2S, index, "SEND", headers, body, at.ts_ns, None
        )
        transaction_id = headers.get("transaction")
        if transaction_id is None:
            self.rows["messages"].append(row)
        else:
            self._transaction(transaction_id, at, frame.start).sends.append(row)

    def _on_subscribe(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        destination = headers.get("destination")
        if destination is None:
            self._violation("missing_header", C2S, at, frame.start, "SUBSCRIBE without destination")
        ack_mode = headers.get("ack", AUTO)
        if ack_mode not in ACK_MODES:
            detail = f"ack mode {ack_mode!r}: its MESSAGEs are settled one by one"
            self._violation("unknown_ack_mode", C2S, at, frame.start, detail)
        sub_id, selector = headers.get("id"), headers.get("selector")
        subscription = Subscription(sub_id, destination, ack_mode, selector, headers, index, at)
        replaced = self.ledger.subscribe(subscription)
        if replaced is not None:
            detail = f"{replaced.sub_id or destination!r} subscribed again"
            self._violation("duplicate_subscription", C2S, at, frame.start, detail)
            replaced.unsubscribed = at
            spilled = self.ledger.spilled_count(replaced)
            self.rows["subscriptions"].append(
                replaced.row(self.out.session_id, "replaced", spilled)
            )

    def _on_unsubscribe(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        sub_id, destination = headers.get("id"), headers.get("destination")
        subscription = self.ledger.unsubscribe(sub_id, destination, at)
        if subscription is None:
            detail = f"UNSUBSCRIBE of {sub_id or destination!r}, never subscribed"
            self._unknown("unknown_subscription", C2S, at, frame.start, detail)
        else:
            spilled = self.ledger.spilled_count(subscription)
            self.rows["subscriptions"].append(
                subscription.row(self.out.session_id, "unsubscribe", spilled)
            )

    def _on_message(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        self.out.counts["messages_delivered"] += 1
        ledger = self.ledger
        sub_id, destination = headers.get("subscription"), headers.get("destination")
        subscription = ledger.subscription_for(sub_id, destination)
        if subscription is None:
            detail = f"MESSAGE for {sub_id or destination!r}, never subscribed"
            self._unknown("unknown_subscription", S2C, at, frame.start, detail)
            subscription = Subscription(sub_id, destination, None, None, {}, None, at)
            ledger.subscribe(subscription)
        row = message_row(
            self.out.session_id,
            S2C,
            index,
            "MESSAGE",
            headers,
            body,
            at.ts_ns,
            subscription.ack_mode,
        )
        ack, message_id = headers.get("ack"), headers.get("message-id")
        redelivered = headers.get("redelivered") == "true"
        if message_id is not None and ledger.seen_before(message_id) and not redelivered:
            detail = f"MESSAGE {message_id!r} delivered again without redelivered:true"
            self._violation("duplicate_message_id", S2C, at, frame.start, detail)
        held = 0  # auto mode settles at once: nothing is held
        if subscription.ack_mode != AUTO:
            held = held_bytes(frame.end - frame.start - len(frame.body), body[2], body[3])
        if ledger.deliver(index, row, subscription, ack, message_id, at, held):
            self.rows["messages"].append(row)
            return
        options = self.options
        # the oldest rows to disk past the count kept in memory, given up past the bounds
        if len(ledger.pending) > options.max_pending_in_memory:
            ledger.spill_oldest(options.max_pending_in_memory)
        while ledger.pending_count():
            by_count = ledger.pending_count() > options.max_pending_messages
            if not by_count and ledger.pending_bytes() <= options.max_pending_bytes:
                return
            self.rows["messages"].append(ledger.give_up_oldest().row)
            if not self.pending_overflowed:
                self.pending_overflowed = True
                if by_count:
                    over = f"{options.max_pending_messages} unsettled MESSAGEs"
                else:
                    over = f"{options.max_pending_bytes} bytes held by unsettled MESSAGEs"
                detail = f"over {over}: the oldest count as never acknowledged"
                self._violation("pending_overflow", S2C, at, frame.start, detail)

    def _on_ack(self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk) -> None:
        command = frame.command
        self.out.counts["acks" if command == "ACK" else "nacks"] += 1
        id_header, message_id = headers.get("id"), headers.get("message-id")
        # 1.2 names the MESSAGE's ack header in id; 1.0/1.1 name its message-id
        v12 = self.handshake.version == "1.2"
        keys = (id_header, message_id) if v12 else (message_id, id_header)
        ack_id = keys[0] if keys[0] is not None else keys[1]
        if ack_id is None:
            detail = f"{command} without id or message-id"
            self._violation("missing_header", C2S, at, frame.start, detail)
        row = ack_row(self.out.session_id, index, command, headers, ack_id, at.ts_ns)
        transaction_id = headers.get("transaction")
        if transaction_id is None:
            self._apply_ack(row, keys, at)
            self.rows["acks"].append(row)
            return
        transaction = self._transaction(transaction_id, at, frame.start)
        transaction.acks.append(BoundAck(row, keys, at))
        if command == "ACK":
            transaction.ack_frames += 1
        else:
            transaction.nack_frames += 1

    def _on_begin(self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk) -> None:
        transaction_id = headers.get("transaction")
        if transaction_id is None:
            self._violation("missing_header", C2S, at, frame.start, "BEGIN without transaction")
        elif transaction_id in self.transactions:
            detail = f"BEGIN of open transaction {transaction_id!r}"
            self._violation("duplicate_transaction", C2S, at, frame.start, detail)
        else:
            self.transactions[transaction_id] = Transaction(transaction_id, index, at)

    def _on_commit_or_abort(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        command = frame.command
        transaction_id = headers.get("transaction")
        if transaction_id is None:
            detail = f"{command} without transaction"
            self._violation("missing_header", C2S, at, frame.start, detail)
            return
        transaction = self.transactions.pop(transaction_id, None)
        if transaction is None:
            detail = f"{command} of {transaction_id!r}, never begun"
            self._unknown("unknown_transaction", C2S, at, frame.start, detail)
            transaction = Transaction(transaction_id, None, at)
        outcome = COMMITTED if command == "COMMIT" else ABORTED
        self._end_transaction(transaction, outcome, index, at)

    def _on_disconnect(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        self.disconnected = True
        self.disconnect_receipt = headers.get("receipt")

    def _on_receipt(
        self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk
    ) -> None:
        receipt_id = headers.get("receipt-id")
        if receipt_id is None:
            self._violation("missing_header", S2C, at, frame.start, "RECEIPT without receipt-id")
            return
        if self.disconnected and receipt_id == self.disconnect_receipt:
            self.disconnect_answered = True
        self._answer_receipt(receipt_id, "receipt", at, frame.start)

    def _on_error(self, index: int, headers: Headers, frame: Frame, body: Body, at: Chunk) -> None:
        out = self.out
        out.counts["errors"] += 1
        mode = self.options.body_mode
        text = None
        if mode != "hash" and frame.body:
            limit = self.options.preview_bytes if mode == "preview" else None
            text = scrub(preview(frame.body, limit), out.secrets)
        row = error_row(out.session_id, index, headers, body[0], body[1], text, at)
        if row["message"] is not None:
            row["message"] = scrub(row["message"], out.secrets)
        self.open_errors.append(row)
        receipt_id = headers.get("receipt-id")
        if receipt_id is not None:
            self._answer_receipt(receipt_id, "error", at, frame.start)

    # ---- receipts, transactions, acknowledgements ------------------------------------------

    def _answer_receipt(self, receipt_id: str, outcome: str, at: Chunk, offset: int) -> None:
        row, matched = self.receipts.answer(receipt_id, outcome, at)
        if matched is None:
            detail = f"{receipt_id!r} answers a request sent after it"
            self._violation("receipt_before_request", S2C, at, offset, detail)
        elif not matched:
            detail = f"{receipt_id!r} answers no request"
            self._unknown("unknown_receipt", S2C, at, offset, detail)
        self.rows["receipts"].append(row)

    def _transaction(self, transaction_id: str, at: Chunk, offset: int) -> Transaction:
        transaction = self.transactions.get(transaction_id)
        if transaction is None:
            detail = f"transaction {transaction_id!r} used without BEGIN"
            self._unknown("unknown_transaction", C2S, at, offset, detail)
            transaction = Transaction(transaction_id, None, at)
            self.transactions[transaction_id] = transaction
        return transaction

    def _end_transaction(
        self, transaction: Transaction, outcome: str, index: int | None, at: Stamp | None
    ) -> None:
        acks = self.rows["acks"]
        for bound in transaction.acks:
            bound.row.transaction_outcome = outcome
            if outcome == COMMITTED:
                transaction.acked_messages += self._apply_ack(bound.row, bound.keys, bound.at)
            acks.append(bound.row)
        messages = self.rows["messages"]
        for send in transaction.sends:
            send.transaction_outcome = outcome
            messages.append(send)
        row = transaction.row(self.out.session_id, outcome, index, at)
        self.rows["transactions"].append(row)

    def _apply_ack(self, row: AckRow, keys: tuple[str | None, ...], at: Stamp) -> int:
        """Settle what the ACK/NACK ``row`` names; fills the row, returns how many it settled."""
        ledger = self.ledger
        delivery = ledger.find(keys)
        if delivery is None:
            subscription = ledger.subscription_for(row.subscription, None)
            if subscription is not None:
                row.ack_mode = subscription.ack_mode
            detail = f"{row.command} {row.ack_id!r} names no unsettled MESSAGE"
            kind = "ack_unmatched"
            if self.pending_overflowed:  # it may name one given up: not a matching failure
                kind = UNMATCHED_AFTER_OVERFLOW
                detail += " (MESSAGEs were given up past max_pending_messages)"
            self._violation(kind, C2S, at, None, detail)
            return 0
        if delivery.delivered.ts_ns > at.ts_ns:
            # Named before it was delivered (a guessed id, or the clocks of a merged capture):
            # a fact about the traffic, not a settlement; the MESSAGE waits for a later ACK.
            row.ack_mode = delivery.subscription.ack_mode
            detail = (
                f"{row.command} {row.ack_id!r} precedes the MESSAGE it names "
                f"(delivered {delivery.delivered.ts_ns - at.ts_ns} ns later)"
            )
            self._violation("ack_before_delivery", C2S, at, None, detail)
            return 0
        settled = ledger.settle(delivery, row.command, at, row.frame_index)
        named = delivery.row
        row.ack_mode = delivery.subscription.ack_mode
        row.acked_message_count = len(settled)
        row.delivered_at_ns = delivery.delivered.ts_ns
        row.latency_ms = elapsed_ms(delivery.delivered.ts_ns, at.ts_ns)
        if row.message_id is None:
            row.message_id = named.message_id
        if row.subscription is None:
            row.subscription = named.subscription
        self.rows["messages"].extend([settled_delivery.row for settled_delivery in settled])
        return len(settled)


_Handler = Callable[[ProtocolState, int, Headers, Frame, Body, Chunk], None]


def _handler(name: str) -> _Handler:
    """The method as the class holds it. Compiled, ``ProtocolState._on_send`` (a cpdef method)
    becomes a wrapper calling its C function through a pointer of the wrong type (without the
    dispatch flag): undefined behaviour, refused by clang 16 and later."""
    handler: _Handler = vars(ProtocolState)[name]
    return handler


_HANDLERS: dict[str, tuple[Direction, _Handler]] = {
    "CONNECT": (C2S, _handler("_on_connect")),
    "STOMP": (C2S, _handler("_on_connect")),
    "SEND": (C2S, _handler("_on_send")),
    "SUBSCRIBE": (C2S, _handler("_on_subscribe")),
    "UNSUBSCRIBE": (C2S, _handler("_on_unsubscribe")),
    "ACK": (C2S, _handler("_on_ack")),
    "NACK": (C2S, _handler("_on_ack")),
    "BEGIN": (C2S, _handler("_on_begin")),
    "COMMIT": (C2S, _handler("_on_commit_or_abort")),
    "ABORT": (C2S, _handler("_on_commit_or_abort")),
    "DISCONNECT": (C2S, _handler("_on_disconnect")),
    "CONNECTED": (S2C, _handler("_on_connected")),
    "MESSAGE": (S2C, _handler("_on_message")),
    "RECEIPT": (S2C, _handler("_on_receipt")),
    "ERROR": (S2C, _handler("_on_error")),
}
