"""pipeline/spark/task_counters.py: what the passes' tasks add up reaches the driver, and agrees
with the passes' own output rows, on real sample captures cut into several splits each."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import schemas
from pipeline.spark.captures import packets_frame
from pipeline.spark.flows import FlowPassConfig, flow_pass
from pipeline.spark.summary import capture_summary, flow_output
from pipeline.spark.task_counters import TaskCounters, human_bytes, human_count
from tests.support.paths import SAMPLES

SAMPLE_FILES = [
    SAMPLES / "activemq-queues-acks.pcap",  # pcap
    SAMPLES / "rabbitmq-topics-tx.pcapng",  # pcapng
]
SPLIT_BYTES = 8 * 1024  # several splits a file: a file is read once all of its splits are


@pytest.mark.spark
def test_the_tasks_figures_reach_the_driver(spark, tmp_path: Path) -> None:
    paths = [str(p) for p in SAMPLE_FILES]
    sizes = [os.path.getsize(p) for p in paths]
    counters = TaskCounters.create(spark)
    assert counters.reading(sizes) == (f"0/2 files, 0 B of {human_bytes(sum(sizes))}, 0 packets")
    assert counters.decoding() == "0 flows, 0 frames, 0 table files"

    packets = packets_frame(spark, paths, SPLIT_BYTES, counters=counters).persist()
    stats = capture_summary(packets).stats
    assert counters.packets.value == stats["packets"] > 0
    assert counters.bytes_per_file.value == dict(enumerate(sizes))
    total = human_bytes(sum(sizes))
    read = f"2/2 files, {total} of {total}, {human_count(stats['packets'])} packets"
    assert counters.reading(sizes) == read

    config = FlowPassConfig(
        tuple(paths),
        table_dirs=tuple((t, str(tmp_path / t)) for t in schemas.TABLES),
        batch_id="b-progress",
    )
    written, counts = flow_output(flow_pass(packets, None, config, 3, counters))
    packets.unpersist()
    frames = sum(counts["frames_by_command"].values())
    assert counters.frames.value == frames == counts["frames"] > 0
    assert counters.table_files.value == sum(len(files) for files in written.values())
    flows = counters.flows.value
    assert 0 < counts["sessions"] <= flows  # a flow per connection, plus any non-STOMP ones
    files = counters.table_files.value
    expected = f"{human_count(flows)} flows, {human_count(frames)} frames, {files} table files"
    assert counters.decoding() == expected


def test_figures_read_as_people_write_them() -> None:
    assert human_bytes(0) == "0 B"
    assert human_bytes(999) == "999 B"
    assert human_bytes(76_234) == "76.2 KB"
    assert human_bytes(1_234_567_890) == "1.2 GB"
    assert human_bytes(2_500_000_000_000) == "2500.0 GB"
    assert human_count(58_531) == "58,531"
    assert human_count(4_123_456) == "4.1 M"
