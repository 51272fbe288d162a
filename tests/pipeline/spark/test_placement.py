"""Flows placed on the flow pass's tasks by ranges of their hash (`pipeline.spark.placement`)."""

from __future__ import annotations

import bisect
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.spark.placement import (
    flow_hash,
    flow_weights,
    heaviest,
    outweighs_a_task,
    ranges,
    route,
    routing_values,
    spark_hash_long,
    task_count,
)

KEYS = [
    "",
    "a",
    "10.0.0.1|41000|10.0.0.2|61613",
    "x" * 31,
    "y" * 32,
    "z" * 33,
    "fe80::1:2:3:4|51234|fe80::aaaa:bbbb:cccc:dddd|61613",
    "été|漢字",
    "abcd" * 17 + "xyz",
]


def test_flow_hash_and_long_hash_are_sparks(spark) -> None:
    rng = random.Random(7)
    keys = KEYS + [
        f"10.{rng.randrange(256)}.0.{i}|{rng.randrange(65536)}|h|61613" for i in range(50)
    ]
    rows = spark.createDataFrame([(k,) for k in keys], "k string").selectExpr("k", "xxhash64(k) h")
    assert {r.k: r.h for r in rows.collect()} == {k: flow_hash(k) for k in keys}
    values = [0, 1, -1, 42, (1 << 40) + 7, -(1 << 63), (1 << 63) - 1, rng.getrandbits(63)]
    longs = spark.createDataFrame([(v,) for v in values], "v long").selectExpr("v", "hash(v) h")
    assert {r.v: r.h for r in longs.collect()} == {v: spark_hash_long(v) for v in values}


def test_each_partitions_routing_value_lands_there(spark) -> None:
    for partitions in (1, 2, 4, 7, 16):
        values = routing_values(partitions)
        frame = spark.createDataFrame([(v,) for v in values], "v long").repartition(partitions, "v")
        landed = frame.selectExpr("v", "spark_partition_id() p").collect()
        assert sorted((r.p, r.v) for r in landed) == list(enumerate(values))


def test_rows_go_to_the_task_of_their_hash_range(spark) -> None:
    from pyspark.sql import functions as F

    keys = [f"10.0.{i // 200}.{i % 200}|{40000 + i}|10.0.0.1|61613" for i in range(300)]
    weights = Counter({key: 1 + i % 17 for i, key in enumerate(keys)})
    cuts = ranges(weights, sum(weights.values()), 4)
    frame = spark.createDataFrame([(k,) for k in keys], "flow_key string")
    frame = frame.withColumn("flow_hash", F.xxhash64("flow_key"))
    routed = frame.withColumn("route", route(F.col("flow_hash"), cuts)).repartition(4, "route")
    rows = routed.select("flow_key", F.spark_partition_id().alias("p")).collect()
    assert {r.flow_key: r.p for r in rows} == {
        k: bisect.bisect_right(cuts, flow_hash(k)) for k in keys
    }
    shares: Counter[int] = Counter()
    for key, weight in weights.items():
        shares[bisect.bisect_right(cuts, flow_hash(key))] += weight
    assert max(shares.values()) - min(shares.values()) <= 2 * max(weights.values())


@settings(max_examples=200, deadline=None)
@given(
    weights=st.dictionaries(st.text(max_size=12), st.integers(min_value=1, max_value=10**6)),
    spread=st.integers(min_value=0, max_value=10**7),
    partitions=st.integers(min_value=1, max_value=12),
)
def test_ranges_share_the_packets_out(
    weights: dict[str, int], spread: int, partitions: int
) -> None:
    """n - 1 ordered cuts; each range's packets (its flows', and the spread packets in
    proportion to its width) are within one flow (and a packet's rounding) of an equal share."""
    cuts = ranges(weights, sum(weights.values()) + spread, partitions)
    assert len(cuts) == partitions - 1
    assert cuts == sorted(cuts)
    assert all(-(1 << 63) <= cut < (1 << 63) for cut in cuts)
    bounds = [-(1 << 63), *cuts, 1 << 63]
    shares = [spread * (hi - lo) / (1 << 64) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    for key, weight in weights.items():
        shares[bisect.bisect_right(cuts, flow_hash(key))] += weight
    share = (sum(weights.values()) + spread) / partitions
    heaviest_flow = max(weights.values(), default=0)
    assert all(abs(s - share) <= heaviest_flow + 1 for s in shares)


def test_flows_the_splits_report_are_summed() -> None:
    split = Counter({f"flow{i}": i + 1 for i in range(10)})
    report = heaviest(split, limit=4)
    assert report == [["flow9", 10], ["flow8", 9], ["flow7", 8], ["flow6", 7]]
    assert flow_weights([report, heaviest(split, limit=2)]) == Counter(
        {"flow9": 20, "flow8": 18, "flow7": 8, "flow6": 7}
    )


def test_a_flow_outweighs_a_task_when_it_has_more_than_an_equal_share() -> None:
    assert outweighs_a_task({"one": 1000}, 1000, 4)
    assert outweighs_a_task({"big": 300, "small": 10}, 1000, 4)
    assert not outweighs_a_task({"a": 250, "b": 250}, 1000, 4)
    assert not outweighs_a_task({}, 0, 4)


def test_tasks_are_two_a_core_and_more_in_whole_waves_as_packets_outgrow_a_tasks_share() -> None:
    assert task_count(1, 0) == 2
    assert task_count(2, 0) == 4
    assert task_count(2, 2_000_000, task_packets=500_000) == 4
    assert task_count(2, 2_000_001, task_packets=500_000) == 6
    assert task_count(2, 3_320_743, task_packets=500_000) == 8
    assert task_count(3, 10_000_000, task_packets=500_000) == 21
