from __future__ import annotations

from pipeline.session.receipts import ReceiptBook
from pipeline.session.streams import make_stamp
from pipeline.stomp import encode_frame
from tests.pipeline.session.conversation import MS, T0, Conversation


def test_book_matches_answers_and_reports_missing() -> None:
    book = ReceiptBook("s1")
    assert book.request("r1", "SEND", 3, make_stamp(T0))
    assert not book.request("r1", "SEND", 4, make_stamp(T0 + MS))  # first request kept
    assert book.request("r2", "SUBSCRIBE", 5, make_stamp(T0))
    row, matched = book.answer("r1", "receipt", make_stamp(T0 + 7 * MS))
    assert matched and row["request_frame_index"] == 3 and row["latency_ms"] == 7.0
    row, matched = book.answer("zz", "receipt", make_stamp(T0))
    assert not matched and row["request_command"] is None and row["date"] is not None
    (missing,) = book.close()
    assert missing["receipt_id"] == "r2" and missing["outcome"] == "missing"
    assert missing["received_at"] is None and missing["latency_ms"] is None


def test_receipt_latency_error_answers_and_missing_receipts() -> None:
    talk = Conversation()
    talk.handshake()
    talk.client(10, "SEND", [("destination", "/q"), ("receipt", "r-send")], b"x")
    talk.client(11, "SUBSCRIBE", [("id", "0"), ("destination", "/q"), ("receipt", "r-sub")])
    talk.client(12, "SEND", [("destination", "/bad"), ("receipt", "r-bad")], b"x")
    talk.server(14.5, "RECEIPT", [("receipt-id", "r-send")])
    talk.server(20, "ERROR", [("message", "no such queue"), ("receipt-id", "r-bad")], b"trace")
    talk.client(30, "DISCONNECT")
    rows = talk.finish(40)
    receipts = {r["receipt_id"]: r for r in rows["receipts"]}
    assert receipts["r-send"]["outcome"] == "receipt"
    assert receipts["r-send"]["request_command"] == "SEND"
    assert receipts["r-send"]["latency_ms"] == 4.5
    assert receipts["r-send"]["received_at_ns"] == T0 + int(14.5 * MS)
    assert receipts["r-bad"]["outcome"] == "error" and receipts["r-bad"]["latency_ms"] == 8.0
    assert receipts["r-sub"]["outcome"] == "missing"
    assert rows["sessions"][0]["receipts_missing"] == 1
    assert rows["anomalies"] == []


def test_receipt_for_unknown_request_is_a_violation_once_connect_was_seen() -> None:
    talk = Conversation()
    talk.handshake()
    talk.server(5, "RECEIPT", [("receipt-id", "who")])
    talk.server(6, "RECEIPT")
    rows = talk.finish(10)
    assert sorted(a["kind"] for a in rows["anomalies"]) == ["missing_header", "unknown_receipt"]
    assert rows["receipts"][0]["requested_at"] is None

    mid = Conversation(mid_stream=True)
    mid.server(5, "RECEIPT", [("receipt-id", "who")])
    assert mid.finish(10)["anomalies"] == []


def test_an_answer_never_matches_a_request_sent_after_it() -> None:
    book = ReceiptBook("s1")
    assert book.request("r1", "SEND", 3, make_stamp(T0 + 10 * MS))
    row, matched = book.answer("r1", "receipt", make_stamp(T0 + 5 * MS))
    assert matched is None and row["request_command"] is None and row["latency_ms"] is None
    row, matched = book.answer("r1", "receipt", make_stamp(T0 + 12 * MS))
    assert matched and row["latency_ms"] == 2.0 and not book.waiting


def test_receipt_before_its_request_is_a_violation_and_the_request_waits() -> None:
    # The RECEIPT's first byte is captured before the SEND it names, its last byte after.
    talk = Conversation()
    talk.handshake()
    receipt = encode_frame("RECEIPT", [("receipt-id", "r1")], b"")
    talk.data("s2c", 4, receipt[:5])
    talk.client(10, "SEND", [("destination", "/q"), ("receipt", "r1")], b"x")
    talk.data("s2c", 12, receipt[5:] + b"\n")
    rows = talk.finish(20)
    assert [a["kind"] for a in rows["anomalies"]] == ["receipt_before_request"]
    assert sorted(r["outcome"] for r in rows["receipts"]) == ["missing", "receipt"]
    assert all(r["latency_ms"] is None or r["latency_ms"] >= 0 for r in rows["receipts"])
