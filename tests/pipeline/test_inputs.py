"""What a run ingests, checked before the lake is touched or Spark starts."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest

from pipeline.inputs import (
    PARTIAL_GRACE_SECONDS,
    InputError,
    check_inputs,
    discover,
    sniff_captures,
    stale_partials,
)
from tests.support.paths import SAMPLES

SAMPLE = sorted(SAMPLES.glob("*.pcap*"))[0]


def test_captures_are_told_from_other_files_by_magic_number(tmp_path: Path) -> None:
    notes, packed, empty = tmp_path / "notes.pcap", tmp_path / "old.pcap", tmp_path / "new.pcap"
    notes.write_text("# notes\n")
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()[:100]))
    empty.write_bytes(b"")
    captures, others = sniff_captures([str(SAMPLE), str(notes), str(packed), str(empty)])
    assert captures == [str(SAMPLE)]
    assert others == {
        str(notes): "magic 23206e6f is neither pcap nor pcapng",
        str(packed): "gzip-compressed file, not pcap/pcapng",
        str(empty): "0 bytes, too short for a capture",
    }


def test_missing_inputs_and_inputs_without_captures_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory: .*absent") as refused:
        check_inputs([SAMPLE, tmp_path / "absent"])
    assert refused.value.exit_code == 2
    with pytest.raises(InputError, match="no capture files"):
        check_inputs([tmp_path])
    # Closing carried connections needs no capture file (the maintenance DAG's expire-state).
    assert check_inputs([tmp_path], close_open=True) == ([], {})
    notes = tmp_path / "notes.cap"
    notes.write_text("text")
    captures, others = check_inputs([tmp_path, SAMPLE])
    assert captures == [str(SAMPLE.resolve())] and list(others) == [str(notes.resolve())]


def test_partial_captures_left_untouched_are_reported(tmp_path: Path) -> None:
    folder = tmp_path / "captures"
    (folder / "sub").mkdir(parents=True)
    crashed = folder / "sub" / "broker-1.pcapng.partial"
    writing = folder / "broker-2.pcapng.partial"
    for path in (crashed, writing):
        path.write_bytes(b"\x0a\x0d\x0d\x0a")
    old = time.time() - PARTIAL_GRACE_SECONDS - 60
    os.utime(crashed, (old, old))
    assert stale_partials([folder]) == [str(crashed.resolve())]
    assert stale_partials([crashed]) == [str(crashed.resolve())]
    later = time.time() + 2 * PARTIAL_GRACE_SECONDS  # nothing written since: both are stale
    assert sorted(stale_partials([folder], now=later)) == sorted(
        str(p.resolve()) for p in (writing, crashed)
    )


def test_discover_skips_partial_and_hidden_files(tmp_path: Path) -> None:
    (tmp_path / "a.pcap").write_bytes(b"")
    (tmp_path / "b.pcapng.partial").write_bytes(b"")
    (tmp_path / ".c.pcap").write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"")
    assert [Path(p).name for p in discover([tmp_path])] == ["a.pcap"]
