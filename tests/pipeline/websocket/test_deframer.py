from __future__ import annotations

import zlib

import pytest

from pipeline.net import Direction
from pipeline.websocket import deflate as deflate_module
from pipeline.websocket import violations as v
from pipeline.websocket.deframer import Deframer, unmask, valid_close_code
from pipeline.websocket.events import Control, StompData, StompGap, Violation
from pipeline.websocket.handshake import Deflate
from tests.support.websocket_wire import Side, client_raw, deflate_extension, raw_frame

STOMP = b"SEND\ndestination:/queue/a\ncontent-length:5\n\nhello\x00\n"


def _run(
    wire: bytes, *, from_client: bool = True, deflate: Deflate | None = None, step: int = 0
) -> list:
    deframer = Deframer(
        Direction.of(from_client), from_client=from_client, deflate=deflate, tcp_offset=100
    )
    events = []
    pieces = [wire[i : i + step] for i in range(0, len(wire), step)] if step else [wire]
    for n, piece in enumerate(pieces):
        events += deframer.feed(piece, n)
    events += deframer.feed_eof(len(pieces))
    return events


def _stomp(events: list) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, StompData))


def _kinds(events: list) -> list[str]:
    return [e.kind for e in events if isinstance(e, Violation)]


@pytest.mark.parametrize("step", [0, 1, 2, 3, 7, 100])
def test_text_and_binary_messages_make_the_stomp_stream_in_any_segmentation(step: int) -> None:
    client = Side(True)
    wire = client.text(STOMP[:10]) + client.binary(STOMP[10:]) + client.text("\n")
    events = _run(wire, step=step)
    assert _stomp(events) == STOMP + b"\n"
    assert _kinds(events) == []
    offsets = [e.stomp_offset for e in events if isinstance(e, StompData)]
    assert offsets == sorted(offsets) and offsets[0] == 0


def test_payload_lengths_7_16_and_64_bit() -> None:
    server = Side(False)
    bodies = [b"a" * 125, b"b" * 126, b"c" * 65535, b"d" * 65536, b"e" * 200_000]
    wire = b"".join(server.binary(body) for body in bodies)
    events = _run(wire, from_client=False, step=4096)
    assert _stomp(events) == b"".join(bodies)
    assert _kinds(events) == []
    # each StompData names the TCP offsets of the frames carrying its bytes
    data = [e for e in events if isinstance(e, StompData)]
    starts = sorted({e.tcp_offset for e in data} | {tcp for e in data for _, tcp in e.frames})
    expected, at = [], 100
    for body in bodies:
        expected.append(at)
        at += len(server.binary(body))
    assert starts == expected


def test_fragmented_message_with_control_frames_in_between() -> None:
    client = Side(True)
    wire = (
        client.text(STOMP[:5], fin=False)
        + client.ping(b"p1")
        + client.text(STOMP[5:20], fin=False)
        + client.pong(b"x")
        + client.text(STOMP[20:], fin=True)
    )
    events = _run(wire, step=3)
    assert _stomp(events) == STOMP
    controls = [e for e in events if isinstance(e, Control)]
    assert [(c.kind, c.payload) for c in controls] == [("ping", b"p1"), ("pong", b"x")]
    assert _kinds(events) == []
    assert not any(e.whole_message for e in events if isinstance(e, StompData))


def test_a_message_of_eols_only_comes_alone_and_marked_whole() -> None:
    server = Side(False)
    events = _run(server.text("\n") + server.text(STOMP), from_client=False)
    data = [e for e in events if isinstance(e, StompData)]
    assert [(e.data, e.whole_message) for e in data] == [(b"\n", True), (STOMP, False)]


def test_close_with_code_and_reason() -> None:
    events = _run(Side(False).close(1001, "going away"), from_client=False)
    (close,) = [e for e in events if isinstance(e, Control)]
    assert (close.kind, close.close_code, close.close_reason) == ("close", 1001, "going away")
    assert close.tcp_offset == 100


@pytest.mark.parametrize(
    ("payload", "detail"),
    [(b"\x03", "one byte"), (b"\x03\xed", "code 1005"), (b"\x03\xe8\xff", "not UTF-8")],
)
def test_invalid_close_frames(payload: bytes, detail: str) -> None:
    events = _run(raw_frame(0x8, payload), from_client=False)
    (violation,) = [e for e in events if isinstance(e, Violation)]
    assert violation.kind == v.INVALID_CLOSE and detail in violation.detail


def test_close_codes() -> None:
    assert all(valid_close_code(c) for c in (1000, 1001, 1003, 1007, 1011, 3000, 4999))
    assert not any(valid_close_code(c) for c in (0, 999, 1004, 1005, 1006, 1015, 2000, 5000))


def test_masking_rules_are_reported_and_payload_still_read() -> None:
    unmasked_client = raw_frame(0x1, STOMP)
    events = _run(unmasked_client, from_client=True)
    assert _kinds(events) == [v.UNMASKED_CLIENT_FRAME] and _stomp(events) == STOMP
    masked_server = client_raw(0x1, STOMP)
    events = _run(masked_server, from_client=False)
    assert _kinds(events) == [v.MASKED_SERVER_FRAME] and _stomp(events) == STOMP


def test_reserved_bits_opcodes_control_frame_rules_and_lengths() -> None:
    wire = (
        client_raw(0x1, b"A", rsv=0x40)  # RSV1 without permessage-deflate
        + client_raw(0x2, b"B", rsv=0x20)  # RSV2
        + client_raw(0x3, b"skipped")  # reserved opcode
        + client_raw(0x9, b"x" * 126)  # control frame over 125
        + client_raw(0xA, b"y", fin=False)  # fragmented control
        + client_raw(0x2, b"C", length_form=126)  # 16-bit length for 1 byte
        + client_raw(0x2, b"D" * 300, length_form=127)  # 64-bit length for 300 bytes
    )
    events = _run(wire, step=5)
    assert _kinds(events) == [
        v.RESERVED_BITS,
        v.RESERVED_BITS,
        v.BAD_OPCODE,
        v.BAD_CONTROL_FRAME,
        v.BAD_CONTROL_FRAME,
        v.NON_MINIMAL_LENGTH,
        v.NON_MINIMAL_LENGTH,
    ]
    assert _stomp(events) == b"ABC" + b"D" * 300
    assert [c.kind for c in events if isinstance(c, Control)] == ["ping", "pong"]


def test_top_bit_in_64_bit_length_stops_the_direction() -> None:
    wire = raw_frame(0x2, b"")[:1] + b"\x7f" + b"\x80" + b"\x00" * 7 + Side(False).binary(b"x")
    events = _run(wire, from_client=False)
    assert _kinds(events) == [v.BAD_LENGTH] and _stomp(events) == b""


def test_continuation_rules() -> None:
    wire = (
        client_raw(0x0, b"orphan")  # continuation with nothing open
        + client_raw(0x1, b"open-", fin=False)
        + client_raw(0x1, b"new")  # new message while one is open
    )
    events = _run(wire)
    assert _kinds(events) == [v.UNEXPECTED_CONTINUATION, v.EXPECTED_CONTINUATION]
    assert _stomp(events) == b"orphanopen-new"


def test_text_that_is_not_utf8_is_reported_once_and_still_decoded() -> None:
    wire = client_raw(0x1, b"MESSAGE\n\xff\xfe", fin=False) + client_raw(0x0, b"\xff\x00")
    events = _run(wire)
    assert _kinds(events) == [v.INVALID_UTF8]
    assert _stomp(events) == b"MESSAGE\n\xff\xfe\xff\x00"
    # a UTF-8 sequence split across fragments is fine
    euro = "€".encode()
    events = _run(client_raw(0x1, euro[:1], fin=False) + client_raw(0x0, euro[1:]))
    assert _kinds(events) == []


def test_data_after_close_is_not_decoded() -> None:
    client = Side(True)
    events = _run(client.close(1000) + client_raw(0x1, b"late"))
    assert _kinds(events) == [v.DATA_AFTER_CLOSE] and _stomp(events) == b""


@pytest.mark.parametrize("takeover", [True, False])
@pytest.mark.parametrize("step", [0, 1, 13])
def test_permessage_deflate_with_and_without_context_takeover(takeover: bool, step: int) -> None:
    header, client_ext, _ = deflate_extension(client_no_context_takeover=not takeover)
    client = Side(True, client_ext)
    messages = [STOMP, STOMP, b"\n", STOMP * 50]
    wire = b"".join(client.text(m) for m in messages)
    wire += client.text(STOMP[:7], fin=False) + client.ping(b"!") + client.text(STOMP[7:])
    deflate = Deflate(client_no_context_takeover=not takeover)
    events = _run(wire, deflate=deflate, step=step)
    assert _kinds(events) == []
    assert _stomp(events) == b"".join(messages) + STOMP
    assert len(wire) < len(STOMP) * 50  # it was compressed


def test_inflate_failure_is_reported_and_the_next_message_read_without_takeover() -> None:
    garbage = client_raw(0x1, b"\xff\xff\xff\xff", rsv=0x40)
    _, client_ext, _ = deflate_extension(client_no_context_takeover=True)
    good = Side(True, client_ext).text(STOMP)
    events = _run(garbage + good, deflate=Deflate(client_no_context_takeover=True))
    assert _kinds(events) == [v.INFLATE_FAILED] and _stomp(events) == STOMP
    # with context takeover the window is lost: each later compressed message is told as skipped
    events = _run(garbage + good, deflate=Deflate())
    assert _kinds(events) == [v.INFLATE_FAILED, v.INFLATE_SKIPPED] and _stomp(events) == b""


@pytest.mark.parametrize("step", [0, 1, 5])
def test_without_takeover_a_failed_message_cut_by_a_new_one_loses_only_itself(step: int) -> None:
    """A compressed message that fails to inflate and never gets its final frame (a new message
    starts inside it) ends there: without context takeover the next message is a fresh stream,
    inflated, in one piece or many (found by fuzz_websocket: the whole-message loop went on
    skipping every later message, the general path did not)."""
    _, client_ext, _ = deflate_extension(client_no_context_takeover=True)
    client = Side(True, client_ext)
    failed = client_raw(0x1, b"\xff\xff\xff\xff", rsv=0x40, fin=False)
    wire = failed + client.text(STOMP) + client.text(DISCONNECT)
    events = _run(wire, deflate=Deflate(client_no_context_takeover=True), step=step)
    assert _kinds(events) == [v.INFLATE_FAILED, v.EXPECTED_CONTINUATION]
    assert _stomp(events) == STOMP + DISCONNECT


DISCONNECT = b"DISCONNECT\nreceipt:7\n\n\x00"


def _bomb() -> bytes:
    """A compressed text frame that inflates far beyond the (test's) message bound."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = compressor.compress(b"A" * (4 << 20)) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return client_raw(0x1, data[:-4], rsv=0x40)


@pytest.fixture
def small_inflate_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deflate_module, "MAX_MESSAGE", 1 << 20)


@pytest.mark.usefixtures("small_inflate_bound")
@pytest.mark.parametrize("step", [0, 1400])
@pytest.mark.parametrize("bad", ["bomb", "corrupt"])
def test_after_an_inflate_failure_uncompressed_messages_are_decoded(bad: str, step: int) -> None:
    """Context takeover on: the window is lost, but messages without RSV1 need none."""
    broken = _bomb() if bad == "bomb" else client_raw(0x1, b"\xff\xff\xff\xff", rsv=0x40)
    plain = client_raw(0x1, STOMP) + client_raw(0x1, DISCONNECT)
    events = _run(broken + plain, deflate=Deflate(), step=step)
    assert _kinds(events) == [v.INFLATE_FAILED]
    assert _stomp(events).endswith(STOMP + DISCONNECT)


@pytest.mark.usefixtures("small_inflate_bound")
@pytest.mark.parametrize("step", [0, 1400])
def test_after_a_bomb_without_context_takeover_the_next_messages_are_inflated(step: int) -> None:
    _, client_ext, _ = deflate_extension(client_no_context_takeover=True)
    client = Side(True, client_ext)
    wire = _bomb() + client.text(STOMP) + client.text(DISCONNECT)
    events = _run(wire, deflate=Deflate(client_no_context_takeover=True), step=step)
    assert _kinds(events) == [v.INFLATE_FAILED]
    assert _stomp(events).endswith(STOMP + DISCONNECT)


@pytest.mark.usefixtures("small_inflate_bound")
@pytest.mark.parametrize("step", [0, 1400])
def test_after_a_bomb_with_context_takeover_each_skipped_message_is_an_anomaly(step: int) -> None:
    _, client_ext, _ = deflate_extension()
    client = Side(True, client_ext)
    later = [client.text(STOMP), client.text(STOMP[:9], fin=False), client.text(STOMP[9:])]
    later.append(client.text(DISCONNECT))
    bomb = _bomb()
    events = _run(bomb + b"".join(later), deflate=Deflate(), step=step)
    assert _kinds(events) == [v.INFLATE_FAILED] + [v.INFLATE_SKIPPED] * 3
    skipped = [e for e in events if isinstance(e, Violation) and e.kind == v.INFLATE_SKIPPED]
    starts = [100 + len(bomb), 100 + len(bomb) + len(later[0])]
    starts.append(starts[-1] + len(later[1]) + len(later[2]))
    assert [e.tcp_offset for e in skipped] == starts
    assert [e.detail.split(" since")[0] for e in skipped] == [
        f"compressed message {n}" for n in (1, 2, 3)
    ]
    assert all("at TCP offset 100:" in e.detail for e in skipped)


def test_gap_inside_an_uncompressed_payload_is_passed_on_and_framing_continues() -> None:
    server = Side(False)
    first, second = server.binary(b"x" * 1000), server.binary(STOMP)
    deframer = Deframer(Direction.S2C, from_client=False, deflate=None, tcp_offset=0)
    events = deframer.feed(first[:100], 1)
    events += deframer.feed_gap(500, 2)
    events += deframer.feed(first[600:] + second, 3)
    gaps = [e for e in events if isinstance(e, StompGap)]
    assert [(g.stomp_offset, g.size) for g in gaps] == [(96, 500)]  # 4-byte header
    assert _stomp(events).endswith(STOMP)
    # a gap across a header loses the boundaries: the direction stops
    deframer = Deframer(Direction.S2C, from_client=False, deflate=None, tcp_offset=0)
    events = deframer.feed(first, 1) + deframer.feed_gap(3, 2) + deframer.feed(second[3:], 3)
    assert _kinds(events) == [v.GAP] and not _stomp(events[1:])


def test_truncated_frame_at_eof() -> None:
    events = _run(Side(False).binary(STOMP)[:-3], from_client=False)
    assert _kinds(events) == [v.TRUNCATED_FRAME]


def test_unmask_any_phase() -> None:
    key = b"\x01\x02\x03\x04"
    data = bytes(range(37))
    whole = unmask(data, key, 0)
    assert unmask(whole, key, 0) == data
    assert whole[5:] == unmask(data[5:], key, 5 & 3)


@pytest.mark.parametrize("takeover", [True, False])
def test_a_pickled_deframer_goes_on_and_says_when_the_window_was_lost(takeover: bool) -> None:
    import pickle

    _, client_ext, _ = deflate_extension(client_no_context_takeover=not takeover)
    client = Side(True, client_ext)
    first, second = client.text(STOMP), client.text(STOMP)
    deflate = Deflate(client_no_context_takeover=not takeover)
    deframer = Deframer(Direction.C2S, from_client=True, deflate=deflate, tcp_offset=0)
    events = deframer.feed(first + second[:3], 1)
    deframer = pickle.loads(pickle.dumps(deframer))
    events += deframer.feed(second[3:], 2)
    if takeover:
        assert _kinds(events) == [v.INFLATE_FAILED] and _stomp(events) == STOMP
    else:
        assert _kinds(events) == [] and _stomp(events) == STOMP * 2


class _GeneralPathOnly(Deframer):
    """The de-framer without its whole-message loop: every frame through the general path."""

    __slots__ = ()

    def _whole_messages(self, data: bytes, position: int, size: int) -> int:
        return position


def _events_of(deframer_type: type[Deframer], data: bytes) -> list:
    from fuzz.fuzz_websocket import Options, pieces

    options = Options(data)
    deframer = deframer_type(
        options.direction, from_client=options.from_client, deflate=options.deflate, tcp_offset=9
    )
    events: list = []
    for n, (chunk, gap) in enumerate(pieces(data[2:], options)):
        events += deframer.feed(chunk, n)
        if gap:
            events += deframer.feed_gap(gap, n)
    return events + deframer.feed_eof(-1)


def test_the_whole_message_loop_gives_the_general_paths_events() -> None:
    """Same events, field for field (times, offsets, frames lists, violations), for the fuzz
    target's inputs: real captures' streams damaged, structured frames of every kind, any bytes;
    client and server side, with and without permessage-deflate, any chunking, gaps."""
    from hypothesis import HealthCheck, given, settings

    from fuzz.fuzz_websocket import strategy

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=strategy())
    def check(data: bytes) -> None:
        assert _events_of(Deframer, data) == _events_of(_GeneralPathOnly, data)

    check()


@pytest.mark.parametrize("deflate", [None, Deflate(False, False), Deflate(True, True)])
@pytest.mark.parametrize("step", [0, 1, 5, 64, 1460])
def test_many_messages_in_any_segmentation_match_the_general_path(
    deflate: Deflate | None, step: int
) -> None:
    extension = None
    if deflate is not None:
        _, extension, _ = deflate_extension(
            client_no_context_takeover=deflate.client_no_context_takeover,
            server_no_context_takeover=deflate.server_no_context_takeover,
        )
    client = Side(True, extension)
    wire = b"".join(client.text(STOMP.decode() * (n % 5) + "\n" * (n % 3 == 0)) for n in range(60))
    wire += client.binary(b"x" * 70_000) + client.text("\u00e9t\u00e9\x00\n")
    runs = []
    for deframer_type in (Deframer, _GeneralPathOnly):
        deframer = deframer_type(Direction.C2S, from_client=True, deflate=deflate, tcp_offset=3)
        pieces = [wire[i : i + step] for i in range(0, len(wire), step)] if step else [wire]
        events = []
        for n, piece in enumerate(pieces):
            events += deframer.feed(piece, n)
        runs.append(events + deframer.feed_eof(len(pieces)))
    assert runs[0] == runs[1]
    assert _stomp(runs[0]).count(b"\x00") == sum(n % 5 for n in range(60)) + 1
    assert not _kinds(runs[0])
