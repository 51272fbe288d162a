"""Carried connection state as a batch leaves it (parts, manifest, pointer), without Spark."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from pipeline.lake import carried
from pipeline.lake.layout import Lake
from pipeline.lake.statefile import write_json_atomic

DAY = 86_400


def carry(lake: Lake, batch_id: str, connections: int, days_old: float) -> Path:
    """Batch `batch_id`'s state of `connections` open connections, the pointer moved to it
    `days_old` days ago; its folder."""
    folder = carried.connections_dir(lake) / batch_id
    folder.mkdir(parents=True)
    part = folder / "part-00000.parquet"
    keys = [f"{batch_id}-{i}" for i in range(connections)]
    pq.write_table(pa.table({"flow_key": keys, "state": [b"s"] * connections}), part)
    entry = {
        "file": part.name,
        "size": part.stat().st_size,
        carried.HASH: xxhash.xxh3_128_hexdigest(part.read_bytes()),
        "rows": connections,
    }
    write_json_atomic(folder / carried.MANIFEST, {"batch_id": batch_id, "parts": [entry]})
    carried.advance(lake, batch_id)
    when = time.time() - days_old * DAY
    for path in (carried.pointer_path(lake), folder):
        os.utime(path, (when, when))
    return folder
