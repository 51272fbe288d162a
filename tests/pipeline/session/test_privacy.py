from __future__ import annotations

import hashlib
import hmac

import pytest

from pipeline.net import Direction
from pipeline.session import Endpoint, ModelOptions, SessionModel
from pipeline.session.frame_rows import TableRows
from pipeline.session.privacy import (
    body_fields,
    has_secret_header,
    hash_login,
    is_secret_header,
    protect_headers,
    scrub,
    scrub_bytes,
    scrub_structure,
)
from pipeline.session.rows import TableRow
from pipeline.stomp import encode_frame
from pipeline.websocket import Transport, apply
from tests.pipeline.session.conversation import Conversation, only
from tests.support.websocket_wire import Side, request, response

SECRET = "s3cret-pass"


def test_protect_headers_masks_passcodes_and_hashes_logins_with_a_key() -> None:
    headers = [("login", "bob"), ("passcode", "pw1"), ("Passcode", "pw2"), ("host", "/")]
    protected, secrets = protect_headers(headers, None)
    assert protected == [("login", "bob"), ("passcode", "***"), ("Passcode", "***"), ("host", "/")]
    assert secrets == ["pw1", "pw2"]
    protected, _ = protect_headers([("username", "bob")], b"k")
    assert protected == [("username", hmac.new(b"k", b"bob", hashlib.sha256).hexdigest())]


def test_scrub_removes_spelled_out_and_known_passcodes() -> None:
    assert scrub("bad line passcode: hunter2 here") == "bad line passcode: *** here"
    assert scrub("PASSCODE=abc,next") == "PASSCODE=***,next"
    assert scrub("echo of hunter22!", ("hunter22",)) == "echo of ***!"
    assert scrub("a short pw x", ("x",)) == "a short pw x"  # too short to mask safely


@pytest.mark.parametrize(
    ("mode", "preview_bytes", "expected_preview", "expected_body"),
    [
        ("hash", 0, None, None),
        ("preview", 4, "h\u00e9l", None),  # 4 bytes: h, é (2 bytes), l
        ("preview", 2, "h\ufffd", None),  # cut inside é: replacement char
        ("full", 0, None, "héllo".encode()),
    ],
)
def test_body_modes(
    mode: str, preview_bytes: int, expected_preview: str | None, expected_body: bytes | None
) -> None:
    body = "héllo".encode()
    length, digest, text, raw = body_fields(body, ModelOptions(mode, preview_bytes))
    assert length == 6
    assert digest == hashlib.sha256(body).hexdigest()
    assert text == expected_preview and raw == expected_body
    assert body_fields(b"", ModelOptions(mode, preview_bytes)) == (0, None, None, None)


def _session_with_secrets(options: ModelOptions) -> dict[str, list[TableRow]]:
    talk = Conversation(options)
    talk.handshake(passcode=SECRET, login="alice")
    talk.subscribe(5, "0", "auto")
    talk.message(10, "0", "m1", body=b"hello body")
    talk.client(12, "SEND", [("destination", "/q"), ("passcode", SECRET)], b"x")
    # A CONNECT-like garbage line that a decoder may quote, and an ERROR that echoes it
    talk.data("c2s", 13, f"CONNECT\npasscode:{SECRET}\nbroken".encode())
    talk.server(14, "ERROR", [("message", f"bad passcode: {SECRET}")], f"echo {SECRET}".encode())
    talk.gap("c2s", 15, 10)
    return talk.finish(20)


@pytest.mark.parametrize(
    "options",
    [ModelOptions(), ModelOptions("preview", 64), ModelOptions("full", 0, b"key")],
)
def test_passcode_never_reaches_a_row(options: ModelOptions) -> None:
    rows = _session_with_secrets(options)
    assert rows["frames"] and rows["anomalies"] and rows["errors"]
    assert SECRET not in repr(rows)
    connect = only(rows["frames"], command="CONNECT")[0]
    assert connect["headers"]["passcode"] == "***"
    assert ("passcode", "***") in connect["header_list"]
    send = only(rows["frames"], command="SEND")[0]
    assert send["headers"]["passcode"] == "***"


def test_bodies_are_length_and_hash_by_default() -> None:
    rows = _session_with_secrets(ModelOptions())
    message = only(rows["messages"], command="MESSAGE")[0]
    assert message["body_length"] == 10
    assert message["body_sha256"] == hashlib.sha256(b"hello body").hexdigest()
    assert message["body_preview"] is None and message["body"] is None
    assert rows["errors"][0]["body_preview"] is None
    frame = only(rows["frames"], command="MESSAGE")[0]
    assert frame["body_sha256"] == message["body_sha256"] and frame["body_preview"] is None


def test_preview_and_full_body_modes_reach_frames_messages_and_errors() -> None:
    rows = _session_with_secrets(ModelOptions("preview", 5))
    assert only(rows["messages"], command="MESSAGE")[0]["body_preview"] == "hello"
    assert only(rows["frames"], command="MESSAGE")[0]["body_preview"] == "hello"
    assert rows["errors"][0]["body_preview"] == "echo "
    rows = _session_with_secrets(ModelOptions("full"))
    assert only(rows["messages"], command="MESSAGE")[0]["body"] == b"hello body"
    assert rows["errors"][0]["body_preview"] == "echo ***"


def test_login_is_kept_by_default_and_keyed_hash_on_request() -> None:
    rows = _session_with_secrets(ModelOptions())
    assert rows["sessions"][0]["login"] == "alice"
    rows = _session_with_secrets(ModelOptions(login_hash_key=b"key"))
    digest = hash_login("alice", b"key")
    assert digest == hmac.new(b"key", b"alice", hashlib.sha256).hexdigest()
    assert rows["sessions"][0]["login"] == digest
    assert only(rows["frames"], command="CONNECT")[0]["headers"]["login"] == digest
    assert "alice" not in repr(rows)


@pytest.mark.parametrize(
    "name",
    [
        "passcode",
        "passcode ",
        " passcode",
        "PASSCODE",
        "Pass Code",
        "pass\\ccode",
        "pass:code",
        "pass\\ncode",
        "\tpasscode\r",
        "pass_code",
        "pass-code",
    ],
)
def test_every_name_a_broker_could_read_as_passcode_is_secret(name: str) -> None:
    assert is_secret_header(name)
    protected, secrets = protect_headers([(name, "pw-value")], None)
    assert protected == [(name, "***")] and secrets == ["pw-value"]


@pytest.mark.parametrize("name", ["login", "host", "passcodes", "xpasscode", "code", "pass"])
def test_other_names_are_not_secret(name: str) -> None:
    assert not is_secret_header(name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("echo passcode :abc1 end", "echo passcode :*** end"),
        ("pass\\ccode\\cabc1", "pass\\ccode\\c***"),
        ("PASS CODE= abc1;x", "PASS CODE= ***;x"),
        ("\\" * 5000 + "x", "\\" * 5000 + "x"),  # no catastrophic backtracking
    ],
)
def test_scrub_masks_passcode_variants_spelled_out(text: str, expected: str) -> None:
    assert scrub(text) == expected


def _mid_stream_echo(options: ModelOptions) -> dict[str, list[TableRow]]:
    """A connection whose CONNECT was not captured: the broker's ERROR echoes the login."""
    talk = Conversation(options, mid_stream=True)
    talk.server(1, "ERROR", [("message", "login failed: passcode:echoed-1")], b"passcode:echoed-2")
    talk.server(2, "ERROR", [("passcode ", "echoed-3")], b"")
    return talk.finish(5)


@pytest.mark.parametrize(
    "options", [ModelOptions(), ModelOptions("full"), ModelOptions("preview", 99)]
)
def test_masking_does_not_wait_for_a_connect(options: ModelOptions) -> None:
    rows = _mid_stream_echo(options)
    assert rows["frames"] and rows["errors"]
    assert "echoed-" not in repr(rows)


def test_crafted_placements_in_one_connection_never_reach_a_row() -> None:
    talk = Conversation(ModelOptions("full"))
    talk.handshake(passcode="first-pw", login="alice")
    talk.client(3, "SEND", [("destination", "/q"), ("PASSCODE", "upper-pw")], b"x")
    talk.client(4, "SEND", [("destination", "/q"), (" passcode", "lead-pw")], b"x")
    talk.client(5, "SEND", [("destination", "/q"), ("pass:code", "colon-pw")], b"x")
    talk.data("c2s", 6, b"STOMP\naccept-version:1.2\npasscode :second-pw\n\n\0")
    talk.data("c2s", 7, b"CONNECT\npass\\ccode:escaped-pw\r\n\n\0")
    rows = talk.finish(9)
    text = repr(rows)
    for secret in ("first-pw", "upper-pw", "lead-pw", "colon-pw", "second-pw", "escaped-pw"):
        assert secret not in text, secret


def test_scrub_structure_masks_secret_keys_pairs_and_spelled_out_text() -> None:
    row = {
        "session_id": "s1",
        "headers": {"passcode ": "pw-1", "host": "/"},
        "header_list": [["PASS\\ccode", "pw-2"], ["login", "bob"]],
        "message": "rejected passcode=pw-3",
        "body": b"passcode:pw-4\n",
        "count": 3,
    }
    clean = scrub_structure([row], ("pw-1",))
    assert "pw-" not in repr(clean)
    assert clean[0]["headers"] == {"passcode ": "***", "host": "/"}
    assert clean[0]["header_list"][1] == ["login", "bob"] and clean[0]["count"] == 3
    assert scrub_structure(("passcode", "pw-5")) == ("passcode", "***")


def test_has_secret_header_agrees_with_each_name_before_and_after_learning_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipeline.session import privacy

    monkeypatch.setattr(privacy, "_PLAIN_NAMES", set())
    monkeypatch.setattr(privacy, "_PLAIN_NAMES_MAX", 3)
    frames = [
        {"destination": "/q", "ack": "1"},
        {"destination": "/q", "pass-code": "x"},
        {"PASSCODE": "x"},
        {"a": "1", "b": "2", "c": "3", "d": "4"},  # past the bound
        {"destination": "/q", "ack": "1"},
        {"d": "4", "passcode": "x"},
        {},
    ]
    for _ in range(2):  # names learned on the first round
        for headers in frames:
            assert has_secret_header(headers) is any(map(is_secret_header, headers)), headers
    assert len(privacy._PLAIN_NAMES) == 3 and not any(map(is_secret_header, privacy._PLAIN_NAMES))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/ws?passcode=pw1&x=1", "/ws?passcode=***&x=1"),
        (
            "/ws?login=a&PassWord=pw1&token=t1&token=t2",
            "/ws?login=a&PassWord=***&token=***&token=***",
        ),
        (
            "/ws?access_token=t1#access_token=t2&state=3",
            "/ws?access_token=***#access_token=***&state=3",
        ),
        (
            "/ws?pass%77ord=pw1&%70asscode=pw2&pass+word=pw3",
            "/ws?pass%77ord=***&%70asscode=***&pass+word=***",
        ),
        ("/ws?Access-Token=t1;pass=pw1", "/ws?Access-Token=***;pass=***"),
        ("/ws?passcode&token=&pass=pw1", "/ws?passcode&token=&pass=***"),  # nothing to mask
        ("/ws?pass%20code=pw1&b=2", "/ws?pass%20code=***&b=2"),
        ("bad login: password=pw1, retry", "bad login: password=***, retry"),
        ("token: t1 refused", "token: *** refused"),
        ("/ws?tokens=1&mytoken=2&bypass=3&a.token=4&id=%41",) * 2,
        ("%" * 5000 + "a" * 300 + "=1", "%" * 5000 + "a" * 300 + "=1"),  # linear time
    ],
)
def test_scrub_masks_credential_parameters_and_keeps_the_rest(text: str, expected: str) -> None:
    assert scrub(text) == expected
    assert scrub(expected) == expected  # masking is idempotent
    assert scrub_bytes(text.encode() + b" \xff") == expected.encode() + b" \xff"


def _websocket_session(target: str, reason: str) -> dict[str, TableRows]:
    """A STOMP-over-WebSocket session: upgrade to ``target``, a CONNECT, closes with ``reason``."""
    model = SessionModel("ws1", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 15674))
    transport = Transport()
    client, server = Side(True), Side(False)
    upgrade = request(f"Referer: http://app{target}\r\n").replace(b" /ws ", f" {target} ".encode())
    chunks = [
        ("c2s", upgrade),
        ("s2c", response()),
        ("c2s", client.text(encode_frame("CONNECT", [("accept-version", "1.2"), ("host", "/")]))),
        ("s2c", server.text(encode_frame("CONNECTED", [("version", "1.2")]) + b"\n")),
        ("c2s", client.close(1008, reason)),
        ("s2c", server.close(1008, reason)),
    ]
    offsets = {"c2s": 0, "s2c": 0}
    for ms, (direction, data) in enumerate(chunks):
        apply(
            model,
            transport.receive(Direction(direction), 10**18 + ms * 10**6, offsets[direction], data),
        )
        offsets[direction] += len(data)
    apply(model, transport.finish(10**18 + 10**9))
    model.finish(10**18 + 10**9)
    return model.drain()


def test_websocket_upgrade_and_close_reasons_are_masked() -> None:
    target = "/ws?login=guest&passcode=url-pw-1&access_token=url-tok-2#token=frag-tok-3"
    rows = _websocket_session(target, "passcode:reason-pw-4 password=reason-pw-5")
    (session,) = rows["sessions"]
    assert session["ws_path"] == "/ws?login=guest&passcode=***&access_token=***#token=***"
    assert session["ws_close_reason"] == "passcode:*** password=***"
    reasons = [row["close_reason"] for row in rows["websocket_controls"]]
    assert reasons == ["passcode:*** password=***"] * 2
    assert "-pw-" not in repr(rows) and "-tok-" not in repr(rows)
