"""A lake whose last batch left connections open (the first half of a sample capture, run with
the default `--open-connections carry`), made once per test run and copied per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.lake.layout import Lake
from pipeline.runner import RunConfig, run
from tests.support.paths import SAMPLES

CAPTURE = SAMPLES / "activemq-heartbeat-v10.pcap"


def carried_lake_copy(tmp_path_factory: pytest.TempPathFactory, target: Path) -> Lake:
    """A private copy of the carrying lake (needs the `spark` fixture up)."""
    from tests.support.split_capture import split_by_time

    base = tmp_path_factory.getbasetemp() / "shared-carried-lake"
    done = base / "_built"
    if not done.exists():
        first, _ = split_by_time(CAPTURE, base / "parts")
        inbox = base / "inbox"
        inbox.mkdir(exist_ok=True)
        shutil.copy(first, inbox)
        result = run(
            RunConfig(inputs=[inbox], lake=base / "lake", validate=False),
            progress=lambda _: None,
        )
        assert result.counts["open_connections"] > 0, result.counts
        done.touch()
    shutil.copytree(base / "lake", target, symlinks=True)
    return Lake(target)


def state_parts(lake: Lake) -> list[Path]:
    """The Parquet parts of the state the next batch starts from."""
    from pipeline.lake import carried

    batch_id = carried.current_state_batch(lake)
    assert batch_id is not None
    return sorted((carried.connections_dir(lake) / batch_id).glob("*.parquet"))


def delete_pointer(lake: Lake) -> Path:
    from pipeline.lake.carried import pointer_path

    path = pointer_path(lake)
    path.unlink()
    return path


def empty_pointer(lake: Lake) -> Path:
    from pipeline.lake.carried import pointer_path

    path = pointer_path(lake)
    path.write_bytes(b"")
    return path


def delete_part(lake: Lake) -> Path:
    part = state_parts(lake)[0]
    part.unlink()
    return part


def truncate_part(lake: Lake) -> Path:
    part = state_parts(lake)[0]
    with part.open("r+b") as handle:
        handle.truncate(part.stat().st_size // 2)
    return part


def garble_part(lake: Lake) -> Path:
    """Same size, other bytes (in the middle: the footer still reads)."""
    part = state_parts(lake)[0]
    data = bytearray(part.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    part.write_bytes(bytes(data))
    return part


def delete_manifest(lake: Lake) -> Path:
    from pipeline.lake.carried import MANIFEST

    manifest = state_parts(lake)[0].parent / MANIFEST
    manifest.unlink()
    return manifest


CARRIED_DAMAGES = {
    "pointer_deleted": delete_pointer,
    "pointer_empty": empty_pointer,
    "part_deleted": delete_part,
    "part_truncated": truncate_part,
    "part_garbled": garble_part,
    "manifest_deleted": delete_manifest,
}
