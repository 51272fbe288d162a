"""pipeline/startup/jvm_output.py: the JVM's output forwarded; the caller's stdout and stderr are
never the JVM's."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pipeline.startup.jvm_output import jvm_output


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
from pipeline.startup.jvm_output import jvm_output
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
from pipeline.startup.jvm_output import jvm_output
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
