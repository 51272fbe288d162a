from __future__ import annotations

import pytest

from pipeline.session.negotiation import (
    heart_beat_intervals,
    negotiated_version,
    offered_versions,
    parse_heart_beat,
)
from tests.pipeline.session.conversation import Conversation, only


def test_offered_versions_default_to_1_0() -> None:
    assert offered_versions(None) == ("1.0",)
    assert offered_versions("1.0, 1.1,1.2") == ("1.0", "1.1", "1.2")
    assert negotiated_version(None) == "1.0"
    assert negotiated_version("1.2") == "1.2"


@pytest.mark.parametrize(
    ("value", "terms"),
    [
        (None, (0, 0)),
        ("0,0", (0, 0)),
        ("1000,2000", (1000, 2000)),
        (" 5 , 7", (5, 7)),
        ("1000", None),
        ("a,b", None),
        ("-1,5", None),
        ("1,2,3", None),
    ],
)
def test_parse_heart_beat(value: str | None, terms: tuple[int, int] | None) -> None:
    assert parse_heart_beat(value) == terms


@pytest.mark.parametrize(
    ("client", "server", "intervals"),
    [
        ((1000, 2000), (3000, 500), (1000, 3000)),  # c2s = max(cx, sy), s2c = max(sx, cy)
        ((0, 2000), (3000, 500), (0, 3000)),  # client cannot send
        ((1000, 0), (3000, 500), (1000, 0)),  # client does not want beats
        ((1000, 2000), (0, 0), (0, 0)),
        ((4000, 4000), (10000, 10000), (10000, 10000)),
    ],
)
def test_heart_beat_intervals_take_the_max_and_zero_means_none(
    client: tuple[int, int], server: tuple[int, int], intervals: tuple[int, int]
) -> None:
    assert heart_beat_intervals(client, server) == intervals


def test_session_records_handshake_and_negotiated_terms() -> None:
    talk = Conversation()
    talk.handshake(0, accept="1.1,1.2", version="1.2", client_hb="1000,2000", server_hb="3000,500")
    talk.client(10, "DISCONNECT")
    session = talk.finish(20)["sessions"][0]
    assert session["connect_command"] == "CONNECT"
    assert session["accept_version"] == "1.1,1.2"
    assert session["version"] == "1.2"
    assert session["host"] == "/"
    assert session["login"] == "alice"
    assert session["server"] == "TestBroker/1.0"
    assert session["server_session"] == "sess-1"
    assert session["client_heart_beat"] == "1000,2000"
    assert session["server_heart_beat"] == "3000,500"
    assert (session["heartbeat_c2s_ms"], session["heartbeat_s2c_ms"]) == (1000, 3000)
    assert session["connect_latency_ms"] == 1.0


def test_no_accept_version_and_no_version_header_mean_1_0() -> None:
    talk = Conversation(version="1.0")
    talk.handshake(0, accept=None, version=None, command="CONNECT")
    talk.client(5, "SEND", [("destination", "/queue/a")], b"x")
    session = talk.finish(10)["sessions"][0]
    assert session["accept_version"] is None
    assert session["version"] == "1.0"
    assert session["heartbeat_c2s_ms"] == 0 and session["heartbeat_s2c_ms"] == 0
    assert talk.rows["anomalies"] == []


def test_decoder_switches_to_negotiated_version_right_after_connected() -> None:
    talk = Conversation()
    talk.client(0, "STOMP", [("accept-version", "1.2"), ("host", "/")], version="1.2")
    talk.subscribe(0.5, "0", dest="/q")
    # CONNECTED and a MESSAGE in one packet: the MESSAGE must already be read with 1.2 escapes.
    connected = b"CONNECTED\nversion:1.2\n\n\x00\n"
    message = b"MESSAGE\nsubscription:0\nmessage-id:ID\\cq\\c1\ndestination:/q\n\nhi\x00\n"
    talk.data("s2c", 1, connected + message)
    talk.client(2, "SEND", [("destination", "/queue/a:b")], b"x")  # encoded as a\cb
    rows = talk.finish(3)
    delivered = only(rows["messages"], command="MESSAGE")[0]
    sent = only(rows["messages"], command="SEND")[0]
    assert delivered["message_id"] == "ID:q:1"
    assert sent["destination"] == "/queue/a:b"
    assert rows["sessions"][0]["connect_command"] == "STOMP"
    assert [a["kind"] for a in rows["anomalies"]] == []


def test_1_0_session_keeps_backslashes_literal() -> None:
    talk = Conversation(version="1.0")
    talk.handshake(0, accept="1.0", version="1.0")
    talk.data("s2c", 2, b"MESSAGE\nmessage-id:ID\\cq\ndestination:/q\n\nhi\x00\n")
    rows = talk.finish(3)
    assert rows["messages"][0]["message_id"] == "ID\\cq"


def test_version_not_offered_and_bad_heart_beat_are_violations() -> None:
    talk = Conversation()
    talk.handshake(0, accept="1.0,1.1", version="1.2", client_hb="fast", server_hb="0,0")
    rows = talk.finish(5)
    kinds = sorted(a["kind"] for a in rows["anomalies"])
    assert kinds == ["bad_heart_beat", "version_not_offered"]
    assert rows["sessions"][0]["violations"] == 2
    assert rows["sessions"][0]["heartbeat_c2s_ms"] == 0


def test_unknown_version_keeps_previous_decoding_rules() -> None:
    talk = Conversation()
    talk.handshake(0, accept="1.2,2.0", version="2.0")
    talk.subscribe(1, "0", dest="/q")
    talk.data("s2c", 2, b"MESSAGE\nmessage-id:a\\cb\ndestination:/q\n\nhi\x00\n")
    rows = talk.finish(3)
    assert [a["kind"] for a in rows["anomalies"]] == ["unknown_version"]
    assert rows["sessions"][0]["version"] == "2.0"
    assert rows["messages"][0]["message_id"] == "a\\cb"  # still 1.0 rules: no escapes
