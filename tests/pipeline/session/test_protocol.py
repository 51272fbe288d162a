from __future__ import annotations

import pytest

from pipeline.session import ModelOptions
from pipeline.session.outbox import Outbox
from pipeline.session.protocol import ProtocolState
from pipeline.session.rows import TableRow
from tests.pipeline.session.conversation import MS, T0, Conversation, only


def test_end_reason_prefers_stomp_endings_over_tcp_closes() -> None:
    protocol = ProtocolState(ModelOptions(), Outbox("s"))
    assert protocol.end_reason(None, None) == "capture_end"
    assert protocol.end_reason(None, "idle_timeout") == "idle_timeout"
    assert protocol.end_reason("rst", "capture_end") == "rst"
    protocol.last_command = "ERROR"
    assert protocol.end_reason("fin", None) == "error"
    protocol.disconnected = True
    assert protocol.end_reason("fin", None) == "disconnect"
    protocol.disconnect_answered = True
    assert protocol.end_reason("rst", None) == "disconnect_receipt"


# ---- how connections end, and ERROR frames --------------------------------------------------


def _ended(script: str) -> tuple[TableRow, list[TableRow]]:
    talk = Conversation()
    talk.handshake()
    if script == "disconnect_receipt":
        talk.client(10, "DISCONNECT", [("receipt", "bye")])
        talk.server(11, "RECEIPT", [("receipt-id", "bye")])
        talk.close("s2c", 12)
        talk.close("c2s", 12)
    elif script == "disconnect":
        talk.client(10, "DISCONNECT")
        talk.close("c2s", 11)
    elif script == "error":
        talk.server(10, "ERROR", [("message", "bad login")], b"denied")
        talk.close("s2c", 11)
    elif script == "fin":
        talk.close("c2s", 10, "fin")
    elif script == "rst":
        talk.close("s2c", 10, "rst")
    rows = talk.finish(20, "capture_end" if script == "capture_end" else None)
    return rows["sessions"][0], rows["errors"]


@pytest.mark.parametrize(
    ("script", "closed_by"),
    [
        ("disconnect_receipt", "server"),
        ("disconnect", "client"),
        ("error", "server"),
        ("fin", "client"),
        ("rst", "server"),
        ("capture_end", None),
    ],
)
def test_end_reason(script: str, closed_by: str | None) -> None:
    session, _ = _ended(script)
    assert session["end_reason"] == script
    assert session["closed_by"] == closed_by
    assert session["ended_at_ns"] == T0 + 20 * MS
    assert session["duration_ms"] == 20.0


def test_error_that_closed_the_connection() -> None:
    _, errors = _ended("error")
    error = errors[0]
    assert error["message"] == "bad login"
    assert error["connection_closed"] is True
    assert error["body_length"] == 6 and error["body_sha256"] is not None


def test_error_followed_by_frames_did_not_close_and_ending_is_not_error() -> None:
    talk = Conversation()
    talk.handshake()
    talk.client(5, "SEND", [("receipt", "r")], b"x")  # no destination
    talk.server(6, "ERROR", [("message", "no destination"), ("receipt-id", "r")])
    talk.client(7, "DISCONNECT")
    rows = talk.finish(8)
    assert rows["errors"][0]["connection_closed"] is False
    assert rows["errors"][0]["receipt_id"] == "r"
    assert rows["sessions"][0]["end_reason"] == "disconnect"
    assert rows["sessions"][0]["errors"] == 1


def test_error_at_capture_end_has_unknown_closing() -> None:
    talk = Conversation()
    talk.handshake()
    talk.server(5, "ERROR", [("message", "boom")])
    rows = talk.finish(8, "capture_end")
    assert rows["errors"][0]["connection_closed"] is None
    assert rows["sessions"][0]["end_reason"] == "error"


def test_frames_in_the_wrong_direction_and_after_disconnect_are_violations() -> None:
    talk = Conversation()
    talk.handshake()
    talk.client(5, "MESSAGE", [("destination", "/q"), ("message-id", "1")])
    talk.client(6, "DISCONNECT")
    talk.client(7, "SEND", [("destination", "/q")])
    rows = talk.finish(8)
    kinds = [a["kind"] for a in rows["anomalies"]]
    assert kinds == ["wrong_direction", "frame_after_disconnect"]
    assert only(rows["messages"], command="MESSAGE") == []
