"""pipeline/spark/packet_loop.py and its compiled twin `_packet_loop.pyx`: the same calls into
the connection driver, in the same order with the same arguments, and so the same tables, on
every capture the repository holds, on perturbed synthetic streams (out of order, re-sent,
overlapping, lost, keep-alives, sequence numbers that wrap), with short runs, and on capture
files cut short after the capture pass read them (payloads then read short)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import schemas
from pipeline.driver import ConnectionDriver
from pipeline.ingest import split_capture
from pipeline.session.rows import TableRow
from pipeline.spark.captures import read_split
from pipeline.spark.flows import STATE_KIND, FlowPassConfig, FlowRunner
from pipeline.spark.packet_loop import feed_packets, packet_loop
from tests.pipeline.spark.test_flows import CASES, SPARSE, Case
from tests.support import pcapgen as g
from tests.support.flow_rows import SunkRows
from tests.support.paths import REPO, REPO_CAPTURES

CALLS = ("bare_ack", "takes_bare_ack", "in_order_position", "data_run", "packet")


class RecordingDriver(ConnectionDriver):
    """A connection driver that notes every call the loop makes, and what it answered."""

    calls: list[tuple[Any, ...]]

    def __getattribute__(self, name: str) -> Any:
        method = super().__getattribute__(name)
        if name not in CALLS:
            return method

        def noted(*args: Any) -> Any:
            answer = method(*args)
            calls = ConnectionDriver.__getattribute__(self, "calls")
            calls.append((name, *(_plain(a) for a in args), answer))
            return answer

        return noted


def _plain(value: Any) -> Any:
    return repr(value) if hasattr(value, "__slots__") or hasattr(value, "__dict__") else value


def _pieces(paths: list[str]) -> list[dict]:
    rows = []
    for file_id, path in enumerate(paths):
        for split in split_capture(path, 1 + os.path.getsize(path) // 2):
            for batch in read_split(file_id, split):
                rows += [r for r in batch.to_pylist() if r["record_type"] == "piece"]
    rows.sort(key=lambda r: (r["flow_key"], r["ts_ns"], r["file_id"], r["record_offset"]))
    return rows


def _run(
    paths: list[str], pieces: list[dict], loop: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[tuple[Any, ...]], dict[str, list[TableRow]]]:
    calls: list[tuple[Any, ...]] = []

    def driver(*args: Any) -> RecordingDriver:
        made = RecordingDriver(*args)
        made.calls = calls
        return made

    with monkeypatch.context() as patch:
        patch.setattr("pipeline.spark.flows.packet_loop", lambda: loop)
        patch.setattr("pipeline.spark.flows.ConnectionDriver", driver)
        held = SunkRows()
        runner = FlowRunner(FlowPassConfig(tuple(paths), close_open=True), held)
        if pieces:
            runner.feed_batch(pa.RecordBatch.from_pylist(pieces))
        runner.close()
    tables: dict[str, list[TableRow]] = {name: [] for name in schemas.TABLES}
    for kind, rows, _keys in held.items():
        if kind != STATE_KIND:
            tables[kind] += rows
    return calls, tables


def _both(
    paths: list[str], monkeypatch: pytest.MonkeyPatch, cut: int | None = None
) -> Iterator[tuple[list[tuple[Any, ...]], dict[str, list[TableRow]]]]:
    pieces = _pieces(paths)
    if cut is not None:
        for path in paths:
            os.truncate(path, min(cut, os.path.getsize(path)))
    compiled = packet_loop()
    assert compiled is not feed_packets, "the compiled packet loop is not built"
    yield _run(paths, pieces, compiled, monkeypatch)
    yield _run(paths, pieces, feed_packets, monkeypatch)


def _same(paths: list[str], monkeypatch: pytest.MonkeyPatch, cut: int | None = None) -> int:
    (compiled_calls, compiled_tables), (pure_calls, pure_tables) = _both(paths, monkeypatch, cut)
    assert compiled_calls == pure_calls
    assert compiled_tables == pure_tables
    return len(compiled_calls)


def test_the_compiled_loop_is_built() -> None:
    assert packet_loop() is not feed_packets


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_same_calls_and_tables_on_every_capture(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _same([str(path)], monkeypatch)


@pytest.mark.parametrize("run_packets", [1, 2, 64])
@pytest.mark.parametrize("case", [*CASES, Case("sparse", SPARSE, {})], ids=lambda c: c.name)
def test_same_calls_and_tables_on_perturbed_streams(
    case: Case, run_packets: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pipeline.spark.flows.RUN_PACKETS", run_packets)
    perturbation = replace(case.perturbation, keepalive=0.05)
    options = {"mss": 700, **case.options}
    convs = [g.stomp_conversation(i, messages=8, body_size=2500, **options) for i in range(2)]
    path = g.write_pcap(tmp_path / "c.pcap", g.generate(convs, perturbation).packets)
    calls = _same([str(path)], monkeypatch)
    assert calls > 20


@pytest.mark.parametrize("fraction", [0.3, 0.7])
def test_same_calls_and_tables_when_the_files_were_cut_after_the_capture_pass(
    fraction: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture rewritten by tcpdump's ring while the run reads it: payloads read short, or
    not at all, the same way in both loops."""
    convs = [g.stomp_conversation(i, messages=12, body_size=1800) for i in range(2)]
    path = g.write_pcap(tmp_path / "c.pcap", g.generate(convs, g.Perturbation()).packets)
    _same([str(path)], monkeypatch, cut=int(os.path.getsize(path) * fraction))


@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.93])
def test_same_calls_and_tables_on_one_long_burst_cut_short(
    fraction: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One connection's bursts of full segments lie back to back in the file, so the compiled
    loop reads them by span (`_Files.read_span`): the cut falls inside a span and payloads
    past it read short or empty, as the reference's one read per payload does."""
    convs = [g.stomp_conversation(0, messages=6, body_size=60_000, mss=1460)]
    path = g.write_pcap(tmp_path / "c.pcap", g.generate(convs, g.Perturbation()).packets)
    _same([str(path)], monkeypatch)
    _same([str(path)], monkeypatch, cut=int(os.path.getsize(path) * fraction))
