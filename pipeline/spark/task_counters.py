"""What the capture and flow passes' tasks have done so far, for the run's progress display.

Spark accumulators: a task adds its figures as it ends (`split_read`, `flows_decoded`) and the
driver reads them (`reading`, `decoding`) while the job is still running, since each finished
task's additions reach the driver with its result. A task Spark runs again adds again, so these
figures are for showing progress only; the run's summary comes from the tasks' output rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.accumulators import AccumulatorParam

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import SparkSession


class _BytesPerFile(AccumulatorParam[dict[int, int]]):
    """file_id -> bytes of the file's splits read."""

    def zero(self, value: dict[int, int]) -> dict[int, int]:
        return {}

    def addInPlace(self, value1: dict[int, int], value2: dict[int, int]) -> dict[int, int]:
        # A new dict, not value1 changed: the display thread reads the driver's value while
        # Spark's accumulator server adds to it.
        merged = dict(value1)
        for file_id, size in value2.items():
            merged[file_id] = merged.get(file_id, 0) + size
        return merged


@dataclass(frozen=True, slots=True)
class TaskCounters:
    bytes_per_file: Accumulator[dict[int, int]]
    packets: Accumulator[int]
    flows: Accumulator[int]
    frames: Accumulator[int]
    table_files: Accumulator[int]

    @classmethod
    def create(cls, spark: SparkSession) -> TaskCounters:
        context = spark.sparkContext
        return cls(
            context.accumulator({}, _BytesPerFile()),
            context.accumulator(0),
            context.accumulator(0),
            context.accumulator(0),
            context.accumulator(0),
        )

    # -- in a task ---------------------------------------------------------------------------
    def split_read(self, file_id: int, split_bytes: int, packets: int) -> None:
        """A capture-pass task read one split of a file (bytes: the split's range)."""
        self.bytes_per_file.add({file_id: split_bytes})
        self.packets.add(packets)

    def flows_decoded(self, flows: int, frames: int, table_files: int) -> None:
        """A flow-pass task decoded its flows and wrote its table files."""
        self.flows.add(flows)
        self.frames.add(frames)
        self.table_files.add(table_files)

    # -- on the driver -----------------------------------------------------------------------
    def reading(self, file_sizes: Sequence[int]) -> str:
        """Stage 1: files whose every split is read, bytes read, packets."""
        done = self.bytes_per_file.value
        files = sum(1 for file_id, size in enumerate(file_sizes) if done.get(file_id, -1) >= size)
        read = sum(done.values())
        return (
            f"{files}/{len(file_sizes)} files, {human_bytes(read)} of "
            f"{human_bytes(sum(file_sizes))}, {human_count(self.packets.value)} packets"
        )

    def decoding(self) -> str:
        """Stage 2: flows decoded, frames, table files written."""
        return (
            f"{human_count(self.flows.value)} flows, {human_count(self.frames.value)} frames, "
            f"{self.table_files.value:,} table files"
        )


def human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def human_count(count: int) -> str:
    """Thousands separated up to a million, then "4.1 M"."""
    if count < 1_000_000:
        return f"{count:,}"
    return f"{count / 1_000_000:.1f} M"
