"""A batch that fails validation end to end: `run` quarantines it and moves on; the
`stomp-lake quarantine` command lists, shows, releases and discards it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import schemas
from pipeline.cli import main
from pipeline.lake import Lake, Ledger, list_tables, pending_batch, read_table
from pipeline.lake.staging import MOVED_RECORD
from pipeline.runner import RunConfig, run
from pipeline.session import ModelOptions
from pipeline.stomp import encode_frame
from pipeline.validation.gate import ValidationFailed
from pipeline.validation.quarantine import BatchQuarantined, list_quarantined
from pipeline.validation.suites import SUITES_DIR_VARIABLE
from tests.support.damaged_lake import garble_batch_counter
from tests.support.paths import SAMPLES
from tests.support.pcapgen import DEFAULT_START_NS, Chunk, Conversation, generate, write_pcap

pytestmark = pytest.mark.spark

SAMPLE = SAMPLES / "activemq-heartbeat-v10.pcap"
IMPOSSIBLE = {
    "name": "sessions",
    "expectations": [
        {"type": "expect_column_values_to_be_null", "kwargs": {"column": "session_id"}}
    ],
}


@pytest.fixture(scope="module")
def quarantined(spark, tmp_path_factory) -> tuple[Lake, str]:
    """A lake whose only batch failed a (deliberately impossible) sessions suite."""
    suites = tmp_path_factory.mktemp("suites")
    (suites / "sessions.json").write_text(json.dumps(IMPOSSIBLE))
    lake = Lake(tmp_path_factory.mktemp("lake"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SUITES_DIR_VARIABLE, str(suites))
        with pytest.raises(ValidationFailed) as caught:
            run(
                RunConfig(inputs=[SAMPLE], lake=lake.root, batch_id="b-bad", close_open=True),
                progress=lambda _: None,
            )
    assert "session_id" in str(caught.value)
    return lake, "b-bad"


def test_a_failed_batch_commits_nothing_and_lets_later_batches_go_on(quarantined) -> None:
    lake, batch_id = quarantined
    assert [t.name for t in list_tables(lake)] == []
    assert pending_batch(lake) is None
    assert Ledger(lake).is_recorded(batch_id)
    [batch] = list_quarantined(lake)
    assert batch.batch_id == batch_id and not batch.released
    assert any("sessions" in failure for failure in batch.failed)


def test_the_staged_files_were_moved_into_the_quarantine(quarantined) -> None:
    lake, batch_id = quarantined
    folder = lake.quarantine_dir / batch_id
    for table in schemas.TABLES:  # each staged table: its files and their record, moved
        assert (folder / table / MOVED_RECORD).is_file(), table
        assert not list(lake.table_path(table).rglob("*.parquet")), table
    moved = list((folder / "frames").rglob("*.parquet"))
    assert moved and all(path.stat().st_nlink == 1 for path in moved)


def test_asking_again_for_a_quarantined_batch_is_an_error(quarantined) -> None:
    lake, batch_id = quarantined
    with pytest.raises(BatchQuarantined, match="quarantine"):
        run(RunConfig(inputs=[SAMPLE], lake=lake.root, batch_id=batch_id), progress=print)
    assert main(["run", "--input", str(SAMPLE), "--lake", str(lake.root),
                 "--batch-id", batch_id]) == 4  # fmt: skip


def test_release_refuses_a_damaged_lake(quarantined, tmp_path: Path, capsys) -> None:
    lake, batch_id = quarantined
    copy = Lake(tmp_path / "lake")
    shutil.copytree(lake.root, copy.root)
    garble_batch_counter(copy)
    assert main(["quarantine", "--lake", str(copy.root), "--release", batch_id]) == 5
    assert "batch-counter.json" in capsys.readouterr().err
    assert not list_quarantined(copy)[0].released
    assert [t.name for t in list_tables(copy)] == []


def test_list_show_release_then_release_again(spark, quarantined, capsys) -> None:
    lake, batch_id = quarantined
    assert main(["quarantine", "--lake", str(lake.root)]) == 0
    listed = capsys.readouterr().out
    assert batch_id in listed and "awaiting review" in listed

    assert main(["quarantine", "--lake", str(lake.root), "--show", batch_id]) == 0
    assert "expect_column_values_to_be_null" in capsys.readouterr().out

    assert main(["quarantine", "--lake", str(lake.root), "--release", batch_id]) == 0
    assert f"released batch {batch_id}" in capsys.readouterr().out
    sessions = read_table(spark, lake, "sessions")
    assert sessions.count() == 3 and {r.batch_id for r in sessions.collect()} == {batch_id}
    assert {t.name for t in list_tables(lake)} == set(schemas.TABLES)

    assert main(["quarantine", "--lake", str(lake.root), "--release", batch_id]) == 2
    assert "no quarantined batch" in capsys.readouterr().err
    assert list_quarantined(lake)[0].released


def test_discard_removes_it_and_unknown_batches_are_refused(tmp_path: Path, capsys) -> None:
    lake = Lake(tmp_path / "lake").ensure()
    assert main(["quarantine", "--lake", str(lake.root)]) == 0
    assert "no quarantined batches" in capsys.readouterr().out
    assert main(["quarantine", "--lake", str(lake.root), "--discard", "nope"]) == 2
    folder = lake.quarantine_dir / "b1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"failures": []}))
    assert main(["quarantine", "--lake", str(lake.root), "--discard", "b1"]) == 0
    assert not folder.exists()


def _stomp(command: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
    return encode_frame(command, headers, body, version="1.2") + b"\n"


def _misbehaving_conversation(start_ns: int, port: int, *, closed: bool) -> Conversation:
    """A client-individual consumer that falls far behind in its ACKs, on a broker that
    delivers one message-id twice."""
    chunks = [
        Chunk(True, _stomp("CONNECT", [("accept-version", "1.2"), ("host", "/")])),
        Chunk(False, _stomp("CONNECTED", [("version", "1.2")])),
        Chunk(True, _stomp("SUBSCRIBE", [("id", "0"), ("destination", "/q/a"),
                                         ("ack", "client-individual")])),  # fmt: skip
    ]
    for n in range(30):
        message_id = "m-7" if n == 8 else f"m-{n}"  # m-7 delivered twice
        headers = [("subscription", "0"), ("message-id", message_id), ("destination", "/q/a"),
                   ("ack", f"a-{n}")]  # fmt: skip
        chunks.append(Chunk(False, _stomp("MESSAGE", headers, b"x")))
    chunks += [Chunk(True, _stomp("ACK", [("id", f"a-{n}")])) for n in range(30)]
    if closed:
        chunks.append(Chunk(True, _stomp("DISCONNECT", [])))
    return Conversation(("10.0.0.1", port), ("10.0.0.2", 61613), chunks, start_ns=start_ns,
                        close="fin" if closed else "none")  # fmt: skip


def test_misbehaving_traffic_back_filled_while_a_later_connection_is_carried_is_committed(
    spark, tmp_path: Path
) -> None:
    """Older captures back-filled with --open-connections close while a later capture's
    connection is carried; the traffic delivers a message-id twice and its consumer lags past
    max_pending_messages. All of it is data: the batch is committed, nothing quarantined."""
    later = tmp_path / "later" / "later.pcap"
    later.parent.mkdir()
    day = 86_400 * 10**9
    write_pcap(later, generate([_misbehaving_conversation(DEFAULT_START_NS + day, 40001,
                                                          closed=False)]).packets)  # fmt: skip
    older = tmp_path / "older" / "older.pcap"
    older.parent.mkdir()
    write_pcap(older, generate([_misbehaving_conversation(DEFAULT_START_NS, 40002,
                                                          closed=True)]).packets)  # fmt: skip
    lake = Lake(tmp_path / "lake")
    options = ModelOptions(max_pending_messages=5)
    first = run(RunConfig(inputs=[later], lake=lake.root, options=options), progress=print)
    assert first.counts["open_connections"] == 1
    second = run(
        RunConfig(inputs=[older], lake=lake.root, options=options, close_open=True),
        progress=print,
    )
    assert second.validation is not None and second.validation.success
    assert list_quarantined(lake) == []
    sessions = read_table(spark, lake, "sessions").collect()
    assert len(sessions) == 2  # the older one and the carried one, closed at capture end
    kinds = [r.kind for r in read_table(spark, lake, "anomalies").collect()]
    assert kinds.count("duplicate_message_id") == 2  # once in each connection
    assert kinds.count("pending_overflow") == 2
    assert kinds.count("ack_unmatched_after_overflow") > 0
