"""benchmarks/traffic.py: the generated capture holds what its manifest says, and is reused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benchmarks.traffic import MSS, TrafficSpec, generate_files
from pipeline.reassembly import Data, Segment
from pipeline.stomp import Decoder
from pipeline.stomp.events import Frame, HeartBeat
from tests.support.local_reassembly import LocalReassembly

SPEC = TrafficSpec(total_bytes=600_000, connections=12, concurrent=5, files=3, seed=4)


def _decode(paths: list[Path]) -> tuple[Counter, int, int, int]:
    """(frames by 'direction COMMAND', heart-beats, largest payload, connections)."""
    decoders: dict[tuple[str, bool], Decoder] = {}
    frames: Counter[str] = Counter()
    beats = largest = 0
    for event in LocalReassembly([str(p) for p in paths]):
        if type(event) is not Segment or type(event.event) is not Data:
            continue
        largest = max(largest, len(event.event.data))
        decoder = decoders.setdefault((event.connection_id, event.from_client), Decoder("1.2"))
        decoder.feed(event.event.data)
        for item in decoder.events():
            if type(item) is Frame:
                frames[f"{'c2s' if event.from_client else 's2c'} {item.command}"] += 1
            elif type(item) is HeartBeat:
                beats += 1
    return frames, beats, largest, len({conn for conn, _side in decoders})


def test_the_capture_decodes_to_what_the_manifest_counts(tmp_path: Path) -> None:
    capture = generate_files(SPEC, tmp_path / "capture")
    assert len(capture.paths) >= SPEC.files
    assert capture.connections == SPEC.connections
    assert capture.stomp_bytes >= SPEC.total_bytes
    frames, beats, largest, connections = _decode(capture.paths)
    assert frames == Counter(capture.frames)
    # the bare decoder also reports the LF a broker puts after each frame's NUL
    broker_frames = sum(n for name, n in frames.items() if name.startswith("s2c"))
    assert beats - broker_frames == capture.heartbeats > 0
    assert largest <= MSS
    assert connections == SPEC.connections
    for command in ("c2s SEND", "s2c MESSAGE", "c2s ACK", "s2c RECEIPT", "c2s DISCONNECT"):
        assert capture.frames[command] > 0


def test_a_folder_holding_the_same_spec_is_reused(tmp_path: Path) -> None:
    first = generate_files(SPEC, tmp_path / "capture")
    stamps = [p.stat().st_mtime_ns for p in first.paths]
    again = generate_files(SPEC, tmp_path / "capture")
    assert again.paths == first.paths
    assert [p.stat().st_mtime_ns for p in again.paths] == stamps
    smaller = TrafficSpec(total_bytes=300_000, connections=4, concurrent=2, files=2)
    other = generate_files(smaller, tmp_path / "capture")
    assert other.stomp_bytes < first.stomp_bytes
    assert not any(p.exists() for p in first.paths if p not in other.paths)


def test_the_small_message_shape_has_small_bodies_and_eight_headers(tmp_path: Path) -> None:
    spec = TrafficSpec(total_bytes=400_000, connections=6, concurrent=3, files=2, shape="small")
    capture = generate_files(spec, tmp_path / "capture")
    broker = generate_files(
        TrafficSpec(total_bytes=400_000, connections=6, concurrent=3, files=2),
        tmp_path / "broker",
    )
    # several times the frames a byte of the broker-like shape
    assert sum(capture.frames.values()) > 3 * sum(broker.frames.values())
    bodies, headers = [], []
    decoders: dict[tuple[str, bool], Decoder] = {}
    for event in LocalReassembly([str(p) for p in capture.paths]):
        if type(event) is not Segment or type(event.event) is not Data:
            continue
        decoder = decoders.setdefault((event.connection_id, event.from_client), Decoder("1.2"))
        decoder.feed(event.event.data)
        for item in decoder.events():
            if type(item) is Frame and item.command in ("SEND", "MESSAGE"):
                bodies.append(len(item.body))
                headers.append(len(set(item.headers) - {"receipt"}))
    assert bodies and min(bodies) >= 50 and max(bodies) <= 400
    assert set(headers) == {8}
