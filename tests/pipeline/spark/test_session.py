"""pipeline/spark/session.py: the settings a session starts with."""

from __future__ import annotations

import pytest

from pipeline.spark.session import (
    LOCAL_JVM_OPTIONS,
    LOCAL_MEMORY_FRACTION,
    base_conf,
    merge_conf,
    return_idle_heap,
)

JAVA = "spark.driver.extraJavaOptions"


def test_a_local_jvm_gets_c1_and_the_serial_collector_a_cluster_driver_neither(tmp_path) -> None:
    local = base_conf("local[*]", scratch=tmp_path)
    assert LOCAL_JVM_OPTIONS in local[JAVA] and "log4j2" in local[JAVA]
    assert LOCAL_JVM_OPTIONS not in base_conf("spark://host:7077", scratch=tmp_path)[JAVA]


def test_a_local_run_bounds_sparks_memory_pool_a_cluster_keeps_its_own(tmp_path) -> None:
    """One busy connection's pieces are sorted in one task: the pool, not the connection,
    bounds what the sort holds (it spills past it)."""
    fraction = "spark.memory.fraction"
    assert base_conf("local[*]", scratch=tmp_path)[fraction] == LOCAL_MEMORY_FRACTION
    assert fraction not in base_conf("spark://host:7077", scratch=tmp_path)
    merged = merge_conf(base_conf("local[2]", scratch=tmp_path), {fraction: "0.3"})
    assert merged[fraction] == "0.3"


def test_the_users_java_options_come_last_so_theirs_win(tmp_path) -> None:
    merged = merge_conf(base_conf("local[2]", scratch=tmp_path), {JAVA: "-XX:TieredStopAtLevel=4"})
    assert merged[JAVA].index(LOCAL_JVM_OPTIONS) < merged[JAVA].index("-XX:TieredStopAtLevel=4")


def test_a_collector_the_user_names_replaces_ours(tmp_path) -> None:
    """A JVM given two collectors does not start ("Multiple garbage collectors selected")."""
    merged = merge_conf(base_conf("local[2]", scratch=tmp_path), {JAVA: "-XX:+UseG1GC -Xss4m"})
    assert "-XX:+UseSerialGC" not in merged[JAVA]
    assert merged[JAVA].endswith("-XX:+UseG1GC -Xss4m")
    assert "-XX:TieredStopAtLevel=1" in merged[JAVA]
    other = merge_conf(base_conf("local[2]", scratch=tmp_path), {JAVA: "-XX:+UseNUMA"})
    assert "-XX:+UseSerialGC" in other[JAVA]


@pytest.mark.spark
def test_the_running_jvm_got_the_options(spark) -> None:
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(LOCAL_JVM_OPTIONS.split()) <= set(arguments)


@pytest.mark.spark
def test_a_local_jvm_gives_back_the_heap_it_no_longer_uses(spark) -> None:
    """After a job that grew the heap, `return_idle_heap` shrinks it to about what stays live,
    in one step (-XX:-ShrinkHeapInSteps), from an initial heap of 64 MB."""
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    rows = spark.range(3_000_000).selectExpr("id % 1000 AS key", "repeat('x', 200) AS text")
    rows.groupBy("key").agg({"text": "max"}).collect()
    grown = runtime.totalMemory()
    return_idle_heap(spark)
    shrunk = runtime.totalMemory()
    live = shrunk - runtime.freeMemory()
    assert shrunk <= grown and live <= shrunk
    assert shrunk < 4 * live + (64 << 20), (grown, shrunk, live)
