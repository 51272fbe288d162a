"""pipeline/tls/handshake.py: handshake messages cut out of handshake fragments, and the hellos
read: RFC 8448's own ClientHello, ServerHello and EncryptedExtensions, the hellos of real
captures, hand-built ones per RFC 8446 4.1-4.2, and damaged ones, which give `BadHandshake`
and nothing else."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import pytest

from pipeline.net import Direction
from pipeline.reassembly import Data, Segment
from pipeline.tls.handshake import (
    CLIENT_HELLO,
    ENCRYPTED_EXTENSIONS,
    HELLO_RETRY_RANDOM,
    KEY_UPDATE,
    MAX_KEPT_BODY,
    SERVER_HELLO,
    TLS12,
    TLS13,
    BadHandshake,
    ClientHello,
    HandshakeFramer,
    Message,
    ServerHello,
    parse_client_hello,
    parse_encrypted_extensions,
    parse_server_hello,
    version_name,
)
from pipeline.tls.records import RecordReader
from tests.support.local_reassembly import LocalReassembly
from tests.support.paths import DATA

# RFC 8448 3 (Simple 1-RTT Handshake): the ClientHello (196 octets) and ServerHello (90 octets)
# handshake messages, and the EncryptedExtensions the server's first protected record carries
RFC8448_CLIENT_HELLO = bytes.fromhex(
    "010000c00303cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7000006130113"
    "031302010000910000000b0009000006736572766572ff01000100000a00140012001d001700180019010001"
    "0101020103010400230000003300260024001d002099381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae"
    "4d5413691e529aaf2c002b0003020304000d0020001e040305030603020308040805080604010501060102010"
    "402050206020202002d00020101001c00024001"
)
RFC8448_SERVER_HELLO = bytes.fromhex(
    "020000560303a6af06a4121860dc5e6e60249cd34c95930c8ac5cb1434dac155772ed3e2692800130100002e"
    "00330024001d0020c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f002b0002"
    "0304"
)
RFC8448_ENCRYPTED_EXTENSIONS = bytes.fromhex(
    "080000240022000a00140012001d00170018001901000101010201030104001c0002400100000000"
)
# RFC 8448 3: "{server} derive secret "tls13 s hs traffic"", hash of ClientHello + ServerHello
RFC8448_HELLO_HASH = "860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8"

TLS_CAPTURES = DATA / "tls"


def vector(data: bytes, length_bytes: int) -> bytes:
    return len(data).to_bytes(length_bytes, "big") + data


def extension(kind: int, data: bytes) -> bytes:
    return kind.to_bytes(2, "big") + vector(data, 2)


def server_name(*entries: tuple[int, bytes]) -> bytes:
    """RFC 6066 3: a ServerNameList of (NameType, name)."""
    return extension(
        0, vector(b"".join(bytes([kind]) + vector(name, 2) for kind, name in entries), 2)
    )


def alpn(*protocols: bytes) -> bytes:
    """RFC 7301 3.1: a ProtocolNameList."""
    return extension(16, vector(b"".join(vector(name, 1) for name in protocols), 2))


def client_versions(*versions: int) -> bytes:
    return extension(43, vector(b"".join(v.to_bytes(2, "big") for v in versions), 1))


def client_hello(
    extensions: bytes | None,
    *,
    suites: tuple[int, ...] = (0x1301, 0xC02F),
    session_id: bytes = b"",
    random_bytes: bytes = bytes(range(32)),
) -> bytes:
    """A ClientHello's body (RFC 8446 4.1.2); ``extensions`` None: none at all, as before TLS
    1.2 a client could send."""
    body = b"\x03\x03" + random_bytes + vector(session_id, 1)
    body += vector(b"".join(s.to_bytes(2, "big") for s in suites), 2) + b"\x01\x00"
    return body if extensions is None else body + vector(extensions, 2)


def server_hello(
    extensions: bytes | None, *, suite: int = 0xC02F, random_bytes: bytes = bytes(32)
) -> bytes:
    """A ServerHello's body (RFC 8446 4.1.3)."""
    body = b"\x03\x03" + random_bytes + vector(b"\x11" * 32, 1) + suite.to_bytes(2, "big") + b"\x00"
    return body if extensions is None else body + vector(extensions, 2)


def message(msg_type: int, body: bytes) -> bytes:
    return bytes([msg_type]) + len(body).to_bytes(3, "big") + body


# ---- RFC 8448 ----------------------------------------------------------------------------


def test_the_rfc_8448_hellos_are_the_rfcs_bytes() -> None:
    """Their hash is the RFC's transcript hash: not a byte differs from its trace."""
    digest = hashlib.sha256(RFC8448_CLIENT_HELLO + RFC8448_SERVER_HELLO).hexdigest()
    assert digest == RFC8448_HELLO_HASH


def test_the_rfc_8448_client_hello() -> None:
    [hello] = HandshakeFramer().feed(RFC8448_CLIENT_HELLO)
    assert hello == Message(CLIENT_HELLO, RFC8448_CLIENT_HELLO[4:])
    assert parse_client_hello(RFC8448_CLIENT_HELLO[4:]) == ClientHello(
        random=RFC8448_CLIENT_HELLO[6:38],
        cipher_suites=(0x1301, 0x1303, 0x1302),
        server_name="server",
        alpn=(),
        versions=(TLS13,),  # supported_versions', not legacy_version's 0x0303
    )


def test_the_rfc_8448_server_hello() -> None:
    [hello] = HandshakeFramer().feed(RFC8448_SERVER_HELLO)
    parsed = parse_server_hello(hello.body or b"")
    assert parsed == ServerHello(
        random=bytes.fromhex("a6af06a4121860dc5e6e60249cd34c95930c8ac5cb1434dac155772ed3e26928"),
        cipher_suite=0x1301,
        version=TLS13,
        alpn=None,
        encrypt_then_mac=False,
    )
    assert not parsed.retry


def test_the_rfc_8448_encrypted_extensions_name_no_protocol() -> None:
    [extensions] = HandshakeFramer().feed(RFC8448_ENCRYPTED_EXTENSIONS)
    assert extensions.msg_type == ENCRYPTED_EXTENSIONS and extensions.body is not None
    assert parse_encrypted_extensions(extensions.body) is None


# ---- hand-built hellos -------------------------------------------------------------------


def test_a_client_hello_without_extensions_offers_its_legacy_version() -> None:
    hello = parse_client_hello(client_hello(None, suites=(0x002F, 0x0035)))
    assert hello == ClientHello(bytes(range(32)), (0x002F, 0x0035), None, (), (TLS12,))


def test_a_client_hello_with_names_protocols_and_versions() -> None:
    extensions = server_name((0, b"broker.example"))
    extensions += extension(0xFF01, b"\x00")  # renegotiation_info, skipped
    extensions += alpn(b"v12.stomp", b"stomp")
    extensions += client_versions(0x3A3A, TLS13, TLS12)  # with a GREASE value (RFC 8701)
    hello = parse_client_hello(client_hello(extensions, session_id=b"\xaa" * 32))
    assert hello.server_name == "broker.example"
    assert hello.alpn == ("v12.stomp", "stomp")
    assert hello.versions == (0x3A3A, TLS13, TLS12)
    assert hello.cipher_suites == (0x1301, 0xC02F) and hello.random == bytes(range(32))


def test_the_host_name_is_found_among_other_name_types() -> None:
    assert (
        parse_client_hello(client_hello(server_name((7, b"other"), (0, b"b.test")))).server_name
        == "b.test"
    )
    assert parse_client_hello(client_hello(server_name((7, b"other")))).server_name is None


def test_bytes_that_are_not_ascii_in_names_are_replaced_not_raised() -> None:
    extensions = server_name((0, b"br\xffker")) + alpn(b"st\x80mp")
    hello = parse_client_hello(client_hello(extensions))
    assert hello.server_name == "br\ufffdker" and hello.alpn == ("st\ufffdmp",)


def test_a_tls12_server_hello_with_encrypt_then_mac_and_a_protocol() -> None:
    extensions = extension(22, b"") + alpn(b"stomp") + extension(0xFF01, b"\x00")
    hello = parse_server_hello(server_hello(extensions, suite=0xC013, random_bytes=b"\x07" * 32))
    assert hello == ServerHello(b"\x07" * 32, 0xC013, TLS12, "stomp", True)


def test_a_server_hello_without_extensions() -> None:
    assert parse_server_hello(server_hello(None)) == ServerHello(
        bytes(32), 0xC02F, TLS12, None, False
    )


def test_a_hello_retry_request_is_known_by_its_random() -> None:
    """RFC 8446 4.1.3: a HelloRetryRequest is a ServerHello with SHA-256("HelloRetryRequest")
    for its random."""
    assert hashlib.sha256(b"HelloRetryRequest").digest() == HELLO_RETRY_RANDOM
    extensions = extension(43, b"\x03\x04") + extension(51, b"\x00\x1d")  # key_share: a group
    retry = parse_server_hello(
        server_hello(extensions, suite=0x1302, random_bytes=HELLO_RETRY_RANDOM)
    )
    assert retry.retry and retry.version == TLS13 and retry.cipher_suite == 0x1302
    assert not parse_server_hello(server_hello(extensions, suite=0x1302)).retry


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", None),
        (b"\x00\x00", None),
        (vector(alpn(b"stomp"), 2), "stomp"),
        (
            vector(extension(10, b"\x00\x02\x00\x1d") + alpn(b"v12.stomp", b"v11.stomp"), 2),
            "v12.stomp",
        ),
    ],
)
def test_the_protocol_tls13_servers_name_in_encrypted_extensions(
    body: bytes, expected: str | None
) -> None:
    assert parse_encrypted_extensions(body) == expected


# ---- damaged hellos ----------------------------------------------------------------------


def parsed_or_refused(parse: Callable[[bytes], object], body: bytes) -> object:
    """What ``parse`` makes of ``body``; `BadHandshake` is the only refusal it may give."""
    try:
        return parse(body)
    except BadHandshake as refused:
        return refused


@pytest.mark.parametrize(
    ("parse", "body", "whole_without_extensions"),
    [
        # version 2, random 32, session id 1 + 0, suites 2 + 6, compression 1 + 1
        (parse_client_hello, RFC8448_CLIENT_HELLO[4:], 45),
        # version 2, random 32, session id 1 + 0, suite 2, compression 1
        (parse_server_hello, RFC8448_SERVER_HELLO[4:], 38),
        (parse_encrypted_extensions, RFC8448_ENCRYPTED_EXTENSIONS[4:], 0),
    ],
    ids=["client_hello", "server_hello", "encrypted_extensions"],
)
def test_every_cut_of_a_hello_is_refused_unless_it_ends_where_extensions_may(
    parse: Callable[[bytes], object], body: bytes, whole_without_extensions: int
) -> None:
    """Extensions are optional before TLS 1.3, so a hello that ends right before them is
    whole; any other cut is `BadHandshake`."""
    for size in range(len(body)):
        outcome = parsed_or_refused(parse, body[:size])
        if size == whole_without_extensions:
            assert not isinstance(outcome, BadHandshake), size
        else:
            assert isinstance(outcome, BadHandshake) and str(outcome) == "truncated", size


@pytest.mark.parametrize(
    ("parse", "body"),
    [
        (parse_client_hello, client_hello(None) + b"\x00"),  # a byte where the block's length is
        (parse_client_hello, client_hello(b"")[:-2] + b"\x00\x10"),  # a block longer than its bytes
        (parse_client_hello, client_hello(extension(0, b"")[:-2] + b"\x00\x09")),
        (parse_client_hello, client_hello(b"\x00")),  # half an extension type
        (parse_client_hello, client_hello(extension(0, b"\x00\x09\x00\x00\x03ab"))),
        (parse_client_hello, client_hello(extension(0, b"\x00\x05\x00\x00\x09abc"))),
        (parse_client_hello, client_hello(extension(0, b"\x00"))),
        (parse_client_hello, client_hello(extension(16, b"\x00\x07\x05stomp"))),
        (parse_client_hello, client_hello(extension(16, b"\x00\x06\x09stomp"))),
        (parse_client_hello, client_hello(extension(43, b"\x04\x03\x04"))),
        (parse_client_hello, client_hello(extension(43, b""))),
        (parse_client_hello, b"\x03\x03" + bytes(32) + b"\x21"),  # a session id of 33 bytes cut
        (parse_server_hello, server_hello(extension(43, b""))),
        (parse_server_hello, server_hello(extension(43, b"\x03"))),
        (parse_server_hello, server_hello(extension(16, b"\x00\x06\x09stomp"))),
        (parse_server_hello, server_hello(b"\xff\x01\x00")),
        (parse_encrypted_extensions, vector(extension(16, b"\x00\x08\x07stomp"), 2)),
        (parse_encrypted_extensions, b"\x00\x05" + extension(16, b"")),
    ],
)
def test_a_damaged_hello_is_bad_handshake(parse: Callable[[bytes], object], body: bytes) -> None:
    with pytest.raises(BadHandshake):
        parse(body)


@pytest.mark.parametrize(
    ("parse", "seed_body"),
    [
        (parse_client_hello, RFC8448_CLIENT_HELLO[4:]),
        (parse_server_hello, RFC8448_SERVER_HELLO[4:]),
        (parse_encrypted_extensions, RFC8448_ENCRYPTED_EXTENSIONS[4:]),
        (parse_client_hello, client_hello(server_name((0, b"b.test")) + alpn(b"stomp"))),
    ],
)
def test_random_damage_gives_a_hello_or_bad_handshake_only(
    parse: Callable[[bytes], object], seed_body: bytes
) -> None:
    rng = random.Random(len(seed_body))
    for _ in range(1500):
        body = bytearray(seed_body)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(body) + 1)
            roll = rng.random()
            if roll < 0.5 and at < len(body):
                body[at] = rng.randrange(256)
            elif roll < 0.75:
                del body[at : at + rng.randint(1, 6)]
            else:
                body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        parsed_or_refused(parse, bytes(body))  # raises anything else


def test_bad_handshake_is_a_value_error() -> None:
    assert issubclass(BadHandshake, ValueError)


# ---- the framer --------------------------------------------------------------------------


def test_messages_split_anywhere_come_out_whole() -> None:
    flight = RFC8448_CLIENT_HELLO + RFC8448_SERVER_HELLO + RFC8448_ENCRYPTED_EXTENSIONS
    expected = [
        Message(CLIENT_HELLO, RFC8448_CLIENT_HELLO[4:]),
        Message(SERVER_HELLO, RFC8448_SERVER_HELLO[4:]),
        Message(ENCRYPTED_EXTENSIONS, RFC8448_ENCRYPTED_EXTENSIONS[4:]),
    ]
    assert HandshakeFramer().feed(flight) == expected
    for cut in range(1, len(flight)):
        framer = HandshakeFramer()
        assert framer.feed(flight[:cut]) + framer.feed(flight[cut:]) == expected, cut
    framer = HandshakeFramer()
    one_by_one = [m for at in range(len(flight)) for m in framer.feed(flight[at : at + 1])]
    assert one_by_one == expected


@pytest.mark.parametrize(
    ("msg_type", "kept"),
    [
        (1, True),  # client_hello
        (2, True),  # server_hello
        (8, True),  # encrypted_extensions
        (24, True),  # key_update
        (4, False),  # new_session_ticket
        (11, False),  # certificate
        (12, False),  # server_key_exchange
        (15, False),  # certificate_verify
        (20, False),  # finished
    ],
)
def test_only_the_bodies_this_layer_reads_are_kept(msg_type: int, kept: bool) -> None:
    body = bytes(range(50))
    [found] = HandshakeFramer().feed(message(msg_type, body))
    assert found == Message(msg_type, body if kept else None)


def test_an_empty_message_comes_out_even_at_the_end_of_a_fragment() -> None:
    """ServerHelloDone has no body: its header alone is the whole message."""
    framer = HandshakeFramer()
    assert framer.feed(message(14, b"")) == [Message(14, None)]
    assert framer.feed(message(KEY_UPDATE, b"") + message(14, b"")[:2]) == [
        Message(KEY_UPDATE, b"")
    ]
    assert framer.feed(message(14, b"")[2:]) == [Message(14, None)]


def test_a_hello_longer_than_any_sent_is_not_kept_but_skipped() -> None:
    framer = HandshakeFramer()
    largest = message(CLIENT_HELLO, b"\x01" * MAX_KEPT_BODY)
    [kept] = framer.feed(largest)
    assert kept.body is not None and len(kept.body) == MAX_KEPT_BODY
    too_long = message(CLIENT_HELLO, b"\x02" * (MAX_KEPT_BODY + 1))
    after = message(SERVER_HELLO, b"next")
    found = framer.feed(too_long[:1000]) + framer.feed(too_long[1000:] + after)
    assert found == [Message(CLIENT_HELLO, None), Message(SERVER_HELLO, b"next")]


def test_an_unfinished_message_waits_for_its_bytes() -> None:
    framer = HandshakeFramer()
    assert framer.feed(RFC8448_CLIENT_HELLO[:3]) == []
    assert framer.feed(RFC8448_CLIENT_HELLO[3:100]) == []
    assert framer.feed(RFC8448_CLIENT_HELLO[100:]) == [
        Message(CLIENT_HELLO, RFC8448_CLIENT_HELLO[4:])
    ]


# ---- real captures -----------------------------------------------------------------------


def handshakes_of(name: str) -> dict[Direction, list[Message]]:
    """The handshake messages in the clear of each direction of a capture's one connection:
    its streams by the repo's reassembly, cut into records, the handshake records framed."""
    streams = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    for event in LocalReassembly([str(TLS_CAPTURES / f"{name}.pcap")]):
        if type(event) is Segment and type(event.event) is Data:
            streams[Direction.C2S if event.from_client else Direction.S2C] += event.event.data
    messages: dict[Direction, list[Message]] = {}
    for direction, stream in streams.items():
        framer = HandshakeFramer()
        messages[direction] = []
        for record in RecordReader().feed(bytes(stream)):
            if record.content_type == 20:  # ChangeCipherSpec: what follows is protected
                break
            if record.content_type == 22:
                messages[direction] += framer.feed(record.fragment)
    return messages


def keylog_random(name: str) -> bytes:
    lines = (TLS_CAPTURES / f"{name}.keys").read_text().splitlines()
    (client_random,) = {line.split()[1] for line in lines if line and not line.startswith("#")}
    return bytes.fromhex(client_random)


@pytest.mark.parametrize(
    ("name", "offered_versions", "version", "suite"),
    [
        ("rabbitmq-stomp-tls13", (TLS13, TLS12, 0x0302, 0x0301), TLS13, 0x1302),
        ("rabbitmq-stomp-tls12-chacha", (TLS12,), TLS12, 0xCCA8),
        ("activemq-stomp-ssl-tls12-gcm", (TLS12,), TLS12, 0xC030),
    ],
)
def test_the_hellos_of_a_real_capture(
    name: str, offered_versions: tuple[int, ...], version: int, suite: int
) -> None:
    messages = handshakes_of(name)
    client = parse_client_hello(messages[Direction.C2S][0].body or b"")
    assert client.random == keylog_random(name)  # the key log's key to this connection
    assert client.server_name == "stomp-lake.test" and client.alpn == ()
    assert client.versions == offered_versions and suite in client.cipher_suites
    server = parse_server_hello(messages[Direction.S2C][0].body or b"")
    assert (server.version, server.cipher_suite, server.retry) == (version, suite, False)
    assert server.alpn is None and not server.encrypt_then_mac  # AEAD suites: no EtM to ask
    if version == TLS12:
        # a server that speaks TLS 1.3 says so when it settles for less (RFC 8446 4.1.3)
        assert server.random.endswith(b"DOWNGRD\x01")


@pytest.mark.parametrize(
    ("name", "server_flight"),
    [
        ("rabbitmq-stomp-tls12-chacha", [2, 11, 12, 14]),
        ("activemq-stomp-ssl-tls12-gcm", [2, 11, 12, 14, 4]),
        ("rabbitmq-stomp-tls13", [2]),  # the rest of the handshake is protected
    ],
)
def test_a_real_server_flight_is_framed_message_by_message(
    name: str, server_flight: list[int]
) -> None:
    messages = handshakes_of(name)
    assert [m.msg_type for m in messages[Direction.S2C]] == server_flight
    assert [m.body is not None for m in messages[Direction.S2C]] == [
        t == SERVER_HELLO for t in server_flight
    ]
    assert messages[Direction.C2S][0].msg_type == CLIENT_HELLO


@pytest.mark.parametrize(
    ("version", "name"),
    [
        (0x0301, "TLS 1.0"),
        (0x0302, "TLS 1.1"),
        (TLS12, "TLS 1.2"),
        (TLS13, "TLS 1.3"),
        (0x0300, "0x0300"),  # SSL 3.0 is not TLS
        (0x7F1C, "0x7f1c"),  # a TLS 1.3 draft
        (0xFEFD, "0xfefd"),  # DTLS 1.2
    ],
)
def test_versions_are_named(version: int, name: str) -> None:
    assert version_name(version) == name
