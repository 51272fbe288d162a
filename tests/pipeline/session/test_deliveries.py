from __future__ import annotations

import pickle

from pipeline.session import ModelOptions
from pipeline.session.deliveries import PENDING_ROW_BYTES
from pipeline.session.rows import TableRow
from pipeline.stomp import encode_frame
from tests.pipeline.session.conversation import MS, T0, Conversation, only


def _by_id(rows: list[TableRow]) -> dict[str, TableRow]:
    return {row["message_id"]: row for row in rows if row["command"] == "MESSAGE"}


def test_auto_mode_messages_are_final_at_once() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "auto")
    talk.message(10, "0", "m1")
    talk.drain()
    assert [m["ack_outcome"] for m in talk.rows["messages"]] == ["auto"]  # before the end
    rows = talk.finish(20)
    message = rows["messages"][0]
    assert message["ack_mode"] == "auto" and message["acked_at"] is None
    assert rows["sessions"][0]["unacked_messages"] == 0


def test_client_ack_is_cumulative_and_times_every_covered_message() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client")
    talk.subscribe(6, "1", "client", dest="/queue/b")
    talk.message(10, "0", "m1", ack="a1")
    talk.message(20, "0", "m2", ack="a2")
    talk.message(25, "1", "other", ack="b1", dest="/queue/b")  # another subscription
    talk.message(30, "0", "m3", ack="a3")
    talk.message(40, "0", "m4", ack="a4")
    talk.client(100, "ACK", [("id", "a3")])
    talk.drain()
    settled = _by_id(talk.rows["messages"])
    assert sorted(settled) == ["m1", "m2", "m3"]  # emitted once final, m4 still open
    rows = talk.finish(200)
    ack = rows["acks"][0]
    assert ack["acked_message_count"] == 3
    assert ack["ack_mode"] == "client"
    assert ack["message_id"] == "m3" and ack["subscription"] == "0"
    assert ack["delivered_at_ns"] == T0 + 30 * MS
    assert ack["latency_ms"] == 70.0
    messages = _by_id(rows["messages"])
    for message_id, delivered in (("m1", 10), ("m2", 20), ("m3", 30)):
        assert messages[message_id]["ack_outcome"] == "ACK"
        assert messages[message_id]["acked_at_ns"] == T0 + 100 * MS
        assert messages[message_id]["ack_latency_ms"] == 100.0 - delivered
        assert messages[message_id]["ack_frame_index"] == ack["frame_index"]
    assert messages["m4"]["ack_outcome"] == "none" and messages["m4"]["acked_at"] is None
    assert messages["other"]["ack_outcome"] == "none"
    assert rows["sessions"][0]["unacked_messages"] == 2
    subscription = only(rows["subscriptions"], subscription_id="0")[0]
    assert (subscription["messages_delivered"], subscription["messages_acked"]) == (4, 3)
    assert subscription["messages_unacked"] == 1


def test_client_individual_ack_settles_only_the_named_message() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client-individual")
    for n in range(1, 4):
        talk.message(10 * n, "0", f"m{n}", ack=f"a{n}")
    talk.client(50, "ACK", [("id", "a2")])
    rows = talk.finish(60)
    assert rows["acks"][0]["acked_message_count"] == 1
    outcomes = {k: v["ack_outcome"] for k, v in _by_id(rows["messages"]).items()}
    assert outcomes == {"m1": "none", "m2": "ACK", "m3": "none"}
    assert rows["sessions"][0]["unacked_messages"] == 2


def test_nack_settles_with_nack_outcome() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client-individual")
    talk.message(10, "0", "m1", ack="a1")
    talk.client(15, "NACK", [("id", "a1")])
    rows = talk.finish(20)
    assert rows["acks"][0]["command"] == "NACK"
    assert rows["acks"][0]["acked_message_count"] == 1
    assert rows["messages"][0]["ack_outcome"] == "NACK"
    assert rows["messages"][0]["ack_latency_ms"] == 5.0
    assert rows["sessions"][0]["nacks"] == 1
    assert rows["subscriptions"][0]["messages_nacked"] == 1


def test_1_2_ack_names_the_ack_header_not_the_message_id() -> None:
    talk = Conversation()
    talk.handshake(version="1.2")
    talk.subscribe(5, "0", "client-individual")
    talk.message(10, "0", "ID:host-1:1", ack="ack-77")  # ActiveMQ: ack differs from message-id
    talk.client(20, "ACK", [("id", "ack-77")])
    rows = talk.finish(30)
    assert rows["acks"][0]["ack_id"] == "ack-77"
    assert rows["acks"][0]["message_id"] == "ID:host-1:1"
    assert rows["messages"][0]["ack_outcome"] == "ACK"
    assert rows["anomalies"] == []


def test_1_1_ack_names_the_message_id() -> None:
    talk = Conversation(version="1.1")
    talk.handshake(accept="1.1", version="1.1")
    talk.subscribe(5, "0", "client")
    talk.message(10, "0", "m-1")
    talk.message(11, "0", "m-2")
    talk.client(20, "ACK", [("subscription", "0"), ("message-id", "m-2")])
    rows = talk.finish(30)
    assert rows["acks"][0]["ack_id"] == "m-2"
    assert rows["acks"][0]["acked_message_count"] == 2


def test_1_0_without_subscription_ids_matches_by_destination() -> None:
    talk = Conversation(version="1.0")
    talk.handshake(accept=None, version=None)
    talk.client(5, "SUBSCRIBE", [("destination", "/queue/a"), ("ack", "client")])
    talk.server(10, "MESSAGE", [("destination", "/queue/a"), ("message-id", "x1")], b"1")
    talk.client(20, "ACK", [("message-id", "x1")])
    talk.client(25, "UNSUBSCRIBE", [("destination", "/queue/a")])
    rows = talk.finish(30)
    assert rows["messages"][0]["ack_mode"] == "client"
    assert rows["messages"][0]["ack_outcome"] == "ACK"
    subscription = rows["subscriptions"][0]
    assert subscription["subscription_id"] is None
    assert subscription["ended_by"] == "unsubscribe"
    assert subscription["unsubscribed_at_ns"] == T0 + 25 * MS
    assert rows["anomalies"] == []


def test_unmatched_ack_is_a_violation_and_acknowledges_nothing() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client")
    talk.message(10, "0", "m1", ack="a1")
    talk.client(20, "ACK", [("id", "nope"), ("subscription", "0")])
    rows = talk.finish(30)
    assert rows["acks"][0]["acked_message_count"] == 0
    assert rows["acks"][0]["ack_mode"] == "client"
    assert rows["acks"][0]["delivered_at"] is None
    assert [a["kind"] for a in rows["anomalies"]] == ["ack_unmatched"]
    assert rows["messages"][0]["ack_outcome"] == "none"


def test_messages_of_an_unseen_subscription_without_connect_are_not_violations() -> None:
    talk = Conversation(mid_stream=True)
    talk.message(10, "7", "m1", ack="a1")
    talk.message(11, "7", "m2", ack="a2")
    talk.client(20, "ACK", [("id", "a2")])
    rows = talk.finish(30, "capture_end")
    outcomes = {k: v["ack_outcome"] for k, v in _by_id(rows["messages"]).items()}
    assert outcomes == {"m1": "none", "m2": "ACK"}  # unknown mode: individually
    assert rows["anomalies"] == []
    subscription = rows["subscriptions"][0]
    assert subscription["subscription_id"] == "7" and subscription["ack_mode"] is None
    assert subscription["subscribe_frame_index"] is None
    assert subscription["subscribed_at_ns"] == T0 + 10 * MS


def test_pending_messages_are_bounded() -> None:
    talk = Conversation(ModelOptions(max_pending_messages=3))
    talk.handshake()
    talk.subscribe(5, "0", "client")
    for n in range(6):
        talk.message(10 + n, "0", f"m{n}", ack=f"a{n}")
    talk.drain()
    given_up = [m["message_id"] for m in talk.rows["messages"]]
    assert given_up == ["m0", "m1", "m2"]
    talk.client(30, "ACK", [("id", "a5")])
    rows = talk.finish(40)
    assert rows["acks"][0]["acked_message_count"] == 3
    assert [a["kind"] for a in rows["anomalies"]] == ["pending_overflow"]
    assert rows["sessions"][0]["unacked_messages"] == 3
    assert rows["subscriptions"][0]["messages_unacked"] == 3


def test_resubscribing_an_active_id_ends_the_old_subscription() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "auto")
    talk.subscribe(6, "0", "client", dest="/queue/b")
    rows = talk.finish(10)
    ended = sorted(s["ended_by"] for s in rows["subscriptions"])
    assert ended == ["replaced", "session_end"]
    assert [a["kind"] for a in rows["anomalies"]] == ["duplicate_subscription"]


def test_ack_captured_before_the_message_it_names_settles_nothing() -> None:
    # The ACK's first byte is captured before the MESSAGE, its last byte after: by capture time
    # it names a MESSAGE not yet delivered.
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client-individual")
    ack = encode_frame("ACK", [("id", "a1")], b"")
    talk.data("c2s", 10, ack[:4])
    talk.message(15, "0", "m1", ack="a1")
    talk.data("c2s", 20, ack[4:])
    rows = talk.drain()
    assert [a["kind"] for a in rows["anomalies"]] == ["ack_before_delivery"]
    early = rows["acks"][0]
    assert early["acked_message_count"] == 0 and early["latency_ms"] is None
    assert early["ack_mode"] == "client-individual"
    assert rows["messages"] == []  # still waiting
    talk.client(40, "ACK", [("id", "a1")])  # a later ACK settles it
    rows = talk.finish(50)
    (message,) = rows["messages"]
    assert message["ack_outcome"] == "ACK" and message["acked_at_ns"] == T0 + 40 * MS
    assert rows["acks"][1]["latency_ms"] == 25.0
    assert all(a["latency_ms"] is None or a["latency_ms"] >= 0 for a in rows["acks"])


def test_transactional_ack_sent_before_the_message_does_not_settle_it_at_commit() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client-individual")
    talk.client(8, "BEGIN", [("transaction", "t1")])
    talk.client(10, "ACK", [("id", "a1"), ("transaction", "t1")])
    talk.message(15, "0", "m1", ack="a1")
    talk.client(20, "COMMIT", [("transaction", "t1")])
    rows = talk.finish(30)
    assert [a["kind"] for a in rows["anomalies"]] == ["ack_before_delivery"]
    assert rows["messages"][0]["ack_outcome"] == "none"
    assert rows["acks"][0]["acked_message_count"] == 0
    assert rows["transactions"][0]["acked_messages"] == 0


def test_pending_messages_are_bounded_by_the_memory_they_hold() -> None:
    body = b"x" * 10_000  # kept whole in the rows: body_mode full
    talk = Conversation(ModelOptions(body_mode="full", max_pending_bytes=3 * 13_000))
    talk.handshake()
    talk.subscribe(5, "0", "client-individual")
    for n in range(6):
        talk.message(10 + n, "0", f"m{n}", ack=f"a{n}", body=body)
    talk.drain()
    given_up = [m["message_id"] for m in talk.rows["messages"]]
    assert given_up == ["m0", "m1", "m2"]
    ledger = talk.model._protocol.ledger
    assert len(ledger.pending) == 3 and ledger.held_bytes > 3 * (PENDING_ROW_BYTES + 10_000)
    carried = pickle.loads(pickle.dumps(talk.model))._protocol.ledger  # as a connection carried
    assert carried.held_bytes == ledger.held_bytes
    for n in range(6):
        talk.client(30 + n, "ACK", [("id", f"a{n}")])
    talk.drain()
    assert ledger.held_bytes == 0 and not ledger.pending
    rows = talk.finish(40)
    overflow = [a for a in rows["anomalies"] if a["kind"] == "pending_overflow"]
    assert len(overflow) == 1 and "39000 bytes held by unsettled MESSAGEs" in overflow[0]["detail"]
    kinds = [a["kind"] for a in rows["anomalies"]]
    assert kinds.count("ack_unmatched_after_overflow") == 3
    outcomes = {m["message_id"]: m["ack_outcome"] for m in rows["messages"]}
    assert outcomes == {
        "m0": "none",
        "m1": "none",
        "m2": "none",
        "m3": "ACK",
        "m4": "ACK",
        "m5": "ACK",
    }
    assert rows["sessions"][0]["unacked_messages"] == 3


def test_a_message_alone_past_the_memory_bound_is_given_up_at_once() -> None:
    talk = Conversation(ModelOptions(body_mode="full", max_pending_bytes=4096))
    talk.handshake()
    talk.subscribe(5, "0", "client")
    talk.message(10, "0", "big", ack="a1", body=b"x" * 8192)
    talk.drain()
    assert [m["ack_outcome"] for m in talk.rows["messages"]] == ["none"]
    assert talk.model._protocol.ledger.held_bytes == 0


def test_hash_mode_holds_no_body_so_large_messages_stay_within_the_count_bound() -> None:
    talk = Conversation(ModelOptions(max_pending_bytes=64 << 20))
    talk.handshake()
    talk.subscribe(5, "0", "client")
    for n in range(200):  # 200 MB of bodies, none of them held
        talk.message(10 + n, "0", f"m{n}", ack=f"a{n}", body=b"x" * 1_000_000)
    talk.drain()
    assert not talk.rows["messages"] and len(talk.model._protocol.ledger.pending) == 200


def test_acks_of_given_up_messages_are_told_apart_from_unmatched_ones() -> None:
    talk = Conversation(ModelOptions(max_pending_messages=3))
    talk.handshake()
    talk.subscribe(5, "0", "client-individual")
    talk.client(8, "ACK", [("id", "never-delivered")])  # before any overflow: unmatched
    for n in range(6):
        talk.message(10 + n, "0", f"m{n}", ack=f"a{n}")
    for n in range(6):  # the lagging consumer acks them all, the oldest three given up
        talk.client(30 + n, "ACK", [("id", f"a{n}")])
    rows = talk.finish(40)
    kinds = [a["kind"] for a in rows["anomalies"]]
    assert kinds.count("pending_overflow") == 1
    assert kinds.count("ack_unmatched") == 1
    assert kinds.count("ack_unmatched_after_overflow") == 3
    resolved = [a for a in rows["acks"] if a["delivered_at_ns"] is not None]
    assert len(resolved) == 3 and len(rows["acks"]) == 7


def test_a_message_id_delivered_again_is_an_anomaly_unless_redelivered() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "auto")
    talk.message(10, "0", "m1")
    talk.message(11, "0", "m1")  # the same id again
    talk.message(12, "0", "m1", extra=[("redelivered", "true")])
    talk.message(13, "0", "m2")
    rows = talk.finish(20)
    [duplicate] = [a for a in rows["anomalies"] if a["kind"] == "duplicate_message_id"]
    assert duplicate["direction"] == "s2c" and "'m1'" in duplicate["detail"]
    assert duplicate["ts_ns"] == T0 + 11 * MS
    assert [m["message_id"] for m in rows["messages"]] == ["m1", "m1", "m1", "m2"]
    assert rows["sessions"][0]["violations"] == 1


def test_message_ids_are_remembered_within_a_bound() -> None:
    from pipeline.session.deliveries import RECENT_MESSAGE_IDS, DeliveryLedger

    ledger = DeliveryLedger()
    assert not ledger.seen_before("first")
    for n in range(RECENT_MESSAGE_IDS):
        assert not ledger.seen_before(f"m{n}")
    assert len(ledger.recent_ids) == RECENT_MESSAGE_IDS
    assert not ledger.seen_before("first")  # forgotten: the oldest went first
    assert ledger.seen_before(f"m{RECENT_MESSAGE_IDS - 1}")


def test_a_ledger_carried_without_recent_ids_resumes_with_none_remembered() -> None:
    from pipeline.session.deliveries import DeliveryLedger

    ledger = DeliveryLedger()
    ledger.seen_before("m-1")
    _, state = ledger.__getstate__()
    del state["recent_ids"]  # saved by a release that did not remember ids
    resumed = DeliveryLedger.__new__(DeliveryLedger)
    resumed.__setstate__((None, state))
    assert not resumed.seen_before("m-1") and resumed.seen_before("m-1")


def test_subscriptions_and_deliveries_pickle_as_classes_with_slots() -> None:
    """Compiled, both are extension types: carried, they pickle as the source's classes with
    ``__slots__`` do (state ``(None, {slot: value})``), so either twin resumes the other's, and
    a connection carried before they were extension types resumes too."""
    from pipeline.session.deliveries import Delivery, Subscription
    from pipeline.session.streams import Stamp

    subscription = Subscription("0", "/queue/a", "client", None, {"id": "0"}, 3, Stamp(T0))
    delivery = Delivery(7, None, subscription, ("a7", "m7"), Stamp(T0 + MS), 2_100)  # type: ignore[arg-type]
    subscription.pending[7] = delivery
    subscription.acked = 2
    assert delivery.__reduce_ex__(2)[2] == (
        None,
        {name: getattr(delivery, name) for name in Delivery.__slots__},
    )
    carried = pickle.loads(pickle.dumps(delivery))
    assert (carried.frame_index, carried.keys, carried.held) == (7, ("a7", "m7"), 2_100)
    assert carried.delivered.ts_ns == T0 + MS
    resumed = carried.subscription
    assert (resumed.sub_id, resumed.ack_mode, resumed.acked, resumed.frame_index) == (
        "0",
        "client",
        2,
        3,
    )
    assert resumed.pending[7] is carried
