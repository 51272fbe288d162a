"""pipeline/spark/flows.py: the per-flow pass, on Spark, against tshark's own TCP reassembly.

Synthetic STOMP conversations (tests/support/pcapgen.py) are perturbed the way real captures
are (segments shuffled, duplicated, re-sent with different bytes, dropped), and their packets
dealt at random over several capture files, some packets into two of them, listed in random
order. The job's frames must cut exactly the byte streams that `tshark -z follow,tcp,raw`
rebuilds from the same packets (in one file), wherever tshark has them: tshark keeps the first
copy of re-sent bytes as we do, and stops a stream at its first hole. Past a hole the
generator's ground truth is the reference, and every hole and conflict must be on record.
"""

from __future__ import annotations

import hashlib
import heapq
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import schemas
from fuzz.offline import OfflineResult, run_offline
from pipeline.driver import ConnectionDriver
from pipeline.ingest import split_capture
from pipeline.lake.staged_tables import read_files
from pipeline.session import ModelOptions
from pipeline.spark.captures import packets_frame, read_split
from pipeline.spark.flows import (
    FILE_KIND,
    STATE_KIND,
    FlowPassConfig,
    flow_pass,
    output_schema,
    run_partition,
)
from pipeline.spark.placement import ranges
from pipeline.spark.summary import capture_summary, flow_output
from pipeline.spark.table_files import TableFileWriter, file_schema
from tests.support import pcapgen as g
from tests.support.paths import REPO, REPO_CAPTURES
from tests.support.split_capture import scatter, split_by_time

pytestmark = pytest.mark.spark

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark (Debian package) missing")
OPTIONS = ModelOptions(body_mode="full")
PARTITIONS = 3
MESSAGES = 10
FRAMES = {"c2s": 3 + MESSAGES, "s2c": 2 + MESSAGES}  # see pcapgen.stomp_conversation
WRAP = 2**32 - 2_500  # initial sequence numbers that wrap around within the first messages

CLEAN = g.Perturbation()
MESSY = g.Perturbation(shuffle=8, duplicate=0.25, overlap=0.25, seed=11)
LOSSY = g.Perturbation(shuffle=6, duplicate=0.2, overlap=0.2, drop=0.08, seed=5)


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    perturbation: g.Perturbation
    options: dict


CASES = (
    Case("clean", CLEAN, {}),
    Case("clean-ipv6", CLEAN, {"ipv6": True}),
    Case("messy", MESSY, {}),
    Case("messy-wrap", MESSY, {"client_isn": WRAP, "server_isn": WRAP + 700}),
    Case("messy-small-mss", MESSY, {"mss": 536}),
    Case("lossy", LOSSY, {}),
    Case("lossy-wrap", LOSSY, {"client_isn": WRAP, "server_isn": WRAP - 1_000}),
    Case("lossy-more", g.Perturbation(shuffle=4, duplicate=0.3, drop=0.15, seed=8), {}),
)


def build_capture() -> tuple[list[g.SynthPacket], dict[int, tuple[str, g.ConversationTruth]]]:
    """All cases' packets merged by time; client port -> (case name, truth)."""
    streams, truths = [], {}
    for index, case in enumerate(CASES):
        conv = g.stomp_conversation(index, messages=MESSAGES, body_size=1_800, **case.options)
        capture = g.generate([conv], case.perturbation)
        streams.append(capture.packets)
        truths[conv.client[1]] = (case.name, capture.truth[0])
    return list(heapq.merge(*streams, key=lambda p: p.ts_ns)), truths


# --- tshark ------------------------------------------------------------------------------------


def tshark_streams(path: Path, streams: int) -> dict[tuple[str, int], tuple[bytes, bytes]]:
    """(client ip, client port) -> (client bytes, server bytes) as tshark follows them."""
    assert TSHARK is not None  # callers are skipped otherwise
    command = [TSHARK, "-r", str(path), "-q"]
    for index in range(streams):
        command += ["-z", f"follow,tcp,raw,{index}"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    found = {}
    for section in out.stdout.split("Follow: tcp,raw")[1:]:
        lines = section.splitlines()
        node0 = next(line for line in lines if line.startswith("Node 0: "))
        ip, port = node0[len("Node 0: ") :].rsplit(":", 1)
        sent = {0: bytearray(), 1: bytearray()}
        start = next(n for n, line in enumerate(lines) if line.startswith("Node 1: ")) + 1
        for line in lines[start:]:
            if line.startswith("="):
                break
            sent[1 if line.startswith("\t") else 0].extend(bytes.fromhex(line.strip()))
        found[(ip.strip("[]"), int(port))] = (bytes(sent[0]), bytes(sent[1]))
    return found


# --- the job's output --------------------------------------------------------------------------


@dataclass(slots=True)
class JobOutput:
    tables: dict[str, list[dict]]

    def sessions_by_port(self) -> dict[int, dict]:
        return {row["client_port"]: row for row in self.tables["sessions"]}

    def rows(self, table: str, session_id: str, direction: str | None = None) -> list[dict]:
        return [
            r
            for r in self.tables[table]
            if r["session_id"] == session_id and (direction is None or r["direction"] == direction)
        ]


def staged_config(
    paths: list[str],
    staging: Path,
    batch_id: str = "batch-1",
    options: ModelOptions | None = None,
    close_open: bool = False,
) -> FlowPassConfig:
    """A pass over `paths` that writes each table's files under `staging`/table."""
    folders = tuple((table, str(staging / table)) for table in schemas.TABLES)
    return FlowPassConfig(
        tuple(paths),
        options or ModelOptions(),
        close_open=close_open,
        table_dirs=folders,
        batch_id=batch_id,
    )


def read_back(spark, config: FlowPassConfig, output) -> dict:
    """The tables a pass wrote (its file rows say which files), read with the tables' schemas."""
    written, _counts = flow_output(output)
    folders = config.table_folders()
    return {
        table: read_files(spark, table, Path(folders[table]), written.get(table, []))
        for table in schemas.TABLES
    }


def run_job(spark, paths: list[Path], staging: Path, close_open: bool = True) -> JobOutput:
    names = [str(p) for p in paths]
    packets = packets_frame(spark, names)
    config = staged_config(names, staging, options=OPTIONS, close_open=close_open)
    tables = read_back(spark, config, flow_pass(packets, None, config, PARTITIONS))
    return JobOutput({name: [r.asDict() for r in df.collect()] for name, df in tables.items()})


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, list[Path], dict]:
    folder = tmp_path_factory.mktemp("flows")
    packets, truths = build_capture()
    whole = g.write_pcap(folder / "whole.pcap", packets, nanos=True)
    parts = scatter(whole, folder / "parts", 5, seed=3, copies=0.1)
    return whole, parts, truths


@pytest.fixture(scope="module")
def job(spark, capture, tmp_path_factory) -> JobOutput:
    _whole, parts, _truths = capture
    return run_job(spark, parts, tmp_path_factory.mktemp("job"))


@pytest.fixture(scope="module")
def reference(capture) -> dict[tuple[str, int], tuple[bytes, bytes]]:
    whole, _parts, truths = capture
    return tshark_streams(whole, len(truths))


def _missing(ranges: list[tuple[int, int]], lo: int, hi: int) -> bool:
    return any(off < hi and lo < off + size for off, size in ranges)


def check_frames(frames: list[dict], beats: list[dict], stream: bytes, complete: bool) -> None:
    """Frames and heart-beats are byte ranges of `stream` that decode to their rows and tile it
    from 0 without a hole: all of it when `complete`, else up to a last frame cut by its end."""
    covered = sorted(
        [(f["stream_offset"], f["stream_offset"] + f["frame_length"], f) for f in frames]
        + [(b["stream_offset"], b["stream_offset"] + 1, None) for b in beats],
        key=lambda item: item[0],
    )
    position = 0
    for start, end, frame in covered:
        if end > len(stream):
            break
        between = stream[position:start]
        assert start >= position and not between.strip(b"\r\n"), f"[{position}, {start}) lost"
        raw = stream[start:end]
        if frame is None:
            assert raw in (b"\n", b"\r")
        else:
            assert raw.startswith(frame["command"].encode() + b"\n")
            body = frame["body"] or b""
            assert raw.rstrip(b"\r\n").endswith(body + b"\x00")
            assert frame["body_length"] == len(body)
            if body:
                assert frame["body_sha256"] == hashlib.sha256(body).hexdigest()
        position = end
    rest = stream[position:].lstrip(b"\r\n")
    if complete:
        assert not rest, "the frames stop short of the stream's end"
    else:
        assert not _holds_a_frame(rest), "a whole frame before the hole is missing"


def _holds_a_frame(data: bytes) -> bool:
    head_end = data.find(b"\n\n")
    if head_end < 0:
        return False
    lengths = [line for line in data[:head_end].split(b"\n") if line.startswith(b"content-length:")]
    if not lengths:
        return data.find(b"\x00", head_end) >= 0
    return len(data) > head_end + 2 + int(lengths[0].split(b":")[1])


# --- tests: pure functions ---------------------------------------------------------------------


def test_output_schema_has_the_state_and_file_columns_and_no_table_rows() -> None:
    schema = output_schema()
    assert schema.names[:2] == ["kind", "flow_key"]
    assert not set(schemas.TABLES) & set(schema.names)
    assert schema.field("state").type == pa.binary()
    assert schema.field("path").type == pa.string() and schema.field("rows").type == pa.int64()


def test_a_pass_without_a_staging_folder_for_every_table_is_refused(tmp_path) -> None:
    config = staged_config([], tmp_path)
    no_frames = tuple((table, folder) for table, folder in config.table_dirs if table != "frames")
    with pytest.raises(ValueError, match="staging folder for frames$"):
        next(run_partition([], replace(config, table_dirs=no_frames)))
    with pytest.raises(ValueError, match="staging folder"):
        flow_pass(None, None, FlowPassConfig(()), PARTITIONS)  # type: ignore[arg-type]


def _sorted_packets(paths: list[str], split_bytes: int = 1 << 30) -> pa.Table:
    """Flow pieces sorted as `flow_pass` sorts them."""
    batches = []
    for file_id, path in enumerate(paths):
        for split in split_capture(path, split_bytes):
            batches += list(read_split(file_id, split, piece_packets=5))
    table = pa.Table.from_batches(batches)
    table = table.filter(pc.equal(table["record_type"], "piece"))
    order = [("flow_key", "ascending"), ("ts_ns", "ascending"), ("file_id", "ascending")]
    return table.sort_by([*order, ("record_offset", "ascending")])


def _read_file(config: FlowPassConfig, table: str, path: str) -> list[dict]:
    """One file the pass wrote, in the table's stored schema, with the partition columns its
    folders hold."""
    folder = config.table_folders()[table]
    spec = schemas.load(table)
    partition = pa.schema([spec.arrow_schema().field(name) for name in spec.partition_by])
    found = ds.dataset(
        [f"{folder}/{path}"],
        partitioning=ds.partitioning(partition, flavor="hive"),
        partition_base_dir=folder,
    )
    assert found.schema == pa.unify_schemas([file_schema(table), partition])
    return found.to_table().to_pylist()


def _kinds(config: FlowPassConfig, batches: Iterator[pa.RecordBatch]) -> dict[str, list]:
    """Table rows (read back from the files the pass wrote) by table, and states."""
    out: dict[str, list] = defaultdict(list)
    for batch in batches:
        assert batch.schema == output_schema()
        for row in batch.to_pylist():
            if row["kind"] == STATE_KIND:
                out[STATE_KIND].append(row["state"])
            elif row["kind"] == FILE_KIND:
                rows = _read_file(config, row["table"], row["path"])
                assert len(rows) == row["rows"]
                out[row["table"]] += rows
    return out


def test_run_partition_output_does_not_depend_on_input_or_output_batching(
    tmp_path, monkeypatch
) -> None:
    convs = [g.stomp_conversation(i, messages=6, body_size=500) for i in range(3)]
    capture = g.generate(convs, MESSY)
    path = str(g.write_pcap(tmp_path / "c.pcap", capture.packets))
    table = _sorted_packets([path])
    config = staged_config([path], tmp_path / "whole", options=OPTIONS, close_open=True)
    whole = _kinds(config, run_partition(table.to_batches(), config))
    monkeypatch.setattr("pipeline.spark.flows.OUTPUT_BATCH_ROWS", 3)
    monkeypatch.setattr("pipeline.spark.flows.COLLECT_PACKETS", 2)
    handed: list[int] = []  # rows per hand-over to the writer: held rows stay bounded
    add = TableFileWriter.add

    def counted_add(self: TableFileWriter, table: str, rows: list) -> None:
        handed.append(len(rows))
        add(self, table, rows)

    monkeypatch.setattr(TableFileWriter, "add", counted_add)
    config = replace(config, table_dirs=staged_config([], tmp_path / "small").table_dirs)
    small = _kinds(config, run_partition(table.to_batches(max_chunksize=7), config))
    assert {k: len(v) for k, v in small.items()} == {k: len(v) for k, v in whole.items()}
    assert small == whole
    # whole pieces (a piece here is 5 packets, a batch 7 pieces) would hand over dozens at once
    assert len(handed) > 20 and max(handed) <= 3 + 4
    assert len(whole["sessions"]) == 3 and len(whole["frames"]) == 3 * (3 + 2 * 6 + 2)


def test_run_partition_carries_open_connections_and_resumes_them(tmp_path) -> None:
    conv = g.stomp_conversation(0, messages=6, body_size=500)
    packets = g.generate([conv]).packets
    first = str(g.write_pcap(tmp_path / "a.pcap", packets[: len(packets) // 2]))
    second = str(g.write_pcap(tmp_path / "b.pcap", packets[len(packets) // 2 :]))
    config = staged_config([first], tmp_path / "first")
    carried = _kinds(config, run_partition(_sorted_packets([first]).to_batches(), config))
    assert "sessions" not in carried and len(carried[STATE_KIND]) == 1

    rest = _sorted_packets([second])
    state_row = pa.table(
        {
            "record_type": ["state"],
            "flow_key": [rest["flow_key"][0].as_py()],
            "state": [carried[STATE_KIND][0]],
        }
    )
    rest = pa.concat_tables([state_row, rest.select(rest.column_names)], promote_options="default")
    config = staged_config([second], tmp_path / "second", close_open=True)
    resumed = _kinds(config, run_partition(rest.to_batches(), config))
    frames = carried["frames"] + resumed["frames"]
    assert [f["command"] for f in frames if f["direction"] == "c2s"] == (
        ["CONNECT", "SUBSCRIBE"] + ["SEND"] * 6 + ["DISCONNECT"]
    )
    (session,) = resumed["sessions"]
    assert session["c2s_bytes"] == len(g.stream_bytes(conv, True))
    assert session["end_reason"] not in (None, "capture_end")


# --- tests: the Spark pass against tshark ------------------------------------------------------


def test_every_connection_is_one_session_with_its_captured_bytes(job, capture) -> None:
    _whole, _parts, truths = capture
    sessions = job.sessions_by_port()
    assert len(job.tables["sessions"]) == len(truths)
    for port, (name, truth) in truths.items():
        row = sessions[port]
        for direction, side in (("c2s", truth.client_to_server), ("s2c", truth.server_to_client)):
            lost = sum(size for _off, size in side.dropped)
            assert row[f"{direction}_bytes"] == len(side.data) - lost, (name, direction)


@needs_tshark
@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_frames_cut_the_streams_tshark_rebuilds(job, capture, reference, case) -> None:
    _whole, _parts, truths = capture
    port, truth = next((p, t) for p, (n, t) in truths.items() if n == case)
    session = job.sessions_by_port()[port]
    theirs = reference[(truth.client[0], port)]
    for direction, index in (("c2s", 0), ("s2c", 1)):
        side = truth.client_to_server if direction == "c2s" else truth.server_to_client
        first_hole = side.dropped[0][0] if side.dropped else len(side.data)
        tshark = theirs[index]
        assert tshark == side.data[: len(tshark)], "tshark disagrees with the generator"
        if not side.dropped:
            assert tshark == side.data  # tshark has the whole stream: it is the reference
        frames = job.rows("frames", session["session_id"], direction)
        beats = job.rows("heartbeats", session["session_id"], direction)
        check_frames(frames, beats, tshark[:first_hole], complete=not side.dropped)
        for frame in frames:  # past a hole tshark has nothing: the generator's bytes decide
            lo, hi = frame["stream_offset"], frame["stream_offset"] + frame["frame_length"]
            assert not _missing(side.dropped, lo, hi), "a frame spans bytes never captured"
            assert side.data[lo:hi].startswith(frame["command"].encode() + b"\n")
            assert side.data[lo:hi].rstrip(b"\r\n").endswith((frame["body"] or b"") + b"\x00")
        if not side.dropped:
            assert len(frames) == FRAMES[direction]


def _ranges(rows: list[dict], kind: str, direction: str) -> list[tuple[int, int]]:
    found = []
    for row in rows:
        if row["kind"] == kind and row["direction"] == direction:
            found.append((row["stream_offset"], int(row["detail"].split()[0])))
    return g._merge(found)


def _conflict_spans(
    rows: list[dict], direction: str, *, merge: bool = False
) -> list[tuple[int, int]]:
    spans = []
    for row in rows:
        if row["kind"] == "conflict" and row["direction"] == direction:
            size = int(row["detail"].split("of ")[1].split()[0])
            spans.append((row["stream_offset"], size))
    return g._merge(spans) if merge else spans


def test_every_hole_and_conflict_is_on_record(job, capture) -> None:
    _whole, _parts, truths = capture
    sessions = job.sessions_by_port()
    for port, (name, truth) in truths.items():
        session = sessions[port]
        anomalies = job.rows("anomalies", session["session_id"])
        lost = reported = 0
        for direction, side in (("c2s", truth.client_to_server), ("s2c", truth.server_to_client)):
            assert _ranges(anomalies, "gap", direction) == side.dropped, (name, direction)
            assert _conflict_spans(anomalies, direction, merge=True) == side.conflicts, name
            lost += sum(size for _o, size in side.dropped)
            reported += sum(size for _o, size in _conflict_spans(anomalies, direction))
        assert session["gap_bytes"] == lost, name
        # a re-sent segment captured twice (its record is in two files) disagrees twice
        assert session["conflict_bytes"] == reported, name
        if name.startswith("clean"):
            assert lost == reported == 0 and not anomalies


def test_the_listing_order_of_the_files_changes_nothing(spark, job, capture, tmp_path) -> None:
    _whole, parts, _truths = capture
    again = run_job(spark, list(reversed(parts)), tmp_path)

    def frames(output: JobOutput) -> list[tuple]:
        return sorted(
            (f["session_id"], f["direction"], f["stream_offset"], f["command"], f["body_sha256"])
            for f in output.tables["frames"]
        )

    assert frames(again) == frames(job)
    assert len(again.tables["anomalies"]) == len(job.tables["anomalies"])


def test_flows_placed_by_hash_ranges_make_the_tables_hashing_makes(
    spark, job, capture, tmp_path
) -> None:
    _whole, parts, _truths = capture
    names = [str(p) for p in parts]
    packets = packets_frame(spark, names)
    summary = capture_summary(packets)
    cuts = ranges(summary.flow_weights, summary.stats["tcp_packets"], PARTITIONS)
    config = staged_config(names, tmp_path, options=OPTIONS, close_open=True)
    tables = read_back(spark, config, flow_pass(packets, None, config, PARTITIONS, cuts=cuts))
    for name, frame in tables.items():
        placed = sorted(repr(sorted(r.asDict().items())) for r in frame.collect())
        hashed = sorted(repr(sorted(r.items())) for r in job.tables[name])
        assert placed == hashed, name


def test_the_pass_writes_each_table_with_its_columns_and_the_batch(
    spark, capture, tmp_path
) -> None:
    _whole, parts, _truths = capture
    names = [str(parts[0])]
    config = staged_config(names, tmp_path, batch_id="batch-7")
    tables = read_back(spark, config, flow_pass(packets_frame(spark, names), None, config, 2))
    assert set(tables) == set(schemas.TABLES)
    assert tables["sessions"].count() > 0 and tables["frames"].count() > 0
    for name, frame in tables.items():
        assert frame.columns == list(schemas.load(name).column_names)
        assert {r.batch_id for r in frame.select("batch_id").distinct().collect()} <= {"batch-7"}
    for stored in Path(config.table_folders()["frames"]).rglob("*.parquet"):
        assert ds.dataset(stored).schema == file_schema("frames")


def test_a_pass_resumed_from_carried_state_equals_one_pass(spark, tmp_path) -> None:
    from pyspark.sql import functions as F

    convs = [g.stomp_conversation(i, messages=8, body_size=700) for i in range(4)]
    whole = g.write_pcap(tmp_path / "w.pcap", g.generate(convs, MESSY).packets)
    first, second = (str(p) for p in split_by_time(whole, tmp_path / "parts"))

    def frames(tables: dict) -> list[tuple]:
        rows = tables["frames"].collect()
        return [(r.session_id, r.direction, r.stream_offset, r.command) for r in rows]

    everything = staged_config([str(whole)], tmp_path / "one", close_open=True)
    one = read_back(
        spark, everything, flow_pass(packets_frame(spark, [str(whole)]), None, everything, 2)
    )
    config1 = staged_config([first], tmp_path / "part1")
    output1 = flow_pass(packets_frame(spark, [first]), None, config1, 2).persist()
    part1 = read_back(spark, config1, output1)
    state = output1.where(F.col("kind") == STATE_KIND).select(
        F.lit("state").alias("record_type"), "flow_key", "state"
    )
    assert state.count() > 0  # some connections were still open half way
    config2 = staged_config([second], tmp_path / "part2", close_open=True)
    part2 = read_back(spark, config2, flow_pass(packets_frame(spark, [second]), state, config2, 2))
    assert sorted(frames(part1) + frames(part2)) == sorted(frames(one))
    sessions = [row.client_port for part in (part1, part2) for row in part["sessions"].collect()]
    assert sorted(sessions) == [40000 + i for i in range(len(convs))]
    output1.unpersist()


def test_differently_shuffled_copies_of_a_connection_give_the_same_frames(spark, tmp_path) -> None:
    conv = g.stomp_conversation(3, messages=12, body_size=2_500)
    packets = []
    for seed in range(4):  # the same bytes from another client port, perturbed another way
        copy = replace(conv, client=(conv.client[0], 41_000 + seed))
        shuffled = g.Perturbation(shuffle=12, duplicate=0.3, keepalive=0.2, seed=seed)
        packets.append(g.generate([copy], shuffled).packets)
    whole = g.write_pcap(tmp_path / "w.pcap", list(heapq.merge(*packets, key=lambda p: p.ts_ns)))
    parts = scatter(whole, tmp_path / "parts", 3, seed=9, copies=0.2)
    output = run_job(spark, parts, tmp_path / "staging")
    by_session: dict[str, list] = defaultdict(list)
    for f in output.tables["frames"]:
        by_session[f["session_id"]].append((f["direction"], f["stream_offset"], f["body_sha256"]))
    assert len(by_session) == 4
    assert len({tuple(sorted(frames)) for frames in by_session.values()}) == 1
    for session in output.tables["sessions"]:
        assert session["gap_bytes"] == session["conflict_bytes"] == 0


def _offline_ways(paths: list[str], monkeypatch: pytest.MonkeyPatch) -> list[OfflineResult]:
    """The pass without Spark three ways: with runs of in-order packets as they come, with
    runs cut every two packets, and packet by packet (no run ever starts)."""
    results = [run_offline(paths)]
    with monkeypatch.context() as patch:
        patch.setattr("pipeline.spark.flows.RUN_PACKETS", 2)
        results.append(run_offline(paths))
    with monkeypatch.context() as patch:
        patch.setattr("pipeline.spark.flows.ConnectionDriver", _PacketByPacket)
        results.append(run_offline(paths))
    return results


class _PacketByPacket(ConnectionDriver):
    """A driver that never starts a run (an extension type: patched by subclassing)."""

    def in_order_position(self, src_ip: str, src_port: int) -> tuple[int, int] | None:
        return None


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_runs_of_in_order_packets_make_the_tables_packets_one_by_one_make(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, short_runs, one_by_one = _offline_ways([str(path)], monkeypatch)
    assert runs.tables == one_by_one.tables
    assert short_runs.tables == one_by_one.tables


SPARSE = g.Perturbation(shuffle=2, duplicate=0.04, overlap=0.04, drop=0.02, seed=3)


@pytest.mark.parametrize("case", [*CASES, Case("sparse", SPARSE, {})], ids=lambda c: c.name)
def test_runs_of_in_order_packets_on_perturbed_streams(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shuffled, duplicated, overlapping and lost segments and keep-alives between the runs,
    with acks riding in both directions (small segments make long runs)."""
    perturbation = replace(case.perturbation, keepalive=0.05)
    options = {"mss": 700, **case.options}
    convs = [g.stomp_conversation(i, messages=8, body_size=2500, **options) for i in range(2)]
    path = g.write_pcap(tmp_path / "c.pcap", g.generate(convs, perturbation).packets)
    runs, short_runs, one_by_one = _offline_ways([str(path)], monkeypatch)
    assert runs.tables == one_by_one.tables
    assert short_runs.tables == one_by_one.tables
    if not perturbation.drop:
        assert len(one_by_one.tables["frames"]) == 2 * (3 + 2 * 8 + 2)
