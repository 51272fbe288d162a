"""pipeline/commands/progress.py: a run of a real sample capture shows its progress in the
pipeline's terms, stage by stage: files, bytes and packets read; flows, frames and table files;
suites validated; tables committed. In a log as plain lines (now and then, and each stage's final
figures as it ends), on a terminal (a real pseudo-terminal) as rich's live display."""

from __future__ import annotations

import io
import os
import pty
import re
import threading
from pathlib import Path

import pytest

from pipeline.commands.progress import PREFIX, RunProgress, SparkTracker
from pipeline.runner import RunConfig, RunResult, run
from pipeline.spark.task_counters import human_bytes, human_count
from pipeline.validation.suites import SUITE_NAMES
from tests.support.paths import SAMPLES

SAMPLE = SAMPLES / "activemq-queues-acks.pcap"


def _figures_of(result: RunResult) -> dict[int, str]:
    """What each stage's "done" line must say, from the run's own counts."""
    counts = result.counts
    size = human_bytes(SAMPLE.stat().st_size)
    return {
        1: f"1/1 files, {size} of {size}, {human_count(counts['packets'])} packets",
        2: f"flows, {human_count(counts['frames'])} frames, ",
        3: f"{len(SUITE_NAMES)}/{len(SUITE_NAMES)} suites",
        4: f"{len(result.tables)}/{len(result.tables)} tables",
    }


@pytest.mark.spark
def test_in_a_log_each_stage_shows_its_figures(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Polled often: each stage of a run over the samples, validation too, lasts under a second.
    monkeypatch.setattr("pipeline.commands.progress.POLL_S", 0.05)
    log = io.StringIO()
    with RunProgress(0, log, live=False, interval_s=0) as progress:
        result = run(RunConfig(inputs=[SAMPLE], lake=tmp_path / "lake"), progress)
    lines = log.getvalue().splitlines()
    assert all(line.startswith(PREFIX) for line in lines)
    figures = _figures_of(result)
    for stage, expected in figures.items():
        done = [line for line in lines if line.startswith(f"{PREFIX}  stage {stage}/4 done: ")]
        assert len(done) == 1, (stage, log.getvalue())
        assert expected in done[0], (expected, done[0])
        assert re.search(r", \d+ s$", done[0])
    # now and then while a stage runs: its figures so far, then Spark's jobs and tasks (which
    # stages last long enough to be polled depends on the machine's load)
    during = [line for line in lines if re.match(rf"{re.escape(PREFIX)}  stage \d/4: ", line)]
    assert any(re.search(r": [^;]+; \d+ Spark jobs done", line) for line in during), lines
    # the order a reader follows: a stage's line, its figures, then the next stage
    starts = [
        i for i, line in enumerate(lines) if re.match(rf"{re.escape(PREFIX)}stage \d/4", line)
    ]
    ends = [i for i, line in enumerate(lines) if " done: " in line]
    assert len(starts) == len(ends) == 4
    assert all(start < end for start, end in zip(starts, ends, strict=True))
    assert all(end < start for end, start in zip(ends, starts[1:], strict=False))


@pytest.mark.spark
def test_on_a_terminal_each_stage_is_a_live_line_with_its_figures(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setenv("TERM", "xterm-256color")
    leader, follower = pty.openpty()
    screen = bytearray()

    def read_screen() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's last writer closed it
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read_screen, daemon=True)
    reader.start()
    terminal = open(follower, "w", encoding="utf-8")  # noqa: SIM115 - closed below, then read
    with terminal, RunProgress(0, terminal) as progress:
        assert progress.live  # told by the stream itself
        result = run(RunConfig(inputs=[SAMPLE], lake=tmp_path / "lake"), progress)
    reader.join(timeout=10)
    os.close(leader)
    text = screen.decode("utf-8", "replace")
    assert "\x1b[" in text  # drawn, not printed
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    final = plain[plain.rindex("stage 1/4") - 2 :]  # the last drawing of the four lines
    for expected in _figures_of(result).values():
        assert expected in final, (expected, final)
    assert final.count("✓") == 4 and " jobs" in final


def test_in_a_log_a_stage_ends_with_a_line_of_its_final_figures() -> None:
    log = io.StringIO()
    with RunProgress(0, log, live=False, interval_s=0) as progress:
        progress("stage 1/4: reading packets")
        progress.figures(lambda: "1/1 files, 45.9 KB of 45.9 KB, 170 packets")
        progress("stage 2/4: decoding sessions, staging tables")  # no figures: no final line
        progress("stage 3/4: validating")
        progress.figures(_spark_gone)  # figures that fail are left out
    assert log.getvalue().splitlines() == [
        f"{PREFIX}stage 1/4: reading packets",
        f"{PREFIX}  stage 1/4 done: 1/1 files, 45.9 KB of 45.9 KB, 170 packets, 0 s",
        f"{PREFIX}stage 2/4: decoding sessions, staging tables",
        f"{PREFIX}stage 3/4: validating",
    ]


def test_in_a_log_a_stage_the_run_failed_in_is_stopped_not_done() -> None:
    log = io.StringIO()
    with pytest.raises(RuntimeError), RunProgress(0, log, live=False) as progress:
        progress("stage 3/4: validating")
        progress.figures(lambda: "9/13 suites")
        raise RuntimeError("a suite failed")
    assert log.getvalue().splitlines()[-1] == f"{PREFIX}  stage 3/4 stopped: 9/13 suites, 0 s"


@pytest.mark.spark
def test_spark_jobs_are_counted_from_when_the_tracker_was_made(
    spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(5):
        spark.range(10).collect()
    tracker = SparkTracker(spark)
    asked: list[int] = []  # a round trip to the JVM each
    job_info = tracker._tracker.getJobInfo

    def counted_job_info(job: int) -> object:
        asked.append(job)
        return job_info(job)

    monkeypatch.setattr(tracker._tracker, "getJobInfo", counted_job_info)
    assert tracker.poll().jobs_done == 0 and asked == []  # not about the jobs before it
    spark.range(10).collect()
    once = tracker.poll().jobs_done
    assert once >= 1 and len(asked) == once
    spark.range(10).collect()
    assert tracker.poll().jobs_done == tracker.poll().jobs_done == 2 * once
    assert len(asked) == 2 * once  # a job seen to succeed is not asked about again


def _spark_gone() -> str:
    raise ConnectionError("the accumulator server went away")


def test_quiet_shows_nothing() -> None:
    log = io.StringIO()
    with RunProgress(-1, log, live=False, interval_s=0) as progress:
        progress("stage 1/4: reading packets")
        progress.figures(lambda: "1/1 files")
        progress("done")
    assert log.getvalue() == ""
