"""Crash tests' hooks: `failpoint(name)` kills this process by SIGKILL at a chosen moment.

Set `STOMP_LAKE_KILL_AT=<name>` to die the first time the named point is reached, or
`<name>:<N>` to die the N-th time (e.g. the third table commit). With the variable unset a
failpoint is one dictionary lookup. SIGKILL, unlike an exception or SIGTERM, runs no cleanup
handler, closes no file properly and leaves the lake exactly as a power cut or the OOM killer
would.

Points, in the order a run reaches them: `run.batch_begun`; per table `lake.staged` (Spark
wrote the staging Parquet), then after validation `run.validated`, then per table
`lake.placed` (files in their partition folders, before the delta-rs commit) and
`lake.committed` (after it, staging folder not yet released); `run.carried_written`,
`ledger.placed` (ledger file written, not committed), `run.ledger_recorded`, `run.advanced`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter

KILL_AT_ENV = "STOMP_LAKE_KILL_AT"

_reached: Counter[str] = Counter()


def parse_kill_at(spec: str) -> tuple[str, int]:
    """(`name`, `N`) from `name` or `name:N` (N >= 1)."""
    name, sep, count = spec.strip().rpartition(":")
    if sep and count.isdigit() and int(count) >= 1 and name:
        return name, int(count)
    return spec.strip(), 1


def failpoint(name: str) -> None:
    """Die by SIGKILL here when `STOMP_LAKE_KILL_AT` names this point (and its count)."""
    spec = os.environ.get(KILL_AT_ENV)
    if not spec:
        return
    target, count = parse_kill_at(spec)
    if target != name:
        return
    _reached[name] += 1
    if _reached[name] == count:
        print(
            f"stomp-lake: failpoint {name}:{count} reached, killing pid {os.getpid()}",
            file=sys.stderr,
            flush=True,
        )
        os.kill(os.getpid(), signal.SIGKILL)
