"""State of connections still open at the end of a batch, carried to the next batch.

Each batch that carries state writes it to `_state/connections/<batch_id>/` (Parquet: flow_key,
state), and `_state/connections/current.json` names the batch whose state the next batch starts
from. The pointer moves only after the ledger has recorded the batch, so a batch that is re-run
after a crash starts from the same state as its first attempt.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.lake.layout import Lake, make_private_dir
from pipeline.lake.statefile import read_json, write_json_atomic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _root(lake: Lake) -> Path:
    lake.ensure()
    return make_private_dir(lake.state_dir / "connections")


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


def write_carried(state_rows: DataFrame, lake: Lake, batch_id: str) -> None:
    state_rows.select("flow_key", "state").write.mode("overwrite").parquet(
        str(_root(lake) / batch_id)
    )


def advance(lake: Lake, batch_id: str) -> None:
    write_json_atomic(_root(lake) / "current.json", {"batch_id": batch_id})
