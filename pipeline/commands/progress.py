"""What `stomp-lake run` shows while it works.

The runner reports its stages as lines ("stage 2/4: ..."), hands over its SparkSession once
Spark is up (`attach`) and, with each stage, a function that describes the stage's work so far
in the pipeline's terms (`figures`: files and bytes read, flows and frames decoded, table files
written, suites validated, tables committed; see `pipeline.spark.task_counters`). A thread polls
those figures and Spark's status tracker (tasks of the stages running now, jobs done since the
pipeline stage began). On a terminal that drives a live display (rich), one line per pipeline
stage with the figures and a bar over the running Spark tasks; in a log (Airflow, cron) the same
go out as a plain line, at most every `$STOMP_LAKE_PROGRESS_SECONDS` (default 10) seconds and
only when they changed, and each stage's final figures as it ends.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.progress import Progress, TaskID

PREFIX = "[stomp-lake] "
INTERVAL_VARIABLE = "STOMP_LAKE_PROGRESS_SECONDS"
DEFAULT_PLAIN_INTERVAL_S = 10.0
POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class SparkActivity:
    """Spark's work as the status tracker sees it at one moment."""

    tasks_done: int = 0  # in the stages running now
    tasks: int = 0
    jobs_done: int = 0  # since the tracker was created, or since a pipeline stage began

    def describe(self) -> str:
        parts = [f"{self.jobs_done} Spark jobs done"]
        if self.tasks:
            parts.append(f"tasks {self.tasks_done}/{self.tasks} of the running stages")
        return ", ".join(parts)


class SparkTracker:
    """Spark's jobs and tasks since the tracker was made. A poll asks Spark about the jobs it
    has not yet seen succeed, not about every job it retains (up to `spark.ui.retainedJobs`, a
    round trip to the JVM each), so a poll stays quick in a long-lived session."""

    def __init__(self, spark: SparkSession) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._before = set(self._tracker.getJobIdsForGroup())
        self._succeeded: set[int] = set()

    def _jobs_done(self) -> int:
        for job in self._tracker.getJobIdsForGroup():
            if job in self._before or job in self._succeeded:
                continue
            info = self._tracker.getJobInfo(job)
            if info is not None and info.status == "SUCCEEDED":
                self._succeeded.add(job)
        return len(self._succeeded)

    def poll(self) -> SparkActivity:
        done = total = 0
        for stage_id in self._tracker.getActiveStageIds():
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        return SparkActivity(done, total, self._jobs_done())


class RunProgress:
    """The runner's `progress`: call with a message; `attach(spark)` once Spark is up;
    `figures(describe)` after a stage's message; a context manager around the run.
    `verbosity` < 0 shows nothing."""

    def __init__(
        self,
        verbosity: int = 0,
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        interval_s: float | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = verbosity < 0
        self.live = self.stream.isatty() if live is None else live
        self.interval_s = (
            interval_s
            if interval_s is not None
            else float(os.environ.get(INTERVAL_VARIABLE) or DEFAULT_PLAIN_INTERVAL_S)
        )
        self._tracker: SparkTracker | None = None
        self._stage: str | None = None
        self._describe: Callable[[], str] | None = None  # the stage's figures, domain terms
        self._stage_started = time.monotonic()
        self._last_line: tuple[str, str, SparkActivity] | None = None
        self._last_line_at = 0.0
        self._jobs_seen = 0  # by the last poll: a pipeline stage counts its jobs from here
        self._jobs_base = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._rich: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> RunProgress:
        if not self.quiet and self.live:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._rich = Progress(
                SpinnerColumn(finished_text="[green]✓"),
                TextColumn("{task.description}"),
                TextColumn("{task.fields[figures]}"),
                BarColumn(bar_width=16),
                TextColumn("[dim]{task.fields[jobs]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._rich.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._end_stage(failed=exc_type is not None)
        if self._rich is not None:
            self._rich.stop()

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        with self._lock:
            if message.startswith("stage "):
                self._end_stage()
                self._start_stage(message)
            elif self._rich is not None:
                self._rich.console.print(message, markup=False, highlight=False)
            else:
                self._line(message)

    def attach(self, spark: SparkSession) -> None:
        if self.quiet or self._thread is not None:
            return
        self._tracker = SparkTracker(spark)
        self._thread = threading.Thread(target=self._poll, name="run-progress", daemon=True)
        self._thread.start()

    def figures(self, describe: Callable[[], str]) -> None:
        """The current stage's work so far, e.g. "3/7 files, 1.2 GB of 2.3 GB, 4.1 M packets":
        read on every poll and once more as the stage ends."""
        if self.quiet:
            return
        with self._lock:
            self._describe = describe

    def _start_stage(self, message: str) -> None:
        self._stage = message
        self._describe = None
        self._stage_started = time.monotonic()
        self._jobs_base = self._jobs_seen
        self._last_line = None
        if self._rich is None:
            self._line(message)
            self._last_line_at = time.monotonic()
            return
        self._task = self._rich.add_task(message, total=None, figures="", jobs="")

    def _end_stage(self, failed: bool = False) -> None:
        """The stage's final figures: ticked off on a terminal (left unticked when the run
        failed in it), a line of its own in a log."""
        if self._stage is None:
            return
        figures = self._figures()
        if self._rich is not None and self._task is not None:
            if failed:
                self._rich.update(self._task, figures=figures)
            else:
                task = self._rich.tasks[self._task]
                total = task.total or task.completed or 1
                self._rich.update(self._task, total=total, completed=total, figures=figures)
        elif figures:
            elapsed = time.monotonic() - self._stage_started
            how = "stopped" if failed else "done"
            self._line(f"  {self._label()} {how}: {figures}, {elapsed:.0f} s")
        self._stage = None
        self._describe = None

    def _figures(self) -> str:
        if self._describe is None:
            return ""
        try:
            return self._describe()
        except Exception:  # noqa: BLE001 - Spark stopping under us: progress is not worth a crash
            return ""

    def _label(self) -> str:
        return (self._stage or "").split(":", 1)[0]

    def _line(self, message: str) -> None:
        print(f"{PREFIX}{message}", file=self.stream, flush=True)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            tracker = self._tracker
            if tracker is None:
                continue
            try:
                activity = tracker.poll()
            except Exception:  # noqa: BLE001 - Spark stopping under us: progress is not worth a crash
                return
            with self._lock:
                self._show(activity)

    def _show(self, activity: SparkActivity) -> None:
        self._jobs_seen = activity.jobs_done
        activity = SparkActivity(
            activity.tasks_done, activity.tasks, activity.jobs_done - self._jobs_base
        )
        if self._stage is None:
            return
        figures = self._figures()
        if self._rich is not None and self._task is not None:
            self._rich.update(
                self._task,
                total=activity.tasks or None,
                completed=activity.tasks_done,
                figures=figures,
                jobs=f"{activity.jobs_done} jobs",
            )
            return
        now = time.monotonic()
        if now - self._last_line_at < self.interval_s:
            return
        if self._last_line == (self._stage, figures, activity):
            return
        self._last_line = (self._stage, figures, activity)
        self._last_line_at = now
        elapsed = now - self._stage_started
        spark = activity.describe()
        what = f"{figures}; {spark}" if figures else spark
        self._line(f"  {self._label()}: {what}, {elapsed:.0f} s")
