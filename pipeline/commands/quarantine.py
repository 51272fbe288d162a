"""`stomp-lake quarantine`: batches the validation gate kept aside; release or discard them.

A quarantined batch's files are already in the ledger and its open connections carried on, so
later batches went ahead without it; releasing commits its tables as they were computed (the
same batch id: releasing twice adds nothing; the tables' files are moved back and committed,
Spark starts only for a table it wrote into the quarantine); discarding deletes it for good.
"""

from __future__ import annotations

import argparse
import json

from pipeline.commands.options import add_lake, add_spark, spark_settings
from pipeline.lake import Lake, lake_lock
from pipeline.lake.integrity import ensure_intact
from pipeline.lake.statefile import read_json
from pipeline.spark.session import SparkSettings
from pipeline.validation.quarantine import (
    REPORT,
    NotQuarantined,
    batch_dir,
    discard,
    is_quarantined,
    list_quarantined,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_lake(parser)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--show", metavar="BATCH", help="print a batch's failed expectations")
    action.add_argument("--release", metavar="BATCH", help="commit a reviewed batch's tables")
    action.add_argument("--discard", metavar="BATCH", help="delete a quarantined batch")
    add_spark(parser)  # for --release of a table Spark wrote into the quarantine
    parser.add_argument("--wait-lock", type=float, default=0.0, metavar="SECONDS")


def main(args: argparse.Namespace) -> int:
    lake = Lake(args.lake)
    if args.show:
        return _show(lake, args.show)
    if args.release:
        return _release(lake, args.release, spark_settings(args), args.wait_lock)
    if args.discard:
        return _discard(lake, args.discard, args.wait_lock)
    return _list(lake)


def _list(lake: Lake) -> int:
    batches = list_quarantined(lake)
    if not batches:
        print(f"no quarantined batches under {lake.quarantine_dir}")
        return 0
    for batch in batches:
        state = f"released {batch.released_at}" if batch.released else "awaiting review"
        print(f"{batch.batch_id}  quarantined {batch.quarantined_at}  {state}")
        for failure in batch.failed:
            print(f"    failed: {failure}")
    return 0


def _show(lake: Lake, batch_id: str) -> int:
    report = read_json(batch_dir(lake, batch_id) / REPORT)
    if report is None:
        raise NotQuarantined(f"no quarantined batch {batch_id!r} under {lake.quarantine_dir}")
    for failure in report.get("failures", []):
        print(json.dumps(failure, indent=2, default=str))
    return 0


def _release(lake: Lake, batch_id: str, spark: SparkSettings, wait: float) -> int:
    from pipeline.validation.quarantine import release_batch

    if not is_quarantined(lake, batch_id):
        raise NotQuarantined(f"no quarantined batch {batch_id!r} awaiting review")
    with lake_lock(lake, wait=wait):
        ensure_intact(lake)  # as a run: commit nothing onto a damaged lake
        versions = release_batch(lake, batch_id, spark.start)
    print(f"released batch {batch_id}: " + ", ".join(f"{t} v{v}" for t, v in versions.items()))
    return 0


def _discard(lake: Lake, batch_id: str, wait: float) -> int:
    if read_json(batch_dir(lake, batch_id) / REPORT) is None:
        raise NotQuarantined(f"no quarantined batch {batch_id!r} under {lake.quarantine_dir}")
    with lake_lock(lake, wait=wait):
        discard(lake, batch_id)
    print(f"discarded batch {batch_id}")
    return 0
