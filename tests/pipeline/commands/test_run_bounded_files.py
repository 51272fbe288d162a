"""Bounded output files per batch: the real `stomp-lake run` over 10,000 SYN-only flows spread
over 1,000 dates writes at most a few Parquet files per date: each flow-pass task writes one
file per table and date it has rows for (rows grouped by partition value as they are written)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pipeline.ingest.records import SYN
from tests.support import pcapgen as g
from tests.support.paths import REPO

pytestmark = pytest.mark.spark

DAYS = 1_000
FLOWS = 10_000
DAY_NS = 86_400 * 10**9
TASKS = 2 * (os.cpu_count() or 1)  # the flow pass's tasks on local[*]: 2 x cores
FILES_PER_DATE = TASKS  # per table: one per task holding rows of that date


def _syn_only_flows(path: Path) -> None:
    packets = []
    for i in range(FLOWS):
        ts = g.DEFAULT_START_NS + (i % DAYS) * DAY_NS + i * 1_000
        client = (f"10.{i // 60_000}.{(i // 250) % 240}.{i % 250 + 1}", 20_000 + i % 30_000)
        tcp = g.tcp_segment(client[1], 61613, 1_000 + i, 0, SYN, b"")
        ip, ethertype = g.ip_datagram(client[0], "10.200.0.1", tcp, i)
        packets.append(g.SynthPacket(ts, ip, ethertype))
    packets.sort(key=lambda p: p.ts_ns)
    g.write_pcap(path, packets, linktype=g.LINKTYPE_RAW, nanos=True)


def test_a_batch_over_a_thousand_dates_writes_a_few_files_per_date(tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    _syn_only_flows(inbox / "syn.pcap")
    lake = tmp_path / "lake"
    env = dict(os.environ, PYTHONPATH=str(REPO), STOMP_LAKE_WORK=str(tmp_path / "work"))
    command = [sys.executable, "-m", "pipeline.cli", "run", "--input", str(inbox)]
    command += ["--lake", str(lake), "--open-connections", "close", "--no-validate"]
    done = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    per_table_date: Counter[tuple[str, str]] = Counter()
    for parquet in (lake / "tables").rglob("*.parquet"):
        table = parquet.relative_to(lake / "tables").parts[0]
        per_table_date[table, parquet.parent.name] += 1
    dates = {date for _, date in per_table_date}
    assert len(dates) == DAYS
    sessions = sum(n for (t, _), n in per_table_date.items() if t == "sessions")
    assert DAYS <= sessions <= FILES_PER_DATE * DAYS
    assert max(per_table_date.values()) <= FILES_PER_DATE, per_table_date.most_common(3)
    per_date = Counter(date for _, date in per_table_date.elements())
    assert max(per_date.values()) <= 3 * FILES_PER_DATE  # sessions and a couple of other tables
