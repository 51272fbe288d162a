"""State of connections still open at the end of a batch, carried to the next batch.

Each batch that carries state writes it to `_state/connections/<batch_id>/` (Parquet: flow_key,
state), and `_state/connections/current.json` names the batch whose state the next batch starts
from. The pointer moves only after the ledger has recorded the batch, so a batch that is re-run
after a crash starts from the same state as its first attempt.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.lake.layout import SECRET_DIR_MODE, SECRET_FILE_MODE, Lake, make_private_dir
from pipeline.lake.statefile import read_json, write_json_atomic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipeline.lake.damage import Damage


def _root(lake: Lake) -> Path:
    lake.ensure()
    root = make_private_dir(lake.state_dir / "connections", SECRET_DIR_MODE)
    os.chmod(root, SECRET_DIR_MODE)  # lakes made before it was private
    return root


def current_state_batch(lake: Lake) -> str | None:
    data = read_json(_root(lake) / "current.json")
    return None if data is None else data.get("batch_id")


def read_carried(spark: SparkSession, lake: Lake) -> DataFrame | None:
    """Carried state rows (record_type='state', flow_key, state), or None when there are none."""
    from pyspark.sql import functions as F

    batch_id = current_state_batch(lake)
    if batch_id is None:
        return None
    folder = _root(lake) / batch_id
    if not any(folder.glob("*.parquet")):
        return None
    return spark.read.parquet(str(folder)).select(
        F.lit("state").alias("record_type"), "flow_key", "state"
    )


def write_carried(state_rows: DataFrame | None, lake: Lake, batch_id: str) -> None:
    """The batch's state rows (flow_key, state), or no rows (None: no connection was left
    open, known without a Spark job; the folder is left empty, which reads as no state)."""
    folder = _root(lake) / batch_id
    if state_rows is None:
        shutil.rmtree(folder, ignore_errors=True)  # as the writer's overwrite
        make_private_dir(folder, SECRET_DIR_MODE)
    else:
        state_rows.select("flow_key", "state").write.mode("overwrite").parquet(str(folder))
    _make_secret(folder)


def _make_secret(folder: Path) -> None:
    """Spark's writer creates files with the JVM's umask (0644 as a rule): the state holds raw
    bytes of frames in progress and the passcodes seen on open connections, so 0700/0600."""
    os.chmod(folder, SECRET_DIR_MODE)
    for parent, dirs, files in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(parent, name), SECRET_DIR_MODE)
        for name in files:
            os.chmod(os.path.join(parent, name), SECRET_FILE_MODE)


def advance(lake: Lake, batch_id: str) -> None:
    write_json_atomic(_root(lake) / "current.json", {"batch_id": batch_id})


def check_carried(lake: Lake) -> list[Damage]:
    """Damaged carried state (stub: its checks come with the carried-state work)."""
    return []
