"""`stomp-lake run` on the real sample captures, against the client-side record of each sample."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.lake import Lake, list_tables, read_table
from pipeline.runner import RunConfig, RunResult, run
from tests.support.paths import SAMPLES

pytestmark = pytest.mark.spark

VALIDATE = False  # the gate runs on the sample lake; the other runs skip it for time
EXPECTED = sorted(SAMPLES.glob("*.expected.json"))


@pytest.fixture(scope="module")
def sample_lake(spark, tmp_path_factory) -> Lake:
    root = tmp_path_factory.mktemp("lake")
    result = run(
        RunConfig(inputs=[SAMPLES], lake=root, close_open=True, validate=True),
        progress=lambda _: None,
    )
    assert result.files == len(EXPECTED)
    assert result.validation is not None and result.validation.success  # real traffic passes
    assert result.validation.docs_index is not None and result.validation.docs_index.is_file()
    assert set(result.timings) == {"spark_start", "compute", "validate", "commit"}
    return Lake(root)


def _rows(spark, lake: Lake, table: str) -> list:
    return read_table(spark, lake, table).collect()


def _by_port(spark, lake: Lake) -> dict[int, Any]:  # pyspark Rows
    return {row.client_port: row for row in _rows(spark, lake, "sessions")}


def _connections():
    for path in EXPECTED:
        record = json.loads(path.read_text())
        for conn in record["connections"]:
            yield pytest.param(conn, id=f"{record['sample']}:{conn['name']}")


@pytest.mark.parametrize("conn", list(_connections()))
def test_each_connection_matches_the_client_record(spark, sample_lake, conn) -> None:
    session = _by_port(spark, sample_lake)[conn["client_port"]]
    sid = session.session_id
    assert session.transport == conn.get("transport", "tcp")
    if session.transport == "websocket":  # the upgrade as the client sent it, accepted
        assert session.ws_status == 101
        assert session.ws_path == conn["ws_path"]
        assert session.ws_origin == conn["ws_origin"]
        assert session.ws_user_agent == conn["ws_user_agent"]
    if conn["connected"]:
        assert session.version == conn["version"]
        effective = conn["heart_beat_effective"]
        assert session.heartbeat_c2s_ms == effective["client_to_server_ms"]
        assert session.heartbeat_s2c_ms == effective["server_to_client_ms"]
    assert session.login == conn["login"]
    assert session.connect_command == conn["connect_command"]

    frames = [f for f in _rows(spark, sample_lake, "frames") if f.session_id == sid]
    sent = Counter(f.command for f in frames if f.direction == "c2s")
    received = Counter(f.command for f in frames if f.direction == "s2c")
    assert sent == Counter(conn["frames_sent"])
    assert received == Counter(conn["frames_received"])

    beats = Counter(
        h.direction for h in _rows(spark, sample_lake, "heartbeats") if h.session_id == sid
    )
    assert beats["c2s"] == conn["heart_beats_sent"]
    assert beats["s2c"] == conn["heart_beats_received"]

    messages = [m for m in _rows(spark, sample_lake, "messages") if m.session_id == sid]
    delivered = sorted(m.message_id for m in messages if m.command == "MESSAGE")
    assert delivered == sorted(conn["message_ids_received"])

    acks = [a for a in _rows(spark, sample_lake, "acks") if a.session_id == sid]
    assert sorted(a.ack_id for a in acks if a.command == "ACK") == sorted(conn["ack_ids_sent"])
    assert sorted(a.ack_id for a in acks if a.command == "NACK") == sorted(conn["nack_ids_sent"])

    receipts = [r for r in _rows(spark, sample_lake, "receipts") if r.session_id == sid]
    receipted = {r.receipt_id for r in receipts if r.outcome == "receipt"}
    if conn["ending"] == "open":  # the client's record goes on after the capture stopped
        assert receipted <= set(conn["receipts_received"])
        return
    assert receipted == set(conn["receipts_received"])
    assert {r.receipt_id for r in receipts} == set(conn["receipts_requested"])
    answered_by_error = {r.receipt_id for r in receipts if r.outcome == "error"}
    assert answered_by_error == {
        e["receipt_id"] for e in conn["errors_received"] if e["receipt_id"]
    }


def test_passcodes_never_reach_the_tables(spark, sample_lake) -> None:
    for frame in _rows(spark, sample_lake, "frames"):
        for name, value in frame.header_list:
            if name == "passcode":
                assert value == "***"


def test_a_rerun_adds_nothing(spark, sample_lake) -> None:
    before = {t.name: (t.version, t.rows) for t in list_tables(sample_lake)}
    result = run(
        RunConfig(inputs=[SAMPLES], lake=sample_lake.root, validate=VALIDATE),
        progress=lambda _: None,
    )
    assert result.batch_id is None
    assert {t.name: (t.version, t.rows) for t in list_tables(sample_lake)} == before


def _table_contents(spark, lake: Lake, table: str) -> list[tuple]:
    frame = read_table(spark, lake, table).drop("batch_id")
    return sorted(tuple(str(v) for v in row) for row in frame.collect())


def _one_run_and_two(
    tmp_path: Path,
    whole_input: Path,
    first: Path,
    second: Path,
    between: Callable[[Lake, RunResult], None],
    **options: Any,
) -> tuple[Lake, Lake]:
    """A lake of one run over ``whole_input``, and one of a run over ``first`` (connections
    still open carried; validated: rows of connections still open must count as known
    sessions), looked at with ``between``, then one over ``second`` as well."""
    whole = Lake(tmp_path / "whole")
    run(
        RunConfig(inputs=[whole_input], lake=whole.root, close_open=True, **options),
        progress=lambda _: None,
    )
    parts = Lake(tmp_path / "parts-lake")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(first, inbox)
    carried = run(
        RunConfig(inputs=[inbox], lake=parts.root, **{**options, "validate": True}),
        progress=lambda _: None,
    )
    between(parts, carried)
    shutil.copy(second, inbox)
    run(
        RunConfig(inputs=[inbox], lake=parts.root, close_open=True, **options),
        progress=lambda _: None,
    )
    return whole, parts


def test_connections_split_across_two_runs_equal_one_run(spark, tmp_path) -> None:
    from tests.support.split_capture import split_by_time

    source = SAMPLES / "activemq-heartbeat-v10.pcap"
    first, second = split_by_time(source, tmp_path / "parts")

    def carried(_lake: Lake, result: RunResult) -> None:
        assert result.counts["sessions"] < 3  # connections still open were carried, not ended

    whole, parts = _one_run_and_two(tmp_path, source, first, second, carried, validate=VALIDATE)
    for table in ("sessions", "frames", "heartbeats", "messages", "acks", "receipts"):
        assert _table_contents(spark, parts, table) == _table_contents(spark, whole, table), table


def test_a_lagging_consumer_carried_with_its_spilled_messages_equals_one_run(
    spark, tmp_path
) -> None:
    # the state carried between the runs holds the spilled rows in a row of their own, which
    # must follow the pickle's row through Spark's write, read and sort
    from pipeline.session import ModelOptions
    from tests.support import pcapgen as g

    chunks = [
        g.Chunk(True, b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"),
        g.Chunk(False, b"CONNECTED\nversion:1.2\n\n\x00"),
        g.Chunk(True, b"SUBSCRIBE\nid:0\ndestination:/queue/a\nack:client-individual\n\n\x00"),
    ]
    for n in range(400):  # acked 300 MESSAGEs late, the last 100 never
        message = b"MESSAGE\nsubscription:0\nmessage-id:m%d\nack:a%d\n\n%d\x00" % (n, n, n)
        chunks.append(g.Chunk(False, message))
        if n >= 300:
            chunks.append(g.Chunk(True, b"ACK\nid:a%d\n\n\x00" % (n - 300)))
    talk = g.Conversation(("10.0.0.1", 40000), ("10.1.0.1", 61613), chunks)
    packets = g.generate([talk]).packets

    def carried(lake: Lake, result: RunResult) -> None:
        assert result.counts["sessions"] == 0
        state = spark.read.parquet(str(lake.state_dir / "connections" / str(result.batch_id)))
        offsets = sorted(row.record_offset for row in state.collect())
        assert offsets == [0, 1]  # the pickle, then the rows

    whole, parts = _one_run_and_two(
        tmp_path,
        g.write_pcap(tmp_path / "whole.pcap", packets),
        g.write_pcap(tmp_path / "a.pcap", packets[: len(packets) // 2]),
        g.write_pcap(tmp_path / "b.pcap", packets[len(packets) // 2 :]),
        carried,
        options=ModelOptions(max_pending_in_memory=20),
        validate=VALIDATE,
    )
    for table in ("sessions", "frames", "messages", "acks", "subscriptions", "anomalies"):
        assert _table_contents(spark, parts, table) == _table_contents(spark, whole, table), table
    assert len(_table_contents(spark, whole, "messages")) == 400


def test_summary_counts_frames_by_direction_and_command(tmp_path) -> None:
    from pipeline.commands.run import format_summary
    from pipeline.runner import RunResult

    counts = {
        "sessions": 1,
        "frames": 7,
        "messages": 3,
        "acks": 1,
        "heartbeats": 0,
        "violations": 0,
        "gap_bytes": 0,
        "anomalies": 0,
        "errors": 0,
        "frames_by_command": {"c2s SEND": 3, "s2c RECEIPT": 2, "c2s GET": 1, "c2s \x16\x03": 1},
    }
    summary = format_summary(RunResult("b-1", 1, counts, 1.0), tmp_path)
    line = next(line for line in summary.splitlines() if "frames by command" in line)
    assert line.endswith("c2s SEND 3, c2s other 2, s2c RECEIPT 2")
    assert "captured from" not in summary  # no TCP packets, no capture window

    counts.update(
        capture_first_ns=1_763_700_000_000_000_000, capture_last_ns=1_763_700_061_500_000_000
    )
    summary = format_summary(RunResult("b-1", 1, counts, 1.0), tmp_path)
    assert (
        "  captured from 2025-11-21T04:40:00.000000Z to 2025-11-21T04:41:01.500000Z"
        in summary.splitlines()
    )
