from __future__ import annotations

import pytest

from pipeline.websocket.handshake import (
    Deflate,
    deflate_parameters,
    head_end,
    opening,
    parse_head,
    status_of,
)
from tests.support.websocket_wire import request, response


@pytest.mark.parametrize("cut", [1, 3, 4, 20, 100])
def test_opening_needs_the_whole_head_to_decide(cut: int) -> None:
    head = request()
    assert opening(head[:cut]) is None
    assert opening(head) is True
    assert opening(head + b"\x81\x85") is True


def test_opening_says_no_at_once_to_stomp_and_to_other_http() -> None:
    assert opening(b"CONNECT\n") is False
    assert opening(b"\n") is False
    assert opening(b"GE") is None
    assert opening(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is False  # HTTP, not an upgrade
    assert opening(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 11000) is False


def test_upgrade_token_is_case_insensitive_and_may_be_in_a_list() -> None:
    assert opening(b"GET /stomp HTTP/1.1\r\nupgrade: h2c, WebSocket\r\n\r\n") is True
    assert opening(b"GET /stomp HTTP/1.1\nUpgrade: websocket\n\n") is True  # bare LF


def test_parse_head_keeps_repeated_headers() -> None:
    raw = request("Sec-WebSocket-Protocol: v13.stomp\r\n")
    head = parse_head(raw[: head_end(raw)])
    assert head is not None and head.start[:2] == ("GET", "/ws")
    assert head.get("sec-websocket-protocol") == "v10.stomp, v11.stomp, v12.stomp, v13.stomp"
    assert head.get("origin") == "http://localhost:8000"
    resp = response("403 Forbidden", None)
    parsed = parse_head(resp)
    assert parsed is not None and status_of(parsed) == 403


def test_deflate_parameters() -> None:
    assert deflate_parameters([]) is None
    assert deflate_parameters(["x-webkit-deflate-frame"]) is None
    assert deflate_parameters(["permessage-deflate"]) == Deflate()
    value = "permessage-deflate; client_no_context_takeover; server_max_window_bits=10"
    assert deflate_parameters([value]) == Deflate(True, False, 15, 10)
    assert deflate_parameters(['permessage-deflate; client_max_window_bits="9"']) == Deflate(
        client_max_window_bits=9
    )
