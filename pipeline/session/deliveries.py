"""Subscriptions and the MESSAGEs delivered to them, until each is settled.

A MESSAGE is settled by ACK or NACK (``client`` mode: cumulatively, every earlier unsettled
MESSAGE of the subscription too; ``client-individual``: just itself), at once in ``auto`` mode,
or as ``none`` when the connection ends first. MESSAGEs of a subscription whose SUBSCRIBE was not
seen (capture started mid-connection) are treated as individually acknowledged.

The newest unsettled deliveries are `Delivery` objects holding their rows; past
``max_pending_in_memory`` of them the oldest are spilled (`spill_oldest`): their rows go to disk
and a compact record stays (`pipeline.session.spilled`). Spilled deliveries are all older than
the others, and are found, settled, given up and closed as they would be in memory: a key names
the latest delivery given it, in memory or spilled, and a cumulative ACK settles the spilled ones
of its subscription before those in memory. When the connection ends, the rows of those still
unsettled are handed over as `UnsettledRows`, the spilled ones read back a batch at a time.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from pipeline.compiled import set_slot_values, slot_values
from pipeline.session.clock import elapsed_ms
from pipeline.session.rows import Row
from pipeline.session.spilled import SpilledDeliveries
from pipeline.session.streams import Stamp

if TYPE_CHECKING:
    from pipeline.session.message_rows import MessageRow

AUTO = "auto"
CLIENT = "client"  # cumulative
# message-ids of the latest MESSAGEs remembered to notice one delivered again on the connection
# (a wire fact, ``duplicate_message_id``); bounded so a long connection's carried state is too.
RECENT_MESSAGE_IDS = 1024
# What a pending MESSAGE holds besides the text counted by `held_bytes` (its row object, the
# Delivery, the index entries and the ids): about 1.9 KB measured with tracemalloc for a small
# message with two 50-character ids.
PENDING_ROW_BYTES = 2048


class Subscription:
    """A SUBSCRIBE (or the subscription a MESSAGE names, never seen subscribed) and the
    MESSAGEs delivered to it that are unsettled, oldest first (`pending`)."""

    __slots__ = (
        "sub_id",
        "destination",
        "ack_mode",
        "selector",
        "headers",
        "frame_index",
        "subscribed",
        "unsubscribed",
        "delivered",
        "acked",
        "nacked",
        "abandoned",
        "pending",
    )

    def __init__(
        self,
        sub_id: str | None,
        destination: str | None,
        ack_mode: str | None,
        selector: str | None,
        headers: dict[str, str],
        frame_index: int | None,
        subscribed: Stamp,
    ) -> None:
        self.sub_id = sub_id
        self.destination = destination
        self.ack_mode = ack_mode
        self.selector = selector
        self.headers = headers
        self.frame_index = frame_index
        self.subscribed = subscribed
        self.unsubscribed: Stamp | None = None
        self.delivered = 0
        self.acked = 0
        self.nacked = 0
        self.abandoned = 0  # given up as never acknowledged to bound memory
        self.pending: OrderedDict[int, Delivery] = OrderedDict()

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    def __repr__(self) -> str:
        return f"Subscription({self.sub_id!r}, {self.destination!r}, {self.ack_mode!r})"

    def row(self, session_id: str, ended_by: str, spilled: int = 0) -> Row:
        """``spilled``: its unsettled MESSAGEs held on disk (`DeliveryLedger.spilled_count`)."""
        return {
            "session_id": session_id,
            "subscription_id": self.sub_id,
            "destination": self.destination,
            "ack_mode": self.ack_mode,
            "selector": self.selector,
            "headers": self.headers,
            "subscribe_frame_index": self.frame_index,
            "subscribed_at": self.subscribed.ts,
            "subscribed_at_ns": self.subscribed.ts_ns,
            "unsubscribed_at": self.unsubscribed.ts if self.unsubscribed else None,
            "unsubscribed_at_ns": self.unsubscribed.ts_ns if self.unsubscribed else None,
            "ended_by": ended_by,
            "messages_delivered": self.delivered,
            "messages_acked": self.acked,
            "messages_nacked": self.nacked,
            "messages_unacked": len(self.pending) + spilled + self.abandoned,
            "date": self.subscribed.date,
        }


class Delivery:
    """A MESSAGE delivered and not yet settled."""

    __slots__ = ("frame_index", "row", "subscription", "keys", "delivered", "held")

    def __init__(
        self,
        frame_index: int,
        row: MessageRow,  # emitted once settled
        subscription: Subscription,
        keys: tuple[str, ...],
        delivered: Stamp,
        held: int,  # bytes of memory it holds (`held_bytes`)
    ) -> None:
        self.frame_index = frame_index
        self.row = row
        self.subscription = subscription
        self.keys = keys
        self.delivered = delivered
        self.held = held

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.frame_index!r}, {self.keys!r})"


class SpilledDelivery(Delivery):
    """A delivery found among the spilled ones (`DeliveryLedger.find`): its row read back. Never
    carried: it is settled or dropped as soon as it is found."""

    __slots__ = ("slot",)

    def __init__(
        self,
        frame_index: int,
        row: MessageRow,
        subscription: Subscription,
        keys: tuple[str, ...],
        delivered: Stamp,
        held: int,
        slot: int,
    ) -> None:
        super().__init__(frame_index, row, subscription, keys, delivered, held)
        self.slot = slot

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a spilled delivery is not carried")


def held_bytes(head_bytes: int, preview: str | None, body: bytes | None) -> int:
    """An estimate of the memory a pending MESSAGE holds: its header text (``head_bytes``, read
    off the wire), the preview and the body its row keeps, and `PENDING_ROW_BYTES`."""
    held = PENDING_ROW_BYTES + max(head_bytes, 0)
    if preview is not None:
        held += len(preview)
    if body is not None:
        held += len(body)
    return held


def settle_message(
    row: MessageRow, outcome: str, at: Stamp | None, ack_frame_index: int | None
) -> None:
    row.ack_outcome = outcome
    if at is not None:
        row.acked_at_ns = at.ts_ns
        row.ack_latency_ms = elapsed_ms(row.ts_ns, at.ts_ns)
        row.ack_frame_index = ack_frame_index


class UnsettledRows:
    """The rows of the MESSAGEs a connection left unsettled, each ``none`` (`DeliveryLedger.
    close`): the spilled ones, oldest first, then those held in memory. The spilled ones are
    read back from their file as they are taken, so a connection that ends with a million
    unsettled MESSAGEs never has all their rows in memory at once."""

    __slots__ = ("spilled", "held")

    def __init__(self, spilled: SpilledDeliveries, held: list[MessageRow]) -> None:
        self.spilled = spilled
        self.held = held

    def __len__(self) -> int:
        return len(self.spilled) + len(self.held)

    def take(self, limit: int) -> list[MessageRow]:
        """The next ``limit`` rows (every one left when negative)."""
        if limit < 0:
            limit = len(self)
        rows = self.spilled.take_rows(limit)
        for row in rows:
            settle_message(row, "none", None, None)
        if len(rows) < limit:
            more = limit - len(rows)
            rows.extend(self.held[:more])
            del self.held[:more]
        return rows


class DeliveryLedger:
    __slots__ = (
        "active",
        "by_destination",
        "by_key",
        "pending",
        "unacked",
        "recent_ids",
        "held_bytes",
        "spilled",
        "spilled_subscriptions",
        "spilled_numbers",
    )

    def __init__(self) -> None:
        self.active: dict[str, Subscription] = {}  # by id, or "destination:<d>" without id
        self.by_destination: dict[str, Subscription] = {}
        self.by_key: dict[str, Delivery] = {}  # ack / message-id -> unsettled delivery
        self.pending: OrderedDict[int, Delivery] = OrderedDict()  # all unsettled, oldest first
        self.unacked = 0  # deliveries given up as "none"
        self.recent_ids: OrderedDict[str, None] = OrderedDict()  # oldest first
        self.held_bytes = 0  # by the unsettled deliveries in memory (`Delivery.held`)
        # the oldest unsettled deliveries, past `spill_oldest`'s bound, with their rows on disk
        self.spilled = SpilledDeliveries()
        self.spilled_subscriptions: list[Subscription] = []  # by their number in `spilled`
        # their numbers by id(); not carried (the ids are this process's), made again from the
        # list (which holds each, so no id is reused while it is here)
        self.spilled_numbers: dict[int, int] = {}

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        none, state = slot_values(self)
        del state["spilled_numbers"]
        return none, state

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)
        self.spilled_numbers = {}
        if getattr(self, "recent_ids", None) is None:  # carried by a release without it
            self.recent_ids = OrderedDict()
        if "held_bytes" not in state[1]:  # nor these: counted from now on
            for delivery in self.pending.values():
                delivery.held = 0
            self.held_bytes = 0
        if "spilled" not in state[1]:  # nor these
            self.spilled = SpilledDeliveries()
            self.spilled_subscriptions = []
        for number, subscription in enumerate(self.spilled_subscriptions):
            self.spilled_numbers[id(subscription)] = number

    def pending_count(self) -> int:
        """Unsettled deliveries, in memory and spilled."""
        count = len(self.pending)
        if self.spilled_subscriptions:  # something was spilled (a list is quicker to ask)
            count += len(self.spilled)
        return count

    def pending_bytes(self) -> int:
        """The memory the unsettled deliveries hold."""
        held = self.held_bytes
        if self.spilled_subscriptions:
            held += self.spilled.held_bytes
        return held

    def spilled_count(self, subscription: Subscription) -> int:
        """Unsettled deliveries of ``subscription`` that are spilled."""
        number = self._spilled_number(subscription)
        return self.spilled.count(number) if number >= 0 else 0

    def spill_oldest(self, max_count: int) -> None:
        """Move the oldest deliveries in memory to `spilled` until ``max_count`` are left."""
        pending = self.pending
        while len(pending) > max_count:
            _, delivery = pending.popitem(last=False)
            subscription = delivery.subscription
            del subscription.pending[delivery.frame_index]
            self.held_bytes -= delivery.held
            by_key = self.by_key
            keys = []
            for key in delivery.keys:
                if by_key.get(key) is delivery:
                    del by_key[key]
                    keys.append(key)
            number = self._subscription_number(subscription)
            self.spilled.add(
                delivery.frame_index,
                delivery.delivered.ts_ns,
                number,
                tuple(keys),
                delivery.held,
                delivery.row,
            )

    def _subscription_number(self, subscription: Subscription) -> int:
        numbers = self.spilled_numbers
        number = numbers.get(id(subscription), -1)
        if number < 0:
            number = numbers[id(subscription)] = len(self.spilled_subscriptions)
            self.spilled_subscriptions.append(subscription)
        return number

    def _spilled_number(self, subscription: Subscription) -> int:
        """The number of ``subscription`` in `spilled`, or -1 when none of it is there."""
        if not self.spilled:
            return -1
        number = self.spilled_numbers.get(id(subscription), -1)
        return number if number >= 0 and self.spilled.count(number) else -1

    def _take_spilled(self, slot: int) -> SpilledDelivery:
        delivery = self._spilled_delivery(slot)
        self.spilled.take(slot)
        return delivery

    def _spilled_delivery(self, slot: int) -> SpilledDelivery:
        spilled = self.spilled
        keys, held, row = spilled.read(slot)
        subscription = self.spilled_subscriptions[spilled.subscription(slot)]
        delivered = Stamp(spilled.delivered_ns(slot))
        frame_index = spilled.frame_index(slot)
        return SpilledDelivery(frame_index, row, subscription, keys, delivered, held, slot)

    def seen_before(self, message_id: str) -> bool:
        """Whether one of the latest ``RECENT_MESSAGE_IDS`` MESSAGEs had ``message_id``; the id
        is remembered either way."""
        recent = self.recent_ids
        if message_id in recent:
            recent.move_to_end(message_id)
            return True
        recent[message_id] = None
        if len(recent) > RECENT_MESSAGE_IDS:
            recent.popitem(last=False)
        return False

    @staticmethod
    def key_of(sub_id: str | None, destination: str | None) -> str:
        return sub_id if sub_id is not None else f"destination:{destination}"

    def subscribe(self, subscription: Subscription) -> Subscription | None:
        """Register; returns the active subscription with the same id it replaces, if any."""
        key = self.key_of(subscription.sub_id, subscription.destination)
        replaced = self.active.get(key)
        self.active[key] = subscription
        if subscription.destination is not None:
            self.by_destination[subscription.destination] = subscription
        return replaced

    def unsubscribe(
        self, sub_id: str | None, destination: str | None, at: Stamp
    ) -> Subscription | None:
        subscription = self.active.pop(self.key_of(sub_id, destination), None)
        if subscription is None and sub_id is None and destination is not None:
            # 1.0 UNSUBSCRIBE by destination of a SUBSCRIBE that had an id
            named = self.by_destination.get(destination)
            if named is not None:
                subscription = self.active.pop(self.key_of(named.sub_id, destination), None)
        if subscription is None:
            return None
        subscription.unsubscribed = at
        destination = subscription.destination
        if destination is not None and self.by_destination.get(destination) is subscription:
            del self.by_destination[destination]
        return subscription

    def subscription_for(self, sub_id: str | None, destination: str | None) -> Subscription | None:
        if sub_id is not None:
            return self.active.get(sub_id)
        if destination is not None:
            return self.by_destination.get(destination)
        return None

    def deliver(
        self,
        frame_index: int,
        row: MessageRow,
        subscription: Subscription,
        ack: str | None,
        message_id: str | None,
        at: Stamp,
        held: int,
    ) -> bool:
        """Track a MESSAGE (known by its ``ack`` and ``message-id`` headers) that holds ``held``
        bytes; True when it is already final (auto mode)."""
        subscription.delivered += 1
        if subscription.ack_mode == AUTO:
            settle_message(row, AUTO, None, None)
            return True
        if ack is None or ack == message_id:
            keys: tuple[str, ...] = () if message_id is None else (message_id,)
        else:
            keys = (ack,) if message_id is None else (ack, message_id)
        delivery = Delivery(frame_index, row, subscription, keys, at, held)
        if self.spilled_subscriptions:
            for key in keys:
                self.spilled.drop_key(key)
        subscription.pending[frame_index] = delivery
        self.pending[frame_index] = delivery
        self.held_bytes += held
        for key in keys:
            self.by_key[key] = delivery
        return False

    def find(self, keys: tuple[str | None, ...]) -> Delivery | None:
        by_key = self.by_key
        spilled = self.spilled if self.spilled_subscriptions else None
        for key in keys:
            if key is not None:
                delivery = by_key.get(key)
                if delivery is not None:
                    return delivery
                if spilled is not None:
                    slot = spilled.find(key)
                    if slot >= 0:
                        return self._spilled_delivery(slot)
        return None

    def settle(
        self, named: Delivery, outcome: str, at: Stamp, ack_frame_index: int
    ) -> list[Delivery]:
        """Settle ``named`` (and, in client mode, every earlier unsettled one of its
        subscription) with outcome ACK or NACK; returns the deliveries settled."""
        subscription = named.subscription
        settled: list[Delivery] = []
        spilled = isinstance(named, SpilledDelivery)
        if subscription.ack_mode == CLIENT:
            number = self._spilled_number(subscription)
            if number >= 0:  # spilled deliveries of the subscription are older than the others
                last = named.slot if isinstance(named, SpilledDelivery) else None
                for slot in self.spilled.through(number, last):
                    if slot == last:
                        self.spilled.take(slot)
                        settled.append(named)
                    else:
                        settled.append(self._take_spilled(slot))
            pending = subscription.pending
            while pending and not spilled:
                _, delivery = pending.popitem(last=False)
                settled.append(delivery)
                if delivery is named:
                    break
        elif isinstance(named, SpilledDelivery):
            self.spilled.take(named.slot)
            settled.append(named)
        else:
            del subscription.pending[named.frame_index]
            settled.append(named)
        for delivery in settled:
            if not isinstance(delivery, SpilledDelivery):
                self._forget(delivery)
            settle_message(delivery.row, outcome, at, ack_frame_index)
        if outcome == "ACK":
            subscription.acked += len(settled)
        else:
            subscription.nacked += len(settled)
        return settled

    def give_up_oldest(self) -> Delivery:
        """Drop the oldest unsettled delivery as never acknowledged (memory bound)."""
        if self.spilled:
            delivery: Delivery = self._take_spilled(self.spilled.oldest())
        else:
            _, delivery = self.pending.popitem(last=False)
            del delivery.subscription.pending[delivery.frame_index]
            self._forget(delivery)
        delivery.subscription.abandoned += 1
        settle_message(delivery.row, "none", None, None)
        self.unacked += 1
        return delivery

    def close(self) -> UnsettledRows:
        """The connection is over: every unsettled delivery becomes ``none``, its row handed
        over in `UnsettledRows` (the spilled ones still on disk). Subscriptions rows count the
        spilled ones with `spilled_count` first."""
        remaining = [delivery.row for delivery in self.pending.values()]
        for row in remaining:
            settle_message(row, "none", None, None)
        unsettled = UnsettledRows(self.spilled, remaining)
        self.unacked += len(unsettled)
        self.spilled = SpilledDeliveries()
        self.spilled_subscriptions = []
        self.spilled_numbers = {}
        self.pending.clear()
        self.by_key.clear()
        self.held_bytes = 0
        return unsettled

    def _forget(self, delivery: Delivery) -> None:
        self.pending.pop(delivery.frame_index, None)
        self.held_bytes -= delivery.held
        by_key = self.by_key
        for key in delivery.keys:
            if by_key.get(key) is delivery:
                del by_key[key]
