"""Every example frame in the STOMP texts under /work/shared/spec decodes as the text says.

The frames are transcribed from the texts (``^@`` is the NUL byte). Where the extracted text lost
the frame's line breaks (002, 004: one frame per line) or its blank lines (001: every empty line
dropped), the transcription restores them; each such case says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pipeline.stomp import Frame, HeartBeat
from tests.pipeline.stomp.stomp_streams import decode, frames, kinds, only_frame

SPEC_11 = "000_6de856fdaed5d0a1.txt"
SPEC_12 = "001_b76689a718c75634.txt"
FUSE_10 = "002_41f8a3a06a984f5e.txt"
EARLY = "003_1e920df596cd4f8b.txt"
CODEHAUS_10 = "004_d42b9e16bbf40b3a.txt"

ERROR_BODY = (
    b"The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\n\n"
    b"Hello queue a!\n-----\nDid not contain a destination header, which is required \n"
    b"for message propagation.\n"
)
# 001's copy of the 1.2 example: one blank line inside, "REQUIRED " with its trailing space
# (lost in extraction; 000 shows the same sentence with it), 171 bytes as its header says.
ERROR_BODY_12 = (
    b"The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\n"
    b"Hello queue a!\n-----\nDid not contain a destination header, which is REQUIRED \n"
    b"for message propagation.\n"
)
OLD_ERROR_BODY = (
    b"The message:\n-----\nMESSAGE\ndestined:/queue/a\n\nHello queue a!\n-----\n"
    b"Did not contain a destination header, which is required\nfor message propagation.\n"
)


@dataclass(frozen=True)
class Example:
    source: str  # spec file and section
    version: str
    wire: bytes
    command: str
    headers: list[tuple[str, str]]
    body: bytes = b""
    kinds: list[str] = field(default_factory=list)
    lenient: bool = False


EXAMPLES = [
    # 000: STOMP 1.1
    Example(f"{SPEC_11} Repeated Header Entries", "1.1",
            b"MESSAGE\nfoo:World\nfoo:Hello\n\n\x00",
            "MESSAGE", [("foo", "World"), ("foo", "Hello")]),
    Example(f"{SPEC_11} Connecting (CONNECT)", "1.0",
            b"CONNECT\naccept-version:1.1\nhost:stomp.github.org\n\n\x00",
            "CONNECT", [("accept-version", "1.1"), ("host", "stomp.github.org")]),
    Example(f"{SPEC_11} Connecting (CONNECTED)", "1.1",
            b"CONNECTED\nversion:1.1\n\n\x00", "CONNECTED", [("version", "1.1")]),
    Example(f"{SPEC_11} Protocol Negotiation (CONNECT)", "1.0",
            b"CONNECT\naccept-version:1.0,1.1,2.0\nhost:stomp.github.org\n\n\x00",
            "CONNECT", [("accept-version", "1.0,1.1,2.0"), ("host", "stomp.github.org")]),
    Example(f"{SPEC_11} Protocol Negotiation (ERROR)", "1.1",
            b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\n"
            b"Supported protocol versions are 1.2 2.1\x00",
            "ERROR", [("version", "1.2,2.1"), ("content-type", "text/plain")],
            b"Supported protocol versions are 1.2 2.1"),
    Example(f"{SPEC_11} SEND", "1.1",
            b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\x00",
            "SEND", [("destination", "/queue/a"), ("content-type", "text/plain")],
            b"hello queue a\n"),
    Example(f"{SPEC_11} SUBSCRIBE", "1.1",
            b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\x00",
            "SUBSCRIBE", [("id", "0"), ("destination", "/queue/foo"), ("ack", "client")]),
    Example(f"{SPEC_11} UNSUBSCRIBE", "1.1", b"UNSUBSCRIBE\nid:0\n\n\x00",
            "UNSUBSCRIBE", [("id", "0")]),
    Example(f"{SPEC_11} ACK", "1.1",
            b"ACK\nsubscription:0\nmessage-id:007\ntransaction:tx1\n\n\x00",
            "ACK", [("subscription", "0"), ("message-id", "007"), ("transaction", "tx1")]),
    Example(f"{SPEC_11} BEGIN", "1.1", b"BEGIN\ntransaction:tx1\n\n\x00",
            "BEGIN", [("transaction", "tx1")]),
    Example(f"{SPEC_11} COMMIT", "1.1", b"COMMIT\ntransaction:tx1\n\n\x00",
            "COMMIT", [("transaction", "tx1")]),
    Example(f"{SPEC_11} ABORT", "1.1", b"ABORT\ntransaction:tx1\n\n\x00",
            "ABORT", [("transaction", "tx1")]),
    # The DISCONNECT/RECEIPT examples have no blank line before ^@ (the BNF requires one).
    Example(f"{SPEC_11} DISCONNECT", "1.1", b"DISCONNECT\nreceipt:77\n\x00",
            "DISCONNECT", [("receipt", "77")], kinds=["missing_blank_line"]),
    Example(f"{SPEC_11} DISCONNECT (RECEIPT)", "1.1", b"RECEIPT\nreceipt-id:77\n\x00",
            "RECEIPT", [("receipt-id", "77")], kinds=["missing_blank_line"]),
    Example(f"{SPEC_11} Header receipt", "1.1",
            b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nhello queue a\x00",
            "SEND", [("destination", "/queue/a"), ("receipt", "message-12345")],
            b"hello queue a"),
    Example(f"{SPEC_11} MESSAGE", "1.1",
            b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\n"
            b"content-type:text/plain\n\nhello queue a\x00",
            "MESSAGE", [("subscription", "0"), ("message-id", "007"),
                        ("destination", "/queue/a"), ("content-type", "text/plain")],
            b"hello queue a"),
    Example(f"{SPEC_11} RECEIPT", "1.1", b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
            "RECEIPT", [("receipt-id", "message-12345")]),
    # 1.1 never trims: the space after "message:" belongs to the value.
    Example(f"{SPEC_11} ERROR", "1.1",
            b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\n"
            b"message: malformed frame received\n\n" + ERROR_BODY + b"\x00",
            "ERROR", [("receipt-id", "message-12345"), ("content-type", "text/plain"),
                      ("message", " malformed frame received")], ERROR_BODY),
    # 001: STOMP 1.2 (blank lines restored)
    Example(f"{SPEC_12} 3.2.3 Header receipt", "1.2",
            b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nhello queue a\x00",
            "SEND", [("destination", "/queue/a"), ("receipt", "message-12345")],
            b"hello queue a"),
    Example(f"{SPEC_12} 4 CONNECT", "1.0",
            b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\x00",
            "CONNECT", [("accept-version", "1.2"), ("host", "stomp.github.org")]),
    Example(f"{SPEC_12} 4 CONNECTED", "1.2", b"CONNECTED\nversion:1.2\n\n\x00",
            "CONNECTED", [("version", "1.2")]),
    Example(f"{SPEC_12} 4.3 Protocol Negotiation (CONNECTED)", "1.1",
            b"CONNECTED\nversion:1.1\n\n\x00", "CONNECTED", [("version", "1.1")]),
    Example(f"{SPEC_12} 4.3 Protocol Negotiation (ERROR)", "1.2",
            b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\n"
            b"Supported protocol versions are 1.2 2.1\x00",
            "ERROR", [("version", "1.2,2.1"), ("content-type", "text/plain")],
            b"Supported protocol versions are 1.2 2.1"),
    Example(f"{SPEC_12} 5.1 SEND", "1.2",
            b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\x00",
            "SEND", [("destination", "/queue/a"), ("content-type", "text/plain")],
            b"hello queue a\n"),
    Example(f"{SPEC_12} 5.2 SUBSCRIBE", "1.2",
            b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\x00",
            "SUBSCRIBE", [("id", "0"), ("destination", "/queue/foo"), ("ack", "client")]),
    Example(f"{SPEC_12} 5.4 ACK", "1.2", b"ACK\nid:12345\ntransaction:tx1\n\n\x00",
            "ACK", [("id", "12345"), ("transaction", "tx1")]),
    Example(f"{SPEC_12} 5.9 DISCONNECT", "1.2", b"DISCONNECT\nreceipt:77\n\n\x00",
            "DISCONNECT", [("receipt", "77")]),
    Example(f"{SPEC_12} 6.1 MESSAGE", "1.2",
            b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\n"
            b"content-type:text/plain\n\nhello queue a\x00",
            "MESSAGE", [("subscription", "0"), ("message-id", "007"),
                        ("destination", "/queue/a"), ("content-type", "text/plain")],
            b"hello queue a"),
    Example(f"{SPEC_12} 6.2 RECEIPT", "1.2", b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
            "RECEIPT", [("receipt-id", "message-12345")]),
    Example(f"{SPEC_12} 6.3 ERROR", "1.2",
            b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:171\n"
            b"message: malformed frame received\n\n" + ERROR_BODY_12 + b"\x00",
            "ERROR", [("receipt-id", "message-12345"), ("content-type", "text/plain"),
                      ("content-length", "171"), ("message", " malformed frame received")],
            ERROR_BODY_12),
    # 002: STOMP 1.0 at Fuse/ActiveMQ (line breaks restored). Strict 1.0 keeps values exactly
    # as sent, padding included; lenient decoding (below) strips it.
    Example(f"{FUSE_10} receipt", "1.0",
            b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nHello a!\x00",
            "SEND", [("destination", "/queue/a"), ("receipt", "message-12345")], b"Hello a!"),
    Example(f"{FUSE_10} CONNECT", "1.0",
            b"CONNECT\nlogin: <username>\npasscode:<passcode>\n\n\x00",
            "CONNECT", [("login", " <username>"), ("passcode", "<passcode>")]),
    Example(f"{FUSE_10} CONNECTED", "1.0", b"CONNECTED\nsession: <session-id>\n\n\x00",
            "CONNECTED", [("session", " <session-id>")]),
    Example(f"{FUSE_10} SEND", "1.0", b"SEND\ndestination:/queue/a\n\nhello queue a\n\x00",
            "SEND", [("destination", "/queue/a")], b"hello queue a\n"),
    Example(f"{FUSE_10} SUBSCRIBE", "1.0",
            b"SUBSCRIBE\ndestination: /queue/foo\nack: client\n\n\x00",
            "SUBSCRIBE", [("destination", " /queue/foo"), ("ack", " client")]),
    Example(f"{FUSE_10} UNSUBSCRIBE", "1.0", b"UNSUBSCRIBE\ndestination: /queue/a\n\n\x00",
            "UNSUBSCRIBE", [("destination", " /queue/a")]),
    Example(f"{FUSE_10} ACK", "1.0",
            b"ACK\nmessage-id: <message-identifier>\ntransaction: <transaction-identifier>\n\n\x00",
            "ACK", [("message-id", " <message-identifier>"),
                    ("transaction", " <transaction-identifier>")]),
    Example(f"{FUSE_10} BEGIN", "1.0", b"BEGIN\ntransaction: <transaction-identifier>\n\n\x00",
            "BEGIN", [("transaction", " <transaction-identifier>")]),
    Example(f"{FUSE_10} COMMIT", "1.0", b"COMMIT\ntransaction: <transaction-identifier>\n\n\x00",
            "COMMIT", [("transaction", " <transaction-identifier>")]),
    Example(f"{FUSE_10} ABORT", "1.0", b"ABORT\ntransaction: <transaction-identifier>\n\n\x00",
            "ABORT", [("transaction", " <transaction-identifier>")]),
    Example(f"{FUSE_10} MESSAGE", "1.0",
            b"MESSAGE\ndestination:/queue/a\nmessage-id: <message-identifier>\n\nhello queue a\x00",
            "MESSAGE", [("destination", "/queue/a"), ("message-id", " <message-identifier>")],
            b"hello queue a"),
    Example(f"{FUSE_10} RECEIPT", "1.0", b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
            "RECEIPT", [("receipt-id", "message-12345")]),
    Example(f"{FUSE_10} ERROR", "1.0",
            b"ERROR\nmessage: malformed packet received\n\n" + OLD_ERROR_BODY + b"\x00",
            "ERROR", [("message", " malformed packet received")], OLD_ERROR_BODY),
    # 003: the early protocol text, decoded leniently as it prescribes.
    Example(f"{EARLY} Frames (with a content length)", "1.0",
            b"MESSAGE\ndestination: /queue/a\nmessage-id: 1234\ncontent-length: 13\n\n"
            b"hello, world!\x00",
            "MESSAGE", [("destination", "/queue/a"), ("message-id", "1234"),
                        ("content-length", "13")], b"hello, world!",
            ["leading_space_in_value"], lenient=True),
    Example(f"{EARLY} Frames (without a content length)", "1.0",
            b"MESSAGE\ndestination: /queue/a\nmessage-id: 1234\n\nhello, world!\x00",
            "MESSAGE", [("destination", "/queue/a"), ("message-id", "1234")],
            b"hello, world!", ["leading_space_in_value"], lenient=True),
    Example(f"{EARLY} Command Overview (CONNECT)", "1.0",
            b"CONNECT\nusername: fred\npasscode: xyzzy\n\n\x00",
            "CONNECT", [("username", "fred"), ("passcode", "xyzzy")],
            kinds=["leading_space_in_value"], lenient=True),
    Example(f"{EARLY} Receipts (SEND)", "1.0",
            b"SEND\ndestination: /queue/a\nreceipt: foo9876\ncontent-length: 13\n\n"
            b"hello, world!\x00",
            "SEND", [("destination", "/queue/a"), ("receipt", "foo9876"),
                     ("content-length", "13")], b"hello, world!",
            ["leading_space_in_value"], lenient=True),
    Example(f"{EARLY} Receipts (RECEIPT)", "1.0", b"RECEIPT\nreceipt-id: foo9876\n\n\x00",
            "RECEIPT", [("receipt-id", "foo9876")], kinds=["leading_space_in_value"],
            lenient=True),
    Example(f"{EARLY} Sending messages to destinations", "1.0",
            b"SEND\ndestination: /queue/a\ncontent-length: 13\n\nhello, world!\x00",
            "SEND", [("destination", "/queue/a"), ("content-length", "13")], b"hello, world!",
            ["leading_space_in_value"], lenient=True),
    # 004: STOMP 1.0 at Codehaus (line breaks restored), decoded leniently: padding stripped.
    Example(f"{CODEHAUS_10} CONNECT", "1.0",
            b"CONNECT\nlogin: <username>\npasscode:<passcode>\n\n\x00",
            "CONNECT", [("login", "<username>"), ("passcode", "<passcode>")],
            kinds=["leading_space_in_value"], lenient=True),
    Example(f"{CODEHAUS_10} CONNECTED", "1.0", b"CONNECTED\nsession: <session-id>\n\n\x00",
            "CONNECTED", [("session", "<session-id>")], kinds=["leading_space_in_value"],
            lenient=True),
    Example(f"{CODEHAUS_10} SEND", "1.0", b"SEND\ndestination:/queue/a\n\nhello queue a\n\x00",
            "SEND", [("destination", "/queue/a")], b"hello queue a\n", lenient=True),
    Example(f"{CODEHAUS_10} SUBSCRIBE", "1.0",
            b"SUBSCRIBE\ndestination: /queue/foo\nack: client\n\n\x00",
            "SUBSCRIBE", [("destination", "/queue/foo"), ("ack", "client")],
            kinds=["leading_space_in_value"], lenient=True),
    Example(f"{CODEHAUS_10} UNSUBSCRIBE", "1.0", b"UNSUBSCRIBE\ndestination: /queue/a\n\n\x00",
            "UNSUBSCRIBE", [("destination", "/queue/a")], kinds=["leading_space_in_value"],
            lenient=True),
    Example(f"{CODEHAUS_10} BEGIN", "1.0", b"BEGIN\ntransaction: <transaction-identifier>\n\n\x00",
            "BEGIN", [("transaction", "<transaction-identifier>")],
            kinds=["leading_space_in_value"], lenient=True),
    Example(f"{CODEHAUS_10} COMMIT", "1.0",
            b"COMMIT\ntransaction: <transaction-identifier>\n\n\x00",
            "COMMIT", [("transaction", "<transaction-identifier>")],
            kinds=["leading_space_in_value"], lenient=True),
    Example(f"{CODEHAUS_10} ACK", "1.0",
            b"ACK\nmessage-id: <message-identifier>\ntransaction: <transaction-identifier>\n\n\x00",
            "ACK", [("message-id", "<message-identifier>"),
                    ("transaction", "<transaction-identifier>")],
            kinds=["leading_space_in_value"], lenient=True),
    Example(f"{CODEHAUS_10} Receipt", "1.0",
            b"SEND\ndestination:/queue/a\nreceipt:message-12345\n\nHello a!\x00",
            "SEND", [("destination", "/queue/a"), ("receipt", "message-12345")], b"Hello a!",
            lenient=True),
    Example(f"{CODEHAUS_10} MESSAGE", "1.0",
            b"MESSAGE\ndestination:/queue/a\nmessage-id: <message-identifier>\n\nhello queue a\x00",
            "MESSAGE", [("destination", "/queue/a"), ("message-id", "<message-identifier>")],
            b"hello queue a", ["leading_space_in_value"], lenient=True),
    Example(f"{CODEHAUS_10} RECEIPT", "1.0", b"RECEIPT\nreceipt-id:message-12345\n\n\x00",
            "RECEIPT", [("receipt-id", "message-12345")], lenient=True),
    Example(f"{CODEHAUS_10} ERROR", "1.0",
            b"ERROR\nmessage: malformed packet received\n\n" + OLD_ERROR_BODY + b"\x00",
            "ERROR", [("message", "malformed packet received")], OLD_ERROR_BODY,
            ["leading_space_in_value"], lenient=True),
]


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.source for example in EXAMPLES])
def test_spec_example_decodes_as_the_text_says(example: Example) -> None:
    frame = only_frame(example.wire, example.version, lenient=example.lenient)
    assert frame.command == example.command
    assert frame.header_list == example.headers
    assert frame.body == example.body
    assert [violation.kind for violation in frame.violations] == example.kinds
    assert (frame.start, frame.end) == (0, len(example.wire))


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.source for example in EXAMPLES])
def test_spec_example_decodes_the_same_byte_by_byte(example: Example) -> None:
    whole = decode(example.wire, example.version, lenient=example.lenient)
    bytewise = decode(
        example.wire, example.version, lenient=example.lenient, chunks=[1] * len(example.wire)
    )
    assert bytewise == whole


def test_spec_11_repeated_header_first_value_wins() -> None:
    # 000 "Repeated Header Entries": "The value of the foo header is just World."
    frame = only_frame(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\x00", "1.1")
    assert frame.headers["foo"] == "World"
    assert frame.get("foo") == "World"


def test_spec_11_connect_example_with_its_whitespace_blank_line() -> None:
    # 000 "Connecting" prints the blank line as a line of spaces. Read literally, that line is a
    # header line without a colon and the NUL comes before any blank line: both are reported
    # and the frame's real headers still come through.
    wire = b"CONNECT\naccept-version:1.1\nhost:stomp.github.org\n          \n\x00"
    frame = only_frame(wire, "1.0")
    assert frame.header_list == [("accept-version", "1.1"), ("host", "stomp.github.org")]
    assert [violation.kind for violation in frame.violations] == [
        "header_without_colon",
        "missing_blank_line",
    ]


def test_spec_11_heart_beat_is_a_single_newline_between_frames() -> None:
    # 000 "Heart-beating": "it MUST send a single newline byte (0x0A)".
    wire = b"SEND\ndestination:/queue/a\n\nhi\x00" + b"\n" + b"\n"
    events = decode(wire, "1.1")
    assert events[1:] == [HeartBeat(offset=30), HeartBeat(offset=31)]
    assert isinstance(events[0], Frame) and events[0].end == 30


def test_spec_11_content_length_body_may_hold_nul() -> None:
    # 000 "Header content-length": read that many bytes "regardless of whether or not there are
    # null characters in the body"; without it "the first null byte" ends the frame.
    with_length = only_frame(b"SEND\ndestination:/q\ncontent-length:5\n\na\x00b\x00c\x00", "1.1")
    assert with_length.body == b"a\x00b\x00c"
    assert with_length.content_length == 5
    events = decode(b"SEND\ndestination:/q\n\na\x00b\x00", "1.1")
    assert frames(events)[0].body == b"a"
    assert "unknown_command" in kinds(events)  # "b" then NUL is no frame


def test_spec_12_connect_headers_are_not_unescaped() -> None:
    # 001 section 3: all frames except CONNECT and CONNECTED escape headers.
    connect = only_frame(b"CONNECT\nlogin:a\\cb\nhost:h\n\n\x00", "1.2")
    assert connect.get("login") == "a\\cb"
    send = only_frame(b"SEND\ndestination:a\\cb\\r\\n\\\\\n\n\x00", "1.2")
    assert send.get("destination") == "a:b\r\n\\"


def test_spec_12_eol_may_be_crlf() -> None:
    # 001 section 3: an EOL is an optional CR followed by LF.
    frame = only_frame(b"SEND\r\ndestination:/queue/a\r\nreceipt:r1\r\n\r\nhello\x00", "1.2")
    assert frame.command == "SEND"
    assert frame.header_list == [("destination", "/queue/a"), ("receipt", "r1")]
    assert frame.body == b"hello"
    assert frame.violations == ()


def test_early_text_rules_in_lenient_mode() -> None:
    # 003 "Frames": leading empty lines, trailing spaces and CR stripped, case-insensitive
    # command and header names, leading space in values stripped.
    wire = b"\n\r\nsend  \r\nDestination: /queue/a \r\nContent-Length: 5\r\n\r\nhello\x00"
    events = decode(wire, "1.0", lenient=True)
    assert events[:2] == [HeartBeat(0), HeartBeat(1, 2)]
    frame = frames(events)[0]
    assert frame.command == "SEND"
    assert frame.header_list == [("destination", "/queue/a"), ("content-length", "5")]
    assert frame.body == b"hello"
    assert sorted(set(kinds(events))) == [
        "leading_space_in_value",
        "lowercase_command",
        "trailing_whitespace",
        "uppercase_header_name",
    ]
