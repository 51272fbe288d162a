from __future__ import annotations

from tests.pipeline.session.conversation import MS, T0, Conversation, only


def _consumer(talk: Conversation, mode: str = "client-individual") -> None:
    talk.handshake()
    talk.subscribe(5, "0", mode)
    talk.message(10, "0", "m1", ack="a1")
    talk.message(11, "0", "m2", ack="a2")


def test_committed_transaction_applies_its_acks_and_sends() -> None:
    talk = Conversation()
    _consumer(talk, "client")
    talk.client(20, "BEGIN", [("transaction", "tx1")])
    talk.client(21, "SEND", [("destination", "/queue/out"), ("transaction", "tx1")], b"reply")
    talk.client(22, "ACK", [("id", "a2"), ("transaction", "tx1")])
    talk.drain()
    assert talk.rows["acks"] == [] and talk.rows["messages"] == []  # wait for COMMIT
    talk.client(30, "COMMIT", [("transaction", "tx1")])
    rows = talk.finish(40)
    ack = rows["acks"][0]
    assert ack["transaction"] == "tx1" and ack["transaction_outcome"] == "committed"
    assert ack["acked_message_count"] == 2
    messages = {m["message_id"]: m for m in rows["messages"] if m["command"] == "MESSAGE"}
    assert messages["m1"]["acked_at_ns"] == T0 + 22 * MS  # the ACK's own time
    sent = only(rows["messages"], command="SEND")[0]
    assert sent["transaction_outcome"] == "committed"
    transaction = rows["transactions"][0]
    assert transaction["outcome"] == "committed"
    assert (transaction["sends"], transaction["acks"], transaction["acked_messages"]) == (1, 1, 2)
    assert transaction["duration_ms"] == 10.0
    assert transaction["begin_frame_index"] < transaction["end_frame_index"]


def test_ack_in_aborted_transaction_acknowledges_nothing() -> None:
    talk = Conversation()
    _consumer(talk)
    talk.client(20, "BEGIN", [("transaction", "tx1")])
    talk.client(21, "SEND", [("destination", "/queue/out"), ("transaction", "tx1")], b"reply")
    talk.client(22, "ACK", [("id", "a1"), ("transaction", "tx1")])
    talk.client(23, "ABORT", [("transaction", "tx1")])
    talk.client(30, "ACK", [("id", "a1")])  # acknowledged again outside, for real
    rows = talk.finish(40)
    aborted, real = sorted(rows["acks"], key=lambda a: a["frame_index"])
    assert aborted["transaction_outcome"] == "aborted"
    assert aborted["acked_message_count"] == 0 and aborted["delivered_at"] is None
    assert real["acked_message_count"] == 1
    messages = {m["message_id"]: m for m in rows["messages"] if m["command"] == "MESSAGE"}
    assert messages["m1"]["acked_at_ns"] == T0 + 30 * MS
    assert messages["m2"]["ack_outcome"] == "none"
    assert only(rows["messages"], command="SEND")[0]["transaction_outcome"] == "aborted"
    assert rows["transactions"][0]["outcome"] == "aborted"
    assert rows["transactions"][0]["acked_messages"] == 0
    assert rows["anomalies"] == []


def test_open_transaction_at_the_end_is_unfinished_and_acks_nothing() -> None:
    talk = Conversation()
    _consumer(talk)
    talk.client(20, "BEGIN", [("transaction", "tx9")])
    talk.client(21, "NACK", [("id", "a1"), ("transaction", "tx9")])
    talk.client(22, "SEND", [("destination", "/q"), ("transaction", "tx9")], b"x")
    rows = talk.finish(30)
    assert rows["acks"][0]["transaction_outcome"] == "unfinished"
    assert only(rows["messages"], command="SEND")[0]["transaction_outcome"] == "unfinished"
    assert all(m["ack_outcome"] == "none" for m in only(rows["messages"], command="MESSAGE"))
    transaction = rows["transactions"][0]
    assert transaction["outcome"] == "unfinished" and transaction["ended_at"] is None
    assert transaction["nacks"] == 1
    assert rows["sessions"][0]["transactions_unfinished"] == 1


def test_transaction_misuse_is_reported() -> None:
    talk = Conversation()
    talk.handshake()
    talk.client(5, "BEGIN", [("transaction", "t")])
    talk.client(6, "BEGIN", [("transaction", "t")])
    talk.client(7, "COMMIT", [("transaction", "never")])
    talk.client(8, "SEND", [("destination", "/q"), ("transaction", "ghost")], b"x")
    talk.client(9, "ABORT")
    rows = talk.finish(10)
    kinds = sorted(a["kind"] for a in rows["anomalies"])
    assert kinds == [
        "duplicate_transaction",
        "missing_header",
        "unknown_transaction",
        "unknown_transaction",
    ]
    outcomes = {t["transaction_id"]: t["outcome"] for t in rows["transactions"]}
    assert outcomes == {"never": "committed", "t": "unfinished", "ghost": "unfinished"}
    assert only(rows["transactions"], transaction_id="never")[0]["begin_frame_index"] is None
