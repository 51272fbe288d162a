"""End to end: synthetic and real captures -> readers -> connection tracking -> stream bytes."""

from __future__ import annotations

import gc
import hashlib
import os
import random
import shutil
import subprocess
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipeline.reassembly.connections import Closed, Connection, Opened, Segment
from pipeline.reassembly.stream import Conflict, Data, Gap
from tests.support import pcapgen as g
from tests.support.local_reassembly import LocalReassembly
from tests.support.paths import DATA as TEST_DATA

DATA = TEST_DATA / "captures"
TSHARK = shutil.which("tshark")


@dataclass
class Direction:
    data: bytearray = field(default_factory=bytearray)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    conflicts: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class Result:
    connections: list[Connection]
    directions: dict[tuple[str, bool], Direction]
    anomalies: list

    def by_client(self, client: tuple[str, int]) -> list[Connection]:
        return [c for c in self.connections if c.client == client]


def reassemble(paths: list[Path], **options: object) -> Result:
    run = LocalReassembly([str(p) for p in paths], **options)  # type: ignore[arg-type]
    connections: list[Connection] = []
    directions: dict[tuple[str, bool], Direction] = {}
    closed: set[str] = set()
    for event in run:
        if isinstance(event, Opened):
            connections.append(event.connection)
        elif isinstance(event, Closed):
            closed.add(event.connection.connection_id)
        else:
            assert isinstance(event, Segment)
            assert event.connection_id not in closed
            d = directions.setdefault((event.connection_id, event.from_client), Direction())
            e = event.event
            if isinstance(e, Data):
                assert e.offset == len(d.data) + sum(size for _off, size in d.gaps)
                d.data += e.data
            elif isinstance(e, Gap):
                d.gaps.append((e.offset, e.size))
            else:
                assert isinstance(e, Conflict)
                d.conflicts.append((e.offset, e.size))
    assert closed == {c.connection_id for c in connections}
    return Result(connections, directions, run.anomalies)


def merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for off, size in sorted(ranges):
        if out and out[-1][0] + out[-1][1] >= off:
            out[-1] = (out[-1][0], max(out[-1][1], off + size - out[-1][0]))
        else:
            out.append((off, size))
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_matches_truth(result: Result, capture: g.SyntheticCapture) -> None:
    assert result.anomalies == []
    assert len(result.connections) == len(capture.truth)
    for truth in capture.truth:
        [conn] = result.by_client(truth.client)
        assert conn.server == truth.server
        for from_client in (True, False):
            expected = truth.direction(from_client)
            got = result.directions.get((conn.connection_id, from_client), Direction())
            kept = bytearray(expected.data)
            for off, size in reversed(expected.dropped):
                del kept[off : off + size]
            assert sha(bytes(got.data)) == sha(bytes(kept))
            assert got.gaps == expected.dropped
            assert merged(got.conflicts) == expected.conflicts


def conversations(count: int = 3, *, ipv6: bool = False, **options: object) -> list[g.Conversation]:
    return [
        g.stomp_conversation(i, messages=8, body_size=2500, ipv6=ipv6, **options)
        for i in range(count)
    ]


PERTURBATIONS = {
    "clean": g.Perturbation(),
    "shuffled": g.Perturbation(shuffle=7, seed=1),
    "duplicated": g.Perturbation(duplicate=0.4, seed=2),
    "overlapping": g.Perturbation(overlap=0.3, seed=3),
    "dropped": g.Perturbation(drop=0.1, seed=4),
    "probes": g.Perturbation(keepalive=0.3, zero_window_probe=0.3, seed=5),
    "everything": g.Perturbation(
        shuffle=6,
        duplicate=0.2,
        overlap=0.2,
        drop=0.08,
        keepalive=0.1,
        zero_window_probe=0.1,
        seed=6,
    ),
}


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_reassembled_bytes_match_the_original(tmp_path: Path, name: str) -> None:
    capture = g.generate(conversations(), PERTURBATIONS[name])
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets)
    assert_matches_truth(reassemble([path]), capture)


def test_perturbations_really_perturb() -> None:
    capture = g.generate(conversations(), PERTURBATIONS["everything"])
    truths = [t.direction(d) for t in capture.truth for d in (True, False)]
    assert sum(len(t.dropped) for t in truths) > 3
    assert sum(len(t.conflicts) for t in truths) > 3


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_rotated_files_listed_in_shuffled_order(tmp_path: Path, fmt: str) -> None:
    capture = g.generate(conversations(4), PERTURBATIONS["everything"])
    paths = g.write_rotated(tmp_path, capture.packets, files=5, fmt=fmt)
    random.Random(9).shuffle(paths)
    assert_matches_truth(reassemble(paths), capture)


@pytest.mark.parametrize("linktype", g.ALL_LINKTYPES)
def test_every_link_type(tmp_path: Path, linktype: int) -> None:
    convs = conversations(2) + conversations(1, ipv6=True)
    convs[-1].client = ("fd00::77", 47000)
    capture = g.generate(convs, g.Perturbation(shuffle=4, duplicate=0.2, drop=0.05, seed=8))
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets, linktype=linktype)
    assert_matches_truth(reassemble([path]), capture)


@pytest.mark.parametrize("byte_order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_both_pcap_flavours(tmp_path: Path, nanos: bool, byte_order: str) -> None:
    capture = g.generate(conversations(), PERTURBATIONS["everything"])
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets, nanos=nanos, byte_order=byte_order)
    assert_matches_truth(reassemble([path]), capture)


def test_pcapng_with_two_interfaces_of_different_resolution(tmp_path: Path) -> None:
    capture = g.generate(conversations(3), PERTURBATIONS["everything"])
    interfaces = [
        g.NgInterface(g.LINKTYPE_ETHERNET, tsresol=6),
        g.NgInterface(g.LINKTYPE_LINUX_SLL2, tsresol=9),
    ]
    path = g.write_pcapng(
        tmp_path / "x.pcapng", capture.packets, interfaces=interfaces, spread=True, comments=True
    )
    assert_matches_truth(reassemble([path]), capture)


def test_ipv6_with_extension_headers(tmp_path: Path) -> None:
    capture = g.generate(
        conversations(3, ipv6=True, ipv6_extension=True), PERTURBATIONS["everything"]
    )
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets, linktype=g.LINKTYPE_RAW)
    assert_matches_truth(reassemble([path]), capture)


def test_sequence_wraparound(tmp_path: Path) -> None:
    convs = conversations(2, client_isn=2**32 - 5000, server_isn=2**32 - 1)
    capture = g.generate(convs, PERTURBATIONS["everything"])
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets)
    assert_matches_truth(reassemble([path]), capture)


def test_capture_started_mid_connection_uses_broker_ports(tmp_path: Path) -> None:
    convs = conversations(2, handshake=False)
    capture = g.generate(convs, g.Perturbation(duplicate=0.3, seed=3))
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets)
    result = reassemble([path], broker_ports={61613})
    assert {c.role_source for c in result.connections} == {"broker_port"}
    assert_matches_truth(result, capture)


def test_reused_four_tuple_gives_two_connections(tmp_path: Path) -> None:
    first = g.stomp_conversation(0, messages=3)
    second = g.stomp_conversation(0, messages=4, client_isn=777_777, server_isn=999)
    second.start_ns = first.start_ns + 10**9
    capture = g.generate([first, second], PERTURBATIONS["duplicated"])
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets)
    result = reassemble([path])
    assert len(result.connections) == 2
    assert [c.client_isn for c in result.connections] == [1_000, 777_777]
    for conn, conv in zip(result.connections, (first, second), strict=True):
        for from_client in (True, False):
            got = result.directions[(conn.connection_id, from_client)].data
            assert sha(bytes(got)) == sha(g.stream_bytes(conv, from_client))


def test_snaplen_cut_capture_gives_gaps_and_anomalies(tmp_path: Path) -> None:
    capture = g.generate(conversations(1))
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets, snaplen=200)
    result = reassemble([path])
    assert result.anomalies and {a.kind for _p, a in result.anomalies} == {"snaplen_cut"}
    truth = capture.truth[0].client_to_server
    d = result.directions[(result.connections[0].connection_id, True)]
    assert len(d.data) + sum(size for _off, size in d.gaps) == len(truth.data)
    position = 0
    for off, size in d.gaps:  # every captured byte sits at its true offset
        assert off >= position
        position = off + size


def test_corrupt_file_among_good_ones_still_flows(tmp_path: Path) -> None:
    capture = g.generate(conversations(3), PERTURBATIONS["shuffled"])
    paths = g.write_rotated(tmp_path, capture.packets, files=3)
    (tmp_path / "garbage.pcap").write_bytes(os.urandom(5000))
    result = reassemble([*paths, tmp_path / "garbage.pcap"])
    assert [(a.kind, a.offset) for _p, a in result.anomalies] == [("unknown_format", 0)]
    result.anomalies = []
    assert_matches_truth(result, capture)


def test_memory_stays_bounded_for_a_large_connection(tmp_path: Path) -> None:
    rng = random.Random(1)
    chunks = [g.Chunk(True, rng.randbytes(1 << 20), gap_ns=10_000) for _ in range(48)]
    conv = g.Conversation(("10.0.0.1", 5000), ("10.0.0.2", 61613), chunks, mss=16_000)
    capture = g.generate([conv], g.Perturbation(drop=0.005, seed=1))  # holes never fill
    path = g.write_pcap(tmp_path / "big.pcap", capture.packets)
    truth = capture.truth[0].client_to_server
    kept = bytearray(truth.data)
    for off, size in reversed(truth.dropped):
        del kept[off : off + size]
    expected, dropped = sha(bytes(kept)), truth.dropped
    assert dropped and dropped[0][0] < 40 << 20  # the 2 MiB pending bound will be hit
    del capture, chunks, conv, truth, kept
    gc.collect()
    tracemalloc.start()
    digest, gaps = hashlib.sha256(), []
    for event in LocalReassembly([str(path)], max_pending_bytes=2 << 20):
        if isinstance(event, Segment) and isinstance(event.event, Data):
            digest.update(event.event.data)
        elif isinstance(event, Segment) and isinstance(event.event, Gap):
            gaps.append((event.event.offset, event.event.size))
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert digest.hexdigest() == expected and gaps == dropped
    assert peak < 8 << 20, f"peak {peak} bytes for a 48 MiB stream"


def tshark_follow(path: Path, streams: int) -> list[tuple[str, str, bytes, bytes]]:
    """(node 0, node 1, bytes node 0 sent, bytes node 1 sent) per tshark TCP stream, in order."""
    assert TSHARK is not None  # callers are skipped otherwise
    command = [TSHARK, "-r", str(path), "-q"]
    for n in range(streams):
        command += ["-z", f"follow,tcp,raw,{n}"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    follows = {}
    for block in out.split("Follow: tcp,raw")[1:]:
        index, nodes, sent = -1, [], [bytearray(), bytearray()]
        for line in block.splitlines():
            if line.startswith("Filter: tcp.stream eq "):
                index = int(line.rsplit(" ", 1)[1])
            elif line.startswith("Node "):
                nodes.append(line.split(": ", 1)[1])
            elif line and not line.startswith("="):
                node = 1 if line.startswith("\t") else 0  # node 1's data is indented
                sent[node] += bytes.fromhex(line.strip())
        follows[index] = (nodes[0], nodes[1], bytes(sent[0]), bytes(sent[1]))
    return [follows[n] for n in range(streams)]


def node_text(endpoint: tuple[str, int]) -> str:
    ip, port = endpoint
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def compare_with_tshark(path: Path, expected_connections: int) -> None:
    result = reassemble([path])
    assert len(result.connections) == expected_connections
    follows = tshark_follow(path, expected_connections)
    for conn, (node0, node1, sent0, sent1) in zip(result.connections, follows, strict=True):
        assert (node0, node1) == (node_text(conn.client), node_text(conn.server))
        assert sent0 and sent1
        assert sha(bytes(result.directions[(conn.connection_id, True)].data)) == sha(sent0)
        assert sha(bytes(result.directions[(conn.connection_id, False)].data)) == sha(sent1)


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
@pytest.mark.parametrize(
    "name", ["real_lo_ethernet.pcap", "real_any_sll2.pcap", "real_lo_dumpcap.pcapng"]
)
def test_real_captures_match_tshark_follow(name: str) -> None:
    compare_with_tshark(DATA / name, 3)


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
def test_perturbed_synthetic_capture_matches_tshark_follow(tmp_path: Path) -> None:
    capture = g.generate(
        conversations(3), g.Perturbation(shuffle=5, duplicate=0.3, keepalive=0.2, seed=12)
    )
    path = g.write_pcap(tmp_path / "x.pcap", capture.packets)
    compare_with_tshark(path, 3)
