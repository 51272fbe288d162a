from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from stomp_lake_dags.captures import capture_files, closed_between, interval_batch_id

START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
END = START + timedelta(hours=1)


def _file(folder: Path, name: str, mtime: datetime) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xd4\xc3\xb2\xa1")
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


def test_only_files_closed_inside_the_interval(tmp_path: Path) -> None:
    inside = _file(tmp_path, "a.pcap", START + timedelta(minutes=5))
    nested = _file(tmp_path, "host1/b.pcapng", END - timedelta(microseconds=1))
    _file(tmp_path, "at-end.pcap", END)  # belongs to the next interval
    _file(tmp_path, "before.pcap", START - timedelta(seconds=1))
    assert closed_between(tmp_path, START, END) == sorted([inside, nested])


def test_start_bound_is_inclusive(tmp_path: Path) -> None:
    at_start = _file(tmp_path, "s.pcap", START)
    assert closed_between(tmp_path, START, END) == [at_start]


def test_files_still_written_hidden_or_foreign_are_ignored(tmp_path: Path) -> None:
    when = START + timedelta(minutes=1)
    kept = _file(tmp_path, "ok.cap", when)
    _file(tmp_path, "open.pcapng.partial", when)
    _file(tmp_path, ".hidden.pcap", when)
    _file(tmp_path, "notes.txt", when)
    _file(tmp_path, ".tmp/inside-hidden-dir.pcap", when)
    assert capture_files(tmp_path) == [kept]


def test_naive_bounds_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="naive"):
        closed_between(tmp_path, START.replace(tzinfo=None), END)


def test_batch_id_names_the_interval_and_the_attempt() -> None:
    attempt = datetime(2026, 11, 22, 11, 2, 12, 345, tzinfo=UTC)
    assert interval_batch_id("ivl", START, attempt) == "ivl-20261122T1000-20261122T110212"
    retry = attempt + timedelta(minutes=1)
    assert interval_batch_id("ivl", START, retry) != interval_batch_id("ivl", START, attempt)
    paris = START.astimezone(timezone(timedelta(hours=1)))
    assert interval_batch_id("expire", paris, attempt).startswith("expire-20261122T1000-")


def test_naive_batch_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        interval_batch_id("ivl", START.replace(tzinfo=None), START)
