"""Which flow pass task takes which flows: contiguous ranges of the flow hash, cut where the
tasks get equal shares of packets.

A flow pass task's time follows its packets. By hash alone, the four tasks of bench_run's
2.26 GB (600 flows) got 767-904 thousand packets and took 5.5-6.6 s: the pass waited on the
slowest with a core idle. The capture pass already counts each flow's packets in each split
(`pipeline.spark.captures`, at most `REPORTED_FLOWS` flows a split); the driver sums them,
places each flow at its hash (`flow_hash`, Spark's ``xxhash64`` of the key, which the pass sorts
by) and cuts the hash range at equal shares of the packets (`ranges`), counting the flows not
reported as spread evenly over it, as a hash spreads them. Spark's hash partitioning decides
where a row goes, so a row's routing value is one that hashes to its range's task
(`routing_values`, `route`). All of it is known without a Spark job: with jobs for it the pass
started 0.5 s later, and gained nothing.
"""

from __future__ import annotations

import heapq
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

# The heaviest flows of a split reported to the driver: bounds what the driver collects per
# split whatever the number of connections (a flow of a busy split that is not among them is
# small, and counts as spread by the hash).
REPORTED_FLOWS = 1024
PLACED_FLOWS = 4096  # the heaviest flows of a batch placed by their hash; the rest count as spread
# A flow pass task's share of the packets, where the flows allow: Spark sorts a task's pieces in
# the JVM's memory before the first of them reaches Python, and with a fixed number of tasks that
# sort grew with the input. A local JVM keeps its pages in its heap for the task's length, so
# they outlive a young collection into the old generation: 2.26 GB in 4 tasks, its pieces not
# yet compressed (`pipeline.spark.pieces.pack`), 100 MB of it (75 -> 176 MB). So the tasks grow
# in number (`task_count`) past a million packets a task (about 16 MB of compressed pieces). Not
# sooner: each task opens its own files and writers, and 2.26 GB (3.3 million packets) in 8
# tasks took 26.9-28.6 s against 27.1-27.6 s in 4, runs alternated.
TASK_PACKETS = 1_000_000
SPARK_HASH_SEED = 42
_HASH_SPACE = 1 << 64
_LOWEST = -(1 << 63)
_HIGHEST = (1 << 63) - 1


def heaviest(packets_by_flow: Mapping[str, int], limit: int = REPORTED_FLOWS) -> list[list[object]]:
    """A split's report: its ``limit`` flows with the most packets, as [flow key, packets]."""
    top = heapq.nlargest(limit, packets_by_flow.items(), key=lambda item: (item[1], item[0]))
    return [[key, count] for key, count in top]


def flow_weights(reports: Iterable[list[list[object]]]) -> Counter[str]:
    """The splits' reports summed: packets per reported flow."""
    weights: Counter[str] = Counter()
    for report in reports:
        for key, count in report:
            weights[str(key)] += int(count)  # type: ignore[call-overload]
    return weights


def task_count(parallelism: int, packets: int, task_packets: int = TASK_PACKETS) -> int:
    """The flow pass's tasks: two per core (a task running long has another beside it), and more
    where the batch's ``packets`` would give a task more than ``task_packets``, in whole waves
    of ``parallelism`` tasks (a last wave of one task would leave the other cores idle)."""
    cores = max(parallelism, 1)
    waves = max(2, -(-packets // (task_packets * cores)))
    return cores * waves


def outweighs_a_task(weights: Mapping[str, int], total: int, partitions: int) -> bool:
    """Whether the heaviest flow has more packets than a task's equal share: its task then
    runs on after the others, and the cores they leave idle can take part of its work."""
    return bool(weights) and max(weights.values()) > total / partitions


def ranges(weights: Mapping[str, int], total: int, partitions: int) -> list[int]:
    """The ``partitions - 1`` flow hashes that cut the hash range into ``partitions`` ranges of
    about equal packets: ``weights`` (packets per flow) at their flows' hashes, and the rest of
    ``total`` spread evenly. A flow goes to the range its hash falls in (a cut at its hash puts
    it above the cut), on the side of a cut that leaves the shares nearer equal."""
    placed = heapq.nlargest(PLACED_FLOWS, weights.items(), key=lambda item: (item[1], item[0]))
    points = sorted((flow_hash(key), weight) for key, weight in placed)
    placed_packets = sum(weight for _, weight in points)
    spread = max(total - placed_packets, 0)
    share = (spread + placed_packets) / partitions
    cuts: list[int] = []
    done = 0.0  # packets below `at`
    at = _LOWEST
    for point, weight in [*points, (-_LOWEST, 0)]:
        stretch = spread * (point - at) / _HASH_SPACE  # the spread packets before this point
        while len(cuts) < partitions - 1 and done + stretch >= share * (len(cuts) + 1):
            needed = share * (len(cuts) + 1) - done  # spread packets past `at` to the share
            past = int(needed / spread * _HASH_SPACE) if spread else 0
            cuts.append(min(at + max(past, 1), point, _HIGHEST))  # the flow at `at` below it
        done += stretch
        while len(cuts) < partitions - 1 and done + weight / 2 >= share * (len(cuts) + 1):
            cuts.append(min(point, _HIGHEST))
        done += weight
        at = point
    return cuts + [_HIGHEST] * (partitions - 1 - len(cuts))


def route(flow_hash_column: Column, cuts: Sequence[int]) -> Column:
    """The routing value of a row whose flow hash is in ``flow_hash_column``: that of its
    range's partition (`ranges`)."""
    from pyspark.sql import functions as F

    values = [F.lit(value).cast("long") for value in routing_values(len(cuts) + 1)]
    if not cuts:
        return values[0]
    routed = F.when(flow_hash_column < F.lit(cuts[0]), values[0])
    for cut, value in zip(cuts[1:], values[1:-1], strict=True):
        routed = routed.when(flow_hash_column < F.lit(cut), value)
    return routed.otherwise(values[-1])


def routing_values(partitions: int) -> list[int]:
    """For each partition, a long that ``repartition(partitions, column)`` of a long column
    sends there: the smallest whose Murmur3 hash (Spark's `HashPartitioning`, seed 42) is that
    partition modulo ``partitions`` (`tests/pipeline/spark/test_placement.py` holds this to
    Spark's own ``hash``)."""
    routes: dict[int, int] = {}
    value = 0
    while len(routes) < partitions:
        routes.setdefault(spark_hash_long(value) % partitions, value)  # Python's % is pmod
        value += 1
    return [routes[partition] for partition in range(partitions)]


def spark_hash_long(value: int) -> int:
    """Spark's ``hash`` of a long: Murmur3_x86_32.hashLong(value, 42), a signed 32-bit int."""
    h1 = SPARK_HASH_SEED
    for half in (value & _MASK32, (value >> 32) & _MASK32):
        k1 = _rotl32((half * 0xCC9E2D51) & _MASK32, 15) * 0x1B873593 & _MASK32
        h1 = (_rotl32(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK32
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def flow_hash(key: str) -> int:
    """Spark's ``xxhash64`` of a flow key (XXH64 of its UTF-8 bytes, seed 42), a signed 64-bit
    int: the flow pass's ``flow_hash``."""
    data = key.encode()
    length = len(data)
    at = 0
    if length >= 32:
        lanes = [
            (SPARK_HASH_SEED + _P1 + _P2) & _MASK64,
            (SPARK_HASH_SEED + _P2) & _MASK64,
            SPARK_HASH_SEED,
            (SPARK_HASH_SEED - _P1) & _MASK64,
        ]
        while at + 32 <= length:
            for lane, word in enumerate(struct.unpack_from("<4Q", data, at)):
                lanes[lane] = _round(lanes[lane], word)
            at += 32
        h = sum(_rotl64(lane, bits) for lane, bits in zip(lanes, (1, 7, 12, 18), strict=True))
        h &= _MASK64
        for lane in lanes:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _MASK64
    else:
        h = (SPARK_HASH_SEED + _P5) & _MASK64
    h = (h + length) & _MASK64
    while at + 8 <= length:
        (word,) = struct.unpack_from("<Q", data, at)
        h = (_rotl64(h ^ _round(0, word), 27) * _P1 + _P4) & _MASK64
        at += 8
    if at + 4 <= length:
        (word,) = struct.unpack_from("<I", data, at)
        h = (_rotl64(h ^ (word * _P1 & _MASK64), 23) * _P2 + _P3) & _MASK64
        at += 4
    for byte in data[at:]:
        h = (_rotl64(h ^ (byte * _P5 & _MASK64), 11) * _P1) & _MASK64
    h = ((h ^ (h >> 33)) * _P2) & _MASK64
    h = ((h ^ (h >> 29)) * _P3) & _MASK64
    h ^= h >> 32
    return h - _HASH_SPACE if h >> 63 else h


_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _round(accumulator: int, word: int) -> int:
    return _rotl64((accumulator + word * _P2) & _MASK64, 31) * _P1 & _MASK64


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64
