"""The JVM's output forwarded through pipes of this process, so that Spark's JVM (and the Python
workers it starts) never holds the caller's own stdout and stderr: the caller is done waiting
when this process exits, not when the JVM's teardown ends. Spark's start-up noise is dropped on
the way (`pipeline.spark.session.JVM_NOISE`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def jvm_output(noise: tuple[str, ...]) -> Iterator[None]:
    """While the block runs, file descriptors 1 and 2 are pipes; processes started in the block
    (Spark's JVM, and through it the Python workers) keep them as their stdout and stderr for
    good. Threads forward what comes through to the real stdout and stderr (every stderr line
    but `noise`), until the last of those processes closes the pipes or this one exits.

    So the JVM never holds the caller's own stdout and stderr. When this process exits, the JVM
    stops Spark and exits on its own, and the caller (a shell, a DAG task, a pipe) is done
    waiting: that teardown takes 0.45 s after the last line, most of it JDK 17's wait at exit
    for its threads in native calls (up to 300 ms), none of it the run's work."""
    _flush_standard_streams()
    saved = []
    for fd, name, dropped in ((1, "jvm-stdout", ()), (2, "jvm-stderr", noise)):
        try:
            real = os.dup(fd)
        except OSError:  # not open (a daemon's): the JVM inherits it as it is
            continue
        read_end, write_end = os.pipe()
        threading.Thread(
            target=_forward, args=(read_end, os.dup(real), dropped), name=name, daemon=True
        ).start()
        os.dup2(write_end, fd)
        os.close(write_end)
        saved.append((fd, real))
    try:
        yield
    finally:
        _flush_standard_streams()
        for fd, real in saved:
            os.dup2(real, fd)
            os.close(real)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def _forward(read_end: int, real: int, noise: tuple[str, ...]) -> None:
    """Lines from the pipe to the real output, to the pipe's end: a reader gone from the real
    output (``stomp-lake run | head``) stops the writing, never the reading, lest the JVM block
    on a full pipe."""
    with os.fdopen(read_end, "rb") as source, os.fdopen(real, "wb", buffering=0) as sink:
        writing = True
        for line in source:
            if writing and line.rstrip(b"\r\n").decode("utf-8", "replace") not in noise:
                try:
                    sink.write(line)
                except OSError:
                    writing = False
