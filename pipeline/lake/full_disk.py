"""A run that met a full disk (ENOSPC), told in one line: while doing what, at which path, and
where the lake stands.

The condition reaches the runner in many forms: Python's OSError (errno 28), pyarrow's
ArrowIOError and DuckDB's IOException with the C library's text, a Spark job's Py4JJavaError
whose message carries a Python worker's traceback or Java's `IOException: No space left on
device`, a delta-rs error ending in `(os error 28)`. They are told apart by walking the chain of
exceptions and their messages, here and nowhere else.
"""

from __future__ import annotations

import errno
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import schemas
from pipeline.errors import DiskFull
from pipeline.lake.batches import pending_batch
from pipeline.lake.commit import app_id_for, batch_committed, open_table
from pipeline.lake.layout import Lake

NO_SPACE = re.compile(
    r"no space left on device|\berrno\W{0,3}28\b|\bos error 28\b|\bENOSPC\b", re.IGNORECASE
)
_PATH = re.compile(r"(?:file:)?(/[^\s'\"`<>|:;,()\[\]{}]+)")

# Where in a run the write happened, by the innermost module of ours on the stack.
STAGES = (
    ("pipeline.lake.carried", "writing carried connection state"),
    ("pipeline.lake.ledger", "recording the ledger"),
    ("pipeline.lake.batches", "registering the batch"),
    ("pipeline.validation", "validating"),
    ("pipeline.lake.writer", "committing"),
    ("pipeline.lake.commit", "committing"),
    ("pipeline.lake.staged_tables", "staging"),
    ("pipeline.lake.staging", "staging"),
    ("pipeline.spark", "staging"),
)
UNKNOWN_STAGE = "running the batch"


def disk_full(error: BaseException, lake: Path, scratch: Path | None = None) -> DiskFull | None:
    """The one-line error for `error` when a full disk caused it, else None. ``scratch``: Spark's
    scratch folder, a candidate when no message names the path."""
    chain = list(_chain(error))
    texts = [_text(e) for e in chain]
    if not any(_no_space(e, t) for e, t in zip(chain, texts, strict=True)):
        return None
    root = Path(lake).resolve()
    where = _path(chain, texts, root) or _fullest(root, scratch)
    return DiskFull(
        f"no space left on device while {_stage(error)} at {where}: {_standing(Lake(root))}; "
        "free space and run again (the same run resumes the batch)"
    )


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _text(error: BaseException) -> str:
    """The message, with a Java exception's own chain when Py4J carries one."""
    parts = [str(error)]
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            parts.append(str(java.toString()))
            cause = java.getCause()
            while cause is not None and len(parts) < 20:
                parts.append(str(cause.toString()))
                cause = cause.getCause()
        except Exception:  # noqa: BLE001  the JVM may be gone: the Python text is enough then
            pass
    return "\n".join(parts)


def _no_space(error: BaseException, text: str) -> bool:
    return (isinstance(error, OSError) and error.errno == errno.ENOSPC) or bool(
        NO_SPACE.search(text)
    )


def _path(chain: list[BaseException], texts: list[str], root: Path) -> str | None:
    """The path the write was to: an OSError's file name, or the first path under the lake in
    the messages, or the first absolute path there."""
    for error in chain:
        if isinstance(error, OSError) and error.errno == errno.ENOSPC and error.filename:
            return str(error.filename)
    found = [m.group(1).rstrip(".'") for text in texts for m in _PATH.finditer(text)]
    under = [p for p in found if p == str(root) or p.startswith(f"{root}/")]
    return under[0] if under else None


def _fullest(root: Path, scratch: Path | None) -> str:
    """With no path in the messages: the candidate folder whose disk has the least space left."""
    candidates = [root, scratch or Path(tempfile.gettempdir())]
    free: dict[str, int] = {}
    for folder in candidates:
        try:
            free[str(folder)] = shutil.disk_usage(folder).free
        except OSError:
            continue
    return min(free, key=lambda k: free[k]) if free else str(root)


def _stage(error: BaseException) -> str:
    traceback: TracebackType | None = error.__traceback__
    modules: list[str] = []
    while traceback is not None:
        modules.append(str(traceback.tb_frame.f_globals.get("__name__", "")))
        traceback = traceback.tb_next
    for module in reversed(modules):  # innermost first
        for prefix, stage in STAGES:
            if module == prefix or module.startswith(f"{prefix}."):
                return stage
    return UNKNOWN_STAGE


def _standing(lake: Lake) -> str:
    """What readers see now: the batch under way is in no table, or in some of them (a re-run
    commits it to the others), and never in the ledger before every table holds it."""
    try:
        pending = pending_batch(lake)
        ledger = open_table(lake.ledger_path)
        ledger_at = "no ledger yet" if ledger is None else f"ledger at version {ledger.version()}"
        if pending is None:
            return f"the lake is unchanged ({ledger_at})"
        holding = [
            name
            for name in schemas.TABLES
            if (table := open_table(lake.table_path(name))) is not None
            and batch_committed(table, app_id_for(name), pending.seq, pending.batch_id)
        ]
    except Exception:  # noqa: BLE001  a damaged lake has its own error; this one is about space
        return "the lake's tables hold only committed batches"
    if not holding:
        return f"the lake is unchanged (batch {pending.batch_id} is in no table, {ledger_at})"
    return (
        f"batch {pending.batch_id} is committed to {len(holding)} of {len(schemas.TABLES)} "
        f"tables, not yet recorded in the ledger ({ledger_at})"
    )
