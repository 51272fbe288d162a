"""Running a fuzz target standalone for a sustained time, and what targets share.

    python -m fuzz.fuzz_decoder --seconds 600                 # atheris when installed
    python -m fuzz.fuzz_decoder --seconds 600 --engine hypothesis

A target is a module with ``check(data: bytes) -> None`` (raises on a broken invariant),
``seeds() -> list[bytes]`` (real inputs to start from) and ``strategy()`` (hypothesis bytes).
atheris (coverage-guided, libFuzzer) starts from the seeds and mutates, stops a run whose RSS
passes the limit, and ends with libFuzzer's own statistics (runs, peak RSS). The hypothesis
engine draws from ``strategy()``, which mixes mutated seeds and structured inputs, and ends with
one JSON line: seconds, inputs tried, peak RSS, and RSS after the first tenth of the run and at
the end (hypothesis keeps a record of what it tried, so its RSS grows slowly by itself).
A failing input is kept in a temporary folder whose name is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from hypothesis import strategies as st

DEFAULT_RSS_LIMIT_MB = 1024
REGRESSIONS = Path(__file__).with_name("regressions")


def current_rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Budget:
    """Counts inputs, watches RSS every `every` inputs, and stops the run when time is up."""

    def __init__(self, seconds: float, rss_limit_mb: float, every: int = 200) -> None:
        self.started = time.monotonic()
        self.seconds = seconds
        self.rss_limit_mb = rss_limit_mb
        self.every = every
        self.inputs = 0
        self.early_rss_mb: float | None = None

    def tick(self) -> None:
        self.inputs += 1
        if self.inputs % self.every:
            return
        rss = current_rss_mb()
        if rss > self.rss_limit_mb:
            raise MemoryError(f"RSS {rss:.0f} MB over the {self.rss_limit_mb:.0f} MB limit")
        if self.early_rss_mb is None and self.elapsed() >= self.seconds / 10:
            self.early_rss_mb = rss

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def over(self) -> bool:
        return self.elapsed() >= self.seconds

    def summary(self, target: str, engine: str) -> dict[str, object]:
        return {
            "target": target,
            "engine": engine,
            "seconds": round(self.elapsed(), 1),
            "inputs": self.inputs,
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "rss_after_first_tenth_mb": None
            if self.early_rss_mb is None
            else round(self.early_rss_mb, 1),
            "rss_at_end_mb": round(current_rss_mb(), 1),
        }


class _TimeUp(BaseException):
    """Not an Exception: hypothesis lets it through instead of shrinking it as a failure."""


def regressions(target: ModuleType) -> list[Path]:
    """Inputs that once broke the target (fuzz/regressions/<target>/), replayed by the tests."""
    folder = REGRESSIONS / target.__name__.rsplit(".", 1)[-1]
    return sorted(path for path in folder.glob("*") if path.is_file())


def mutated(seeds: Sequence[bytes], max_ops: int = 8) -> st.SearchStrategy[bytes]:
    """Seeds damaged the way files and streams get damaged: bytes overwritten, spans deleted,
    duplicated or inserted, and the end cut off."""

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(st.sampled_from(list(seeds))))
        ops = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**31)), max_size=max_ops))
        for op, where in ops:
            at = where % (len(data) + 1)
            if op == 0:
                data[at : at + 1] = bytes([draw(st.integers(0, 255))])
            elif op == 1:
                data[at : at + 4] = draw(st.binary(min_size=4, max_size=4))
            elif op == 2:
                del data[at : at + draw(st.integers(1, 64))]
            elif op == 3:
                data[at:at] = draw(st.binary(min_size=1, max_size=32))
            elif op == 4:
                size = draw(st.integers(1, 64))
                data[at:at] = data[at : at + size]
            else:
                del data[at:]
        return bytes(data)

    return build()


def run_hypothesis(
    check: Callable[[bytes], None], strategy: st.SearchStrategy[bytes], budget: Budget
) -> None:
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings

    failing: list[bytes] = []

    @settings(
        max_examples=10**9,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
    )
    @given(strategy)
    def sustained(data: bytes) -> None:
        if budget.over():
            raise _TimeUp
        budget.tick()
        try:
            check(data)
        except Exception:
            failing.append(data)  # shrinking ends on the smallest failing input
            raise

    try:
        sustained()
    except _TimeUp:
        pass
    except Exception:
        saved = Path(tempfile.mkdtemp(prefix="fuzz-failure-")) / "input.bin"
        saved.write_bytes(failing[-1])
        print(f"failing input ({len(failing[-1])} bytes) saved to {saved}", file=sys.stderr)
        raise


def run_atheris(
    check: Callable[[bytes], None],
    seeds: Sequence[bytes],
    budget: Budget,
    max_len: int,
    corpus: Path | None,
) -> None:
    import atheris

    corpus_dir = corpus or Path(tempfile.mkdtemp(prefix="fuzz-corpus-"))
    corpus_dir.mkdir(parents=True, exist_ok=True)
    for number, seed in enumerate(seeds):
        (corpus_dir / f"seed-{number:04d}").write_bytes(seed[:max_len])

    def one_input(data: bytes) -> None:
        budget.tick()
        check(data)

    args = [
        sys.argv[0],
        f"-max_total_time={int(budget.seconds)}",
        f"-rss_limit_mb={int(budget.rss_limit_mb)}",
        f"-max_len={max_len}",
        "-print_final_stats=1",
        f"-artifact_prefix={tempfile.mkdtemp(prefix='fuzz-artifacts-')}/",  # not the cwd
        str(corpus_dir),
    ]
    atheris.instrument_all()  # coverage of every Python function loaded so far (the pipeline)
    atheris.Setup(args, one_input)
    atheris.Fuzz()  # exits the process when time is up


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def main(target: ModuleType, argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {target.__name__}", description=target.__doc__
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    parser.add_argument("--rss-limit-mb", type=float, default=DEFAULT_RSS_LIMIT_MB)
    parser.add_argument("--max-len", type=int, default=getattr(target, "MAX_LEN", 1 << 16))
    parser.add_argument("--corpus", type=Path, help="atheris: keep the corpus in this folder")
    args = parser.parse_args(argv)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if atheris_available() else "hypothesis"
    budget = Budget(args.seconds, args.rss_limit_mb)
    name = target.__name__.rsplit(".", 1)[-1]

    def report() -> None:
        print(json.dumps(budget.summary(name, engine)), flush=True)

    if engine == "atheris":  # libFuzzer prints its own summary (stat::...) and exits
        run_atheris(target.check, target.seeds(), budget, args.max_len, args.corpus)
        return 0
    run_hypothesis(target.check, target.strategy(), budget)
    report()
    return 0
