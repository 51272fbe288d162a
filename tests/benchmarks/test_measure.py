"""benchmarks/measure.py: a command's wall time and the peak memory of its whole process tree."""

from __future__ import annotations

import sys

from benchmarks.measure import machine, run_measured, tree_pids

HOLD = "import time; block = bytearray({mb} * 1024 * 1024); block[::4096] = b'x' * len(block[::4096]); time.sleep(0.6)"  # noqa: E501


def test_peak_memory_counts_every_process_of_the_tree() -> None:
    child = f'{sys.executable} -c "{HOLD.format(mb=150)}"'
    command = ["sh", "-c", f"{child} & {child}; wait"]
    measured = run_measured(command, timeout=60)
    assert measured.returncode == 0
    assert measured.peak_processes >= 3  # the shell and both Pythons
    assert measured.peak_rss_mb > 2 * 150
    assert 0 < measured.peak_pss_mb <= measured.peak_rss_mb
    assert 0.6 <= measured.seconds < 30


def test_output_and_exit_status_are_kept() -> None:
    measured = run_measured([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"])
    assert measured.returncode == 3 and measured.stdout.strip() == "out"
    assert set(measured.figures()) == {
        "seconds",
        "peak_rss_mb",
        "peak_pss_mb",
        "peak_processes",
        "returncode",
    }


def test_tree_of_this_process_holds_itself_and_machine_figures_are_there() -> None:
    import os

    assert os.getpid() in tree_pids(os.getpid())
    assert {"cpu_count", "load_average_1min", "python"} <= set(machine())


def test_pss_is_sampled_at_each_new_rss_high_not_only_every_few_samples(monkeypatch) -> None:
    """A peak shorter than PSS's period is still seen: PSS is read whenever RSS peaks."""
    import os

    from benchmarks import measure

    rss = iter([100, 120, 110, 900, 130, 140, 150, 160, 170, 180, 190])
    pss_reads: list[int] = []
    monkeypatch.setattr(measure, "tree_pids", lambda root: [root])
    monkeypatch.setattr(measure, "_rss", lambda pid: next(rss))

    def pss(pid: int) -> int:
        pss_reads.append(pid)
        return 800 if len(pss_reads) == 3 else 50  # the third read falls on the 900 peak

    monkeypatch.setattr(measure, "_pss", pss)
    sampler = measure.TreeSampler(os.getpid())
    for _ in range(11):
        sampler.sample()
    assert sampler.peak_rss == 900 and sampler.peak_pss == 800
    # read at sample 0 (a first high, and the period), at 120 and 900 (new highs), at sample 10
    # (the period); not at the lower values in between
    assert len(pss_reads) == 4
