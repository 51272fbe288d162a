from __future__ import annotations

import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.lake.batches import (
    BatchPending,
    batch_sequence,
    begin_batch,
    finish_batch,
    new_batch_id,
    pending_batch,
)
from pipeline.lake.fingerprint import FileFingerprint
from pipeline.lake.layout import Lake

REPO = Path(__file__).resolve().parents[3]


def prints(*names: str) -> list[FileFingerprint]:
    return [FileFingerprint(f"/cap/{n}", 10, 1, n * 8) for n in names]


def test_numbers_grow_and_stay_with_their_batch(lake: Lake) -> None:
    first = batch_sequence(lake, "20261122T101500Z-aaaaaa")
    second = batch_sequence(lake, "20261122T101600Z-bbbbbb")
    assert second > first
    assert batch_sequence(Lake(lake.root), "20261122T101500Z-aaaaaa") == first


def test_lost_counter_never_reuses_a_number(lake: Lake) -> None:
    numbers = [batch_sequence(lake, f"b{i}") for i in range(3)]
    (lake.state_dir / "batch-counter.json").unlink()
    assert batch_sequence(lake, "b-new") == max(numbers) + 1


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "-lead", "x" * 129, "sp ace"])
def test_bad_batch_ids_are_refused(lake: Lake, bad: str) -> None:
    with pytest.raises(ValueError, match="bad batch id"):
        batch_sequence(lake, bad)


def test_concurrent_processes_get_distinct_numbers(lake: Lake) -> None:
    script = (
        "import sys; from pipeline.lake.batches import batch_sequence; "
        "from pipeline.lake.layout import Lake; lake = Lake(sys.argv[1]); "
        "print(' '.join(str(batch_sequence(lake, f'{sys.argv[2]}-{i}')) for i in range(15)))"
    )
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(lake.root), f"w{n}"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    numbers = [int(x) for w in workers for x in w.communicate(timeout=60)[0].split()]
    assert len(numbers) == 60
    assert sorted(numbers) == list(range(1, 61))


def test_new_batch_id_format_and_content_suffix() -> None:
    now = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
    batch_id = new_batch_id(now)
    assert re.fullmatch(r"20261122T101500Z-[0-9a-f]{6}", batch_id)
    assert new_batch_id(now, prints("a", "b")) == new_batch_id(now, prints("b", "a"))
    assert new_batch_id(now, prints("a")) != new_batch_id(now, prints("b"))


def test_pending_batch_survives_until_finished(lake: Lake) -> None:
    assert pending_batch(lake) is None
    started = begin_batch(lake, prints("a", "b"), batch_id="batch-1")
    resumed = pending_batch(Lake(lake.root))
    assert resumed == started
    assert resumed.seq == batch_sequence(lake, "batch-1")
    with pytest.raises(BatchPending, match="batch-1 .* still pending"):
        begin_batch(lake, prints("c"))
    finish_batch(lake, "other-batch")
    assert pending_batch(lake) == started
    finish_batch(lake, "batch-1")
    assert pending_batch(lake) is None
    assert begin_batch(lake, prints("c")).seq > started.seq
