"""pipeline/spark/session.py: the settings a session starts with."""

from __future__ import annotations

import pytest

from pipeline.spark.session import LOCAL_JIT_OPTIONS, base_conf, merge_conf

JAVA = "spark.driver.extraJavaOptions"


def test_a_local_jvm_compiles_with_c1_and_a_cluster_driver_keeps_the_default(tmp_path) -> None:
    local = base_conf("local[*]", scratch=tmp_path)
    assert LOCAL_JIT_OPTIONS in local[JAVA] and "log4j2" in local[JAVA]
    assert LOCAL_JIT_OPTIONS not in base_conf("spark://host:7077", scratch=tmp_path)[JAVA]


def test_the_users_java_options_come_last_so_theirs_win(tmp_path) -> None:
    merged = merge_conf(base_conf("local[2]", scratch=tmp_path), {JAVA: "-XX:TieredStopAtLevel=4"})
    assert merged[JAVA].index(LOCAL_JIT_OPTIONS) < merged[JAVA].index("-XX:TieredStopAtLevel=4")


@pytest.mark.spark
def test_the_running_jvm_got_the_options(spark) -> None:
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(LOCAL_JIT_OPTIONS.split()) <= set(arguments)
