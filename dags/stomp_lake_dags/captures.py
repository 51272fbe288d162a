"""Which capture files a data interval covers, and the batch ids the DAGs hand the pipeline."""

from __future__ import annotations

import calendar
import logging
import os
from datetime import UTC, datetime
from pathlib import Path

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")  # as `stomp-lake run` discovers them

log = logging.getLogger(__name__)


def capture_files(folder: Path) -> list[Path]:
    """Capture files under `folder`, sorted; hidden files and `.partial` ones still being written
    are left out, like `stomp-lake run` does."""
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            if name.startswith(".") or not name.lower().endswith(CAPTURE_SUFFIXES):
                continue
            found.append(Path(root) / name)
    return sorted(found)


def closed_between(folder: Path, start: datetime, end: datetime) -> list[Path]:
    """Capture files last modified (that is, closed) in [start, end)."""
    low, high = _epoch_ns(start), _epoch_ns(end)
    chosen: list[Path] = []
    for path in capture_files(folder):
        try:
            mtime_ns = path.stat().st_mtime_ns
        except OSError as error:  # removed or unreadable since the listing: not this run's
            log.warning("skipping capture %s: %s", path, error)
            continue
        if low <= mtime_ns < high:
            chosen.append(path)
    return chosen


def interval_batch_id(prefix: str, start: datetime, attempt: datetime) -> str:
    """`<prefix>-<interval start>-<attempt time>`, e.g. `ivl-20261120T0900-20261120T100212`.

    Named after the interval for tracing, and new for each attempt: a batch id must never be
    reused for other files (the tables would skip the second batch as committed). A retry after a
    crash resumes the pending batch under its first id anyway, and a re-run of an ingested
    interval makes no batch at all (its files are in the ledger).
    """
    return f"{prefix}-{_utc(start):%Y%m%dT%H%M}-{_utc(attempt):%Y%m%dT%H%M%S}"


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: data interval bounds must be aware")
    return moment.astimezone(UTC)


def _epoch_ns(moment: datetime) -> int:
    # timegm, not subtraction: pendulum's datetimes subtract into intervals of their own kind
    moment = _utc(moment)
    return calendar.timegm(moment.utctimetuple()) * 1_000_000_000 + moment.microsecond * 1_000
