"""pipeline/tls/records.py: TLS records cut out of one direction's byte stream, whatever the
pieces it comes in, with the TCP offset of each header; bytes no TLS peer sends stop the reader
for good with the offset and the reason. Each test runs on the module as imported (compiled
where built) and on its pure-Python source."""

from __future__ import annotations

import pickle
import random
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

import pipeline.tls.records as imported_records
from fuzz import twins
from pipeline.net import Direction
from pipeline.reassembly import Data, Segment
from tests.support.local_reassembly import LocalReassembly
from tests.support.paths import DATA

TLS_CAPTURES = DATA / "tls"
# the captures of one connection each (tests/data/README.md)
ONE_CONNECTION = [
    "rabbitmq-stomp-tls13",
    "rabbitmq-stomp-tls12-chacha",
    "activemq-stomp-ssl-tls12-gcm",
    "rabbitmq-stomp-tls13-large",
    "rabbitmq-web-stomp-tls13",
]


@pytest.fixture(params=["as_imported", "pure_python"])
def records(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    if request.param == "as_imported":
        yield imported_records
        return
    (twin,) = twins.pure("pipeline.tls.records")
    with twins.running_pure():
        yield twin


def record(content_type: int, fragment: bytes, version: int = 0x0303) -> bytes:
    """A record's wire bytes (RFC 8446 5.1, RFC 5246 6.2.1)."""
    return (
        bytes([content_type])
        + version.to_bytes(2, "big")
        + len(fragment).to_bytes(2, "big")
        + fragment
    )


def summary(found: list[Any]) -> list[tuple[int, int, bytes, bytes, int]]:
    """Records as tuples: the twins' `Record` classes are not the same class."""
    return [(r.content_type, r.version, r.header, r.fragment, r.tcp_offset) for r in found]


HELLO = record(22, b"\x01\x00\x00\x04\x03\x03\x00\x00", version=0x0301)
CCS = record(20, b"\x01")
DATA_RECORD = record(23, bytes(range(40)))
STREAM = HELLO + CCS + DATA_RECORD


def test_the_content_types_and_limits_are_the_rfcs() -> None:
    assert (imported_records.CHANGE_CIPHER_SPEC, imported_records.ALERT) == (20, 21)
    assert (imported_records.HANDSHAKE, imported_records.APPLICATION_DATA) == (22, 23)
    assert imported_records.HEARTBEAT == 24  # RFC 6520
    assert frozenset({20, 21, 22, 23, 24}) == imported_records.CONTENT_TYPES
    assert imported_records.HEADER_LENGTH == 5
    assert imported_records.MAX_FRAGMENT == 2**14 + 2048  # TLSCiphertext's bound (RFC 5246 6.2.3)


def test_whole_records_come_out_with_their_tcp_offsets(records: ModuleType) -> None:
    reader = records.RecordReader(1000)
    found = reader.feed(STREAM)
    assert summary(found) == [
        (22, 0x0301, HELLO[:5], HELLO[5:], 1000),
        (20, 0x0303, CCS[:5], b"\x01", 1000 + len(HELLO)),
        (23, 0x0303, DATA_RECORD[:5], bytes(range(40)), 1000 + len(HELLO) + len(CCS)),
    ]
    assert reader.held == 0 and reader.failure is None


def test_bytes_fed_one_at_a_time_give_the_same_records(records: ModuleType) -> None:
    whole = summary(records.RecordReader(7).feed(STREAM))
    reader = records.RecordReader(7)
    found: list[Any] = []
    for at in range(len(STREAM)):
        found += reader.feed(STREAM[at : at + 1])
        done = sum(5 + len(r.fragment) for r in found)
        assert reader.held == at + 1 - done
    assert summary(found) == whole and reader.failure is None


def test_part_of_a_record_is_held_until_the_rest_comes(records: ModuleType) -> None:
    reader = records.RecordReader()
    assert reader.feed(DATA_RECORD[:3]) == [] and reader.held == 3  # not even a header
    assert reader.feed(DATA_RECORD[3:20]) == [] and reader.held == 20
    assert summary(reader.feed(DATA_RECORD[20:] + CCS[:2])) == [
        (23, 0x0303, DATA_RECORD[:5], bytes(range(40)), 0)
    ]
    assert reader.held == 2 and reader.failure is None


def test_fewer_than_five_bytes_are_not_judged_yet(records: ModuleType) -> None:
    """Even bytes that cannot start a record wait for a whole header."""
    reader = records.RecordReader()
    assert reader.feed(b"GET ") == [] and reader.failure is None and reader.held == 4
    assert reader.feed(b"/") == []
    assert reader.failure == records.NotTls(0, "content type 71, version 0x4554")


@pytest.mark.parametrize("content_type", [20, 21, 22, 23, 24])
def test_an_empty_record_of_any_content_type_is_a_record(
    records: ModuleType, content_type: int
) -> None:
    [empty] = records.RecordReader(5).feed(record(content_type, b""))
    assert (empty.content_type, empty.fragment, empty.tcp_offset) == (content_type, b"", 5)


@pytest.mark.parametrize("version", [0x0300, 0x0301, 0x0302, 0x0303, 0x0304, 0x03FF])
def test_any_version_of_major_three_is_read(records: ModuleType, version: int) -> None:
    [found] = records.RecordReader().feed(record(22, b"x", version))
    assert found.version == version and found.header[1:3] == version.to_bytes(2, "big")


def test_a_record_of_the_largest_size_is_read_and_one_byte_more_is_not(
    records: ModuleType,
) -> None:
    largest = record(23, bytes(records.MAX_FRAGMENT))
    reader = records.RecordReader()
    [found] = reader.feed(largest)
    assert len(found.fragment) == records.MAX_FRAGMENT and reader.failure is None
    too_large = largest[:3] + (records.MAX_FRAGMENT + 1).to_bytes(2, "big")
    assert reader.feed(too_large) == []  # refused from its header, before its bytes come
    assert reader.failure == records.NotTls(
        len(largest), f"record of {records.MAX_FRAGMENT + 1} bytes (at most {records.MAX_FRAGMENT})"
    )


@pytest.mark.parametrize(
    ("garbage", "reason"),
    [
        (b"CONNECT\naccept-version:1.2\n\n\x00", "content type 67, version 0x4f4e"),  # STOMP
        (b"GET /ws HTTP/1.1\r\n", "content type 71, version 0x4554"),  # a WebSocket upgrade
        (b"\x80\x2e\x01\x03\x01", "content type 128, version 0x2e01"),  # SSLv2 ClientHello
        (b"\x16\x02\x00\x00\x05hello", "content type 22, version 0x0200"),  # major version 2
        (b"\x16\x04\x00\x00\x05hello", "content type 22, version 0x0400"),
        (b"\x19\x03\x03\x00\x01x", "content type 25, version 0x0303"),
        (b"\x13\x03\x03\x00\x01x", "content type 19, version 0x0303"),
        (b"\x00\x00\x00\x00\x00", "content type 0, version 0x0000"),
        (b"\x17\x03\x03\xff\xff", "record of 65535 bytes (at most 18432)"),
    ],
)
def test_bytes_no_tls_peer_sends_stop_the_reader_where_they_start(
    records: ModuleType, garbage: bytes, reason: str
) -> None:
    reader = records.RecordReader(100)
    found = reader.feed(HELLO + CCS + garbage)
    assert [r.content_type for r in found] == [22, 20]  # the records before it still come out
    assert reader.failure == records.NotTls(100 + len(HELLO) + len(CCS), reason)
    assert reader.held == 0


def test_garbage_after_a_held_part_is_found_at_its_own_offset(records: ModuleType) -> None:
    reader = records.RecordReader(50)
    assert reader.feed(DATA_RECORD[:30]) == []
    found = reader.feed(DATA_RECORD[30:] + b"\xffnot tls")
    assert summary(found) == [(23, 0x0303, DATA_RECORD[:5], bytes(range(40)), 50)]
    assert reader.failure == records.NotTls(
        50 + len(DATA_RECORD), "content type 255, version 0x6e6f"
    )


def test_a_stopped_reader_stays_stopped(records: ModuleType) -> None:
    reader = records.RecordReader()
    reader.feed(b"\x00" * 5)
    failure = reader.failure
    assert failure is not None
    for _ in range(3):
        assert reader.feed(STREAM) == []
    assert reader.failure is failure and reader.held == 0


def test_taken_bytes_are_given_back_and_read_with_what_follows(records: ModuleType) -> None:
    """What `pipeline.tls.bulk` does between runs: take the held part of a record, give back
    what it leaves, and the reader goes on from there."""
    reader = records.RecordReader(10)
    reader.feed(HELLO + DATA_RECORD[:12])
    assert reader.take() == (DATA_RECORD[:12], 10 + len(HELLO))
    assert reader.held == 0 and reader.take() == (b"", 10 + len(HELLO))
    reader.hold(DATA_RECORD[:7], 10 + len(HELLO))
    assert reader.held == 7
    assert summary(reader.feed(DATA_RECORD[7:] + CCS)) == [
        (23, 0x0303, DATA_RECORD[:5], bytes(range(40)), 10 + len(HELLO)),
        (20, 0x0303, CCS[:5], b"\x01", 10 + len(HELLO) + len(DATA_RECORD)),
    ]


def test_holding_nothing_moves_the_reader_to_a_record_boundary(records: ModuleType) -> None:
    reader = records.RecordReader()
    reader.feed(DATA_RECORD[:9])
    reader.take()
    reader.hold(b"", 5000)  # the bulk path read every record up to 5000
    assert reader.held == 0
    assert [r.tcp_offset for r in reader.feed(CCS + CCS)] == [5000, 5000 + len(CCS)]


def test_a_pickled_reader_goes_on_where_it_was(records: ModuleType) -> None:
    """A connection carried to the next batch is pickled in the middle of a record."""
    reader = records.RecordReader(3)
    reader.feed(HELLO + DATA_RECORD[:21])
    carried = pickle.loads(pickle.dumps(reader))
    assert type(carried) is type(reader) and carried.held == 21
    assert summary(carried.feed(DATA_RECORD[21:])) == [
        (23, 0x0303, DATA_RECORD[:5], bytes(range(40)), 3 + len(HELLO))
    ]
    reader.feed(b"\x01" * 40)
    stopped = pickle.loads(pickle.dumps(reader))
    assert stopped.failure == reader.failure and stopped.feed(CCS) == []


def test_random_bytes_never_raise_and_cut_alike_however_fed(records: ModuleType) -> None:
    """Whatever the bytes, the reader returns records or stops with a reason; feeding them in
    pieces changes nothing."""
    rng = random.Random(20)
    for _ in range(300):
        pieces = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 12)))]
        pieces += [record(rng.choice((20, 21, 22, 23, 24)), bytes(rng.randint(0, 40)))]
        rng.shuffle(pieces)
        stream = b"".join(pieces * rng.randint(1, 3))
        whole_reader = records.RecordReader()
        whole = summary(whole_reader.feed(stream))
        reader = records.RecordReader()
        found: list[Any] = []
        at = 0
        while at < len(stream):
            size = rng.randint(1, 9)
            found += reader.feed(stream[at : at + size])
            at += size
        assert summary(found) == whole
        assert reader.failure == whole_reader.failure
        assert reader.held == whole_reader.held < 5 + records.MAX_FRAGMENT


def streams_of(name: str) -> dict[Direction, bytes]:
    """Each direction's TCP payload of a capture's one connection, by the repo's reassembly."""
    streams = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    connections = set()
    for event in LocalReassembly([str(TLS_CAPTURES / f"{name}.pcap")]):
        if type(event) is Segment and type(event.event) is Data:
            connections.add(event.connection_id)
            streams[Direction.C2S if event.from_client else Direction.S2C] += event.event.data
    assert len(connections) == 1
    return {direction: bytes(data) for direction, data in streams.items()}


@pytest.fixture(scope="module")
def captures() -> dict[str, dict[Direction, bytes]]:
    """Reassembled once, before (and outside) the pure-Python twin's turn."""
    return {name: streams_of(name) for name in ONE_CONNECTION}


@pytest.mark.parametrize("name", ONE_CONNECTION)
def test_the_records_of_a_real_capture_tile_each_stream(
    captures: dict[str, dict[Direction, bytes]], records: ModuleType, name: str
) -> None:
    for direction, stream in captures[name].items():
        reader = records.RecordReader()
        found = reader.feed(stream)
        assert reader.failure is None and reader.held == 0
        at = 0
        for item in found:
            assert item.tcp_offset == at and stream[at : at + 5] == item.header
            at += 5 + len(item.fragment)
        assert at == len(stream)
        first = found[0]
        assert first.content_type == 22  # a hello
        if direction is Direction.C2S:
            assert first.version == 0x0301  # ClientHello records say TLS 1.0 (RFC 8446 5.1)
        # the close_notify alert, which TLS 1.3 hides in application data (RFC 8446 5.2)
        assert found[-1].content_type == (23 if "tls13" in name else 21)


def test_a_real_stream_cut_in_segments_gives_the_same_records(
    captures: dict[str, dict[Direction, bytes]], records: ModuleType
) -> None:
    """The large capture's 16 KB records, cut at random as TCP cuts them."""
    stream = captures["rabbitmq-stomp-tls13-large"][Direction.S2C]
    whole = summary(records.RecordReader().feed(stream))
    assert max(len(fragment) for _, _, _, fragment, _ in whole) == 2**14 + 17  # + type + tag
    rng = random.Random(5)
    reader = records.RecordReader()
    found: list[Any] = []
    at = 0
    while at < len(stream):
        size = rng.choice((1, 5, 88, 1448, 4096, 65483))
        found += reader.feed(stream[at : at + size])
        at += size
    assert summary(found) == whole and reader.held == 0
