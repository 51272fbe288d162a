"""Wall time and peak memory of a command's whole process tree, sampled from /proc.

Peak memory is the highest sum, over one sample, of every process in the tree (the command and
all its descendants: for a Spark job the driver, the JVM and the Python workers). RSS (pages
shared between forked workers counted once per process: an upper bound) is sampled every 0.2 s
from /proc/PID/statm; PSS (shared pages split between the processes sharing them: the better
total) every 2 s and whenever RSS reaches a new high, as reading smaps_rollup makes the kernel
walk a big JVM's page tables (sampled as often as RSS, it cost a quarter of a core). Every 2 s
alone missed short peaks: a 16 s run sampled every 0.5 s peaked 110 MB above what it reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NoReturn

PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_EVERY_S = 0.2
PSS_EVERY = 10  # samples


@dataclass(slots=True)
class Measured:
    seconds: float
    peak_rss_mb: float
    peak_pss_mb: float
    peak_processes: int
    returncode: int
    stdout: str
    stderr: str

    def figures(self) -> dict[str, float | int]:
        out = asdict(self)
        del out["stdout"], out["stderr"]
        return out


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def tree_pids(root: int) -> list[int]:
    tree = _children()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(tree.get(pid, ()))
    return pids


def _rss(pid: int) -> int:
    """Resident bytes; zero for a process that is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


class TreeSampler:
    """Samples a process tree on a thread until stopped; keeps the peaks."""

    def __init__(self, root: int, every: float = SAMPLE_EVERY_S) -> None:
        self.root = root
        self.every = every
        self.peak_rss = self.peak_pss = self.peak_processes = 0
        self._samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        pids = tree_pids(self.root)
        rss = sum(_rss(pid) for pid in pids)
        new_high = rss > self.peak_rss
        self.peak_rss = max(self.peak_rss, rss)
        if new_high or self._samples % PSS_EVERY == 0:
            self.peak_pss = max(self.peak_pss, sum(_pss(pid) for pid in pids))
        self._samples += 1
        self.peak_processes = max(self.peak_processes, len(pids))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)


def run_measured(
    command: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> Measured:
    """Run `command`, sampling its process tree; stdout and stderr are kept."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    with TreeSampler(process.pid) as sampler:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    return Measured(
        round(seconds, 3),
        round(sampler.peak_rss / 1e6, 1),
        round(sampler.peak_pss / 1e6, 1),
        sampler.peak_processes,
        process.returncode,
        stdout,
        stderr,
    )


def warm_page_cache(paths: list[Path] | list[str]) -> None:
    """Read the inputs once, untimed, before a measured case, so every case meets them in the
    page cache. This machine pages out file pages that go unused for a while (DAMON's
    reclaim): the case measured first after a pause met the files on disk, and the next read
    them warm (`stomp-lake run` on 2.26 GB, first: 21.9 to 24.2 s from one run to the next)."""
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(1 << 20):
                pass


def cpu_seconds_by_command(root: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the live processes of a tree, by command name
    (for a Spark job: "java" and "python")."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for pid in tree_pids(root):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: round(after[name] - before.get(name, 0.0), 1) for name in sorted(after)}


def machine() -> dict[str, object]:
    """What the figures depend on, for the results files."""
    import platform

    return {
        "python": platform.python_version(),
        # which build: the venv's interpreter resolved (scripts/pick-python.sh says why it matters)
        "python_executable": os.path.realpath(sys.executable),
        "cpu_count": os.cpu_count(),
        "kernel": platform.release(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def report_and_exit(figures: object) -> NoReturn:
    """A child's figures as its last stdout line, then `pipeline.process.exit_cleanly` (Arrow's
    thread pools drained, no interpreter teardown), as every entry point ends."""
    from pipeline.process import exit_cleanly

    print(json.dumps(figures), flush=True)
    exit_cleanly(0)
