"""Crash tests' hooks: `failpoint(name)` kills this process by SIGKILL at a chosen moment, or
holds it there while a test changes the world around it (fills the disk).

Set `STOMP_LAKE_KILL_AT=<name>` to die the first time the named point is reached, or
`<name>:<N>` to die the N-th time (e.g. the third table commit). With the variable unset a
failpoint is one dictionary lookup. SIGKILL, unlike an exception or SIGTERM, runs no cleanup
handler, closes no file properly and leaves the lake exactly as a power cut or the OOM killer
would.

Points, in the order a run reaches them: `run.batch_begun`; per table `lake.staged` (Spark
wrote the staging Parquet), `run.staged` (all staged, before validation), then after validation
`run.validated`, `run.carried_written`, then per table `lake.placed` (files in their partition
folders, before the delta-rs commit) and `lake.committed` (after it, staging folder not yet
released); `ledger.placed` (ledger file written, not committed), `run.ledger_recorded`,
`run.advanced`.

`STOMP_LAKE_PAUSE_AT=<name>[:<N>]` with `STOMP_LAKE_PAUSE_DIR=<folder>` holds the process at
the point instead: it creates `<folder>/<name>.paused` and goes on once that file is removed.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

KILL_AT_ENV = "STOMP_LAKE_KILL_AT"
PAUSE_AT_ENV = "STOMP_LAKE_PAUSE_AT"
PAUSE_DIR_ENV = "STOMP_LAKE_PAUSE_DIR"
PAUSE_POLL_S = 0.05

_reached: Counter[str] = Counter()


def parse_kill_at(spec: str) -> tuple[str, int]:
    """(`name`, `N`) from `name` or `name:N` (N >= 1)."""
    name, sep, count = spec.strip().rpartition(":")
    if sep and count.isdigit() and int(count) >= 1 and name:
        return name, int(count)
    return spec.strip(), 1


def failpoint(name: str) -> None:
    """Die by SIGKILL here when `STOMP_LAKE_KILL_AT` names this point (and its count); wait
    here when `STOMP_LAKE_PAUSE_AT` does."""
    kill_at, pause_at = os.environ.get(KILL_AT_ENV), os.environ.get(PAUSE_AT_ENV)
    if not kill_at and not pause_at:
        return
    _reached[name] += 1
    if pause_at and _names(pause_at, name):
        _pause(name, Path(os.environ[PAUSE_DIR_ENV]))
    if kill_at and _names(kill_at, name):
        print(
            f"stomp-lake: failpoint {name}:{_reached[name]} reached, killing pid {os.getpid()}",
            file=sys.stderr,
            flush=True,
        )
        os.kill(os.getpid(), signal.SIGKILL)


def _names(spec: str, name: str) -> bool:
    """Whether `spec` (`name` or `name:N`) names this point at its current count."""
    target, count = parse_kill_at(spec)
    return target == name and _reached[name] == count


def _pause(name: str, folder: Path) -> None:
    marker = folder / f"{name}.paused"
    marker.touch()
    while marker.exists():
        time.sleep(PAUSE_POLL_S)
