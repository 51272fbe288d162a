"""pipeline/spark/session.py: the settings a session starts with; where its JVM writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pipeline.spark.session import LOCAL_JVM_OPTIONS, base_conf, jvm_output, merge_conf

JAVA = "spark.driver.extraJavaOptions"


def test_a_local_jvm_gets_c1_and_the_serial_collector_a_cluster_driver_neither(tmp_path) -> None:
    local = base_conf("local[*]", scratch=tmp_path)
    assert LOCAL_JVM_OPTIONS in local[JAVA] and "log4j2" in local[JAVA]
    assert LOCAL_JVM_OPTIONS not in base_conf("spark://host:7077", scratch=tmp_path)[JAVA]


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


def test_processes_started_under_jvm_output_never_hold_the_callers_stdout_or_stderr(
    capfd,
) -> None:
    """So a caller waiting for the end of our output is not held up by the JVM's teardown."""
    script = (
        "import sys, time; print('from the jvm'); print('noise line', file=sys.stderr);"
        " print('a warning', file=sys.stderr); sys.stdout.flush(); time.sleep(30)"
    )
    with jvm_output(("noise line",)):
        child = subprocess.Popen([sys.executable, "-c", script])
    try:
        for fd in (1, 2):
            assert os.readlink(f"/proc/{child.pid}/fd/{fd}") != os.readlink(f"/proc/self/fd/{fd}")
        deadline = time.monotonic() + 20
        out = err = ""
        while ("a warning" not in err or "from the jvm" not in out) and time.monotonic() < deadline:
            time.sleep(0.05)
            captured = capfd.readouterr()
            out, err = out + captured.out, err + captured.err
        assert "from the jvm" in out
        assert "a warning" in err and "noise line" not in err
    finally:
        child.kill()
        child.wait()


READER_GONE = """
import os, subprocess, sys
from pipeline.spark.session import jvm_output
reader, writer = os.pipe()
os.dup2(writer, 1)
os.close(reader)  # nobody reads this process's stdout any more
with jvm_output(()):
    writes = "import sys; sys.stdout.write('x' * (1 << 20))"
    child = subprocess.Popen([sys.executable, "-c", writes])
child.wait(timeout=60)
sys.stderr.write(f"exit {child.returncode}")
"""

CLOSED_STDOUT = """
import os, sys
from pipeline.spark.session import jvm_output
os.close(1)
sys.stdout = None
with jvm_output(()):
    pass
sys.stderr.write("started")
"""


@pytest.mark.parametrize(
    ("script", "said"),
    [(READER_GONE, "exit 0"), (CLOSED_STDOUT, "started")],
    ids=["gone", "closed"],
)
def test_a_caller_without_a_reader_or_a_stdout_holds_up_nothing(script: str, said: str) -> None:
    """The JVM's output is read to its end, whatever became of ours (no broken pipe for it, no
    traceback from the forwarding thread), and a closed descriptor is left as it is."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stderr.endswith(said), done.stderr
    assert "Error" not in done.stderr, done.stderr
