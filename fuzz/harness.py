"""Running a fuzz target standalone for a sustained time, and what targets share.

    python -m fuzz.fuzz_decoder --seconds 600                 # atheris when installed
    python -m fuzz.fuzz_decoder --seconds 600 --engine hypothesis
    python -m fuzz.fuzz_decoder --corpus NEW --also KEPT       # atheris, from a kept corpus
    python -m fuzz.fuzz_decoder --merge --corpus OUT --also KEPT --also NEW   # minimize
    python -m fuzz.fuzz_decoder -runs=100 DIR                  # libFuzzer's own arguments

(fuzz/run.sh runs a session of a target this way on the sanitizer build.)

A target is a module with ``check(data: bytes) -> None`` (raises on a broken invariant),
``seeds() -> list[bytes]`` (real inputs to start from) and ``strategy()`` (hypothesis bytes).
atheris (coverage-guided, libFuzzer) starts from the seeds and the corpora, stops a run whose RSS
passes the limit, and ends with libFuzzer's own statistics (runs, peak RSS). The hypothesis
engine draws from ``strategy()``, which mixes mutated seeds and structured inputs, and ends with
one JSON line: seconds, inputs tried, peak RSS, and RSS after the first tenth of the run and at
the end (hypothesis keeps a record of what it tried, so its RSS grows slowly by itself).
A failing input is kept in a temporary folder whose name is printed.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import re
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from hypothesis import strategies as st

from fuzz import twins

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


LIBFUZZER_FLAG = re.compile(r"^-[a-z_]+=")


def run_atheris(
    check: Callable[[bytes], None],
    libfuzzer_args: Sequence[str],
    budget: Budget | None = None,
) -> None:
    """libFuzzer over ``check`` with these arguments (flags, then corpus folders: new inputs go
    to the first). Coverage: our packages' Python functions (atheris' bytecode
    instrumentation) and, in the sanitizer build (fuzz/build.sh), the compiled modules' own
    edges. Exits the process when done, as libFuzzer does."""
    import atheris

    def one_input(data: bytes) -> None:
        if budget is not None:
            budget.tick()
        check(data)

    instrument_ours(atheris)
    atheris.Setup(list(libfuzzer_args), one_input)
    atheris.Fuzz()


OUR_PACKAGES = ("pipeline", "capture", "schemas")  # not `fuzz`: see instrument_ours


def instrument_ours(atheris: ModuleType) -> None:
    """atheris' coverage of every Python function of our product's packages loaded so far (the
    twin's too). Not `atheris.instrument_all`: instrumenting every library's functions as well
    takes minutes under the sanitizers, and their coverage is not what is looked for. Not the
    targets' own checks either: their loops over every byte and event, instrumented, halved
    the rate of every target, and a branch of a check is no new behaviour of the product."""
    folders = tuple(
        os.path.dirname(module.__file__) + os.sep
        for name in OUR_PACKAGES
        if (module := sys.modules.get(name)) is not None and module.__file__
    )
    functions = [
        obj
        for obj in gc.get_objects()
        if inspect.isfunction(obj) and obj.__code__.co_filename.startswith(folders)
    ]
    print(f"INFO: Instrumenting {len(functions)} functions of {OUR_PACKAGES}", file=sys.stderr)
    for function in functions:
        try:
            atheris.instrument_func(function)
        except Exception as error:  # noqa: BLE001 - one function less, the run goes on
            print(f"INFO: {function.__qualname__} not instrumented: {error}", file=sys.stderr)


def libfuzzer_args(
    target: ModuleType,
    seconds: float | None,
    rss_limit_mb: float,
    max_len: int,
    corpus: Path | None,
    also: Sequence[Path],
    merge: bool,
) -> list[str]:
    """libFuzzer's arguments for a run: ``corpus`` (new inputs) first, then the folders in
    ``also`` and the target's seeds, read only. With ``merge``, the inputs of all of them that
    add coverage are copied into ``corpus`` (libFuzzer's -merge=1: a minimized corpus)."""
    corpus_dir = corpus or Path(tempfile.mkdtemp(prefix="fuzz-corpus-"))
    corpus_dir.mkdir(parents=True, exist_ok=True)
    seeds_dir = Path(tempfile.mkdtemp(prefix="fuzz-seeds-"))
    for number, seed in enumerate(target.seeds()):
        (seeds_dir / f"seed-{number:04d}").write_bytes(seed[:max_len])
    # libFuzzer runs this command again for -merge (and writes it in its reports): the target,
    # not the module's file path that sys.argv[0] holds
    args = [f"{sys.executable} -m {module_name(target)}"]
    if seconds is not None:
        args.append(f"-max_total_time={int(seconds)}")
    args += [
        f"-rss_limit_mb={int(rss_limit_mb)}",
        f"-max_len={max_len}",
        "-timeout=120",
        "-detect_leaks=0",  # CPython keeps memory to its end by design
        "-print_final_stats=1",
        f"-artifact_prefix={tempfile.mkdtemp(prefix='fuzz-artifacts-')}/",  # not the cwd
    ]
    if merge:
        args.append("-merge=1")
    return [*args, str(corpus_dir), *(str(path) for path in also if path.is_dir()), str(seeds_dir)]


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def module_name(target: ModuleType) -> str:
    """The target's importable name (``__name__`` is ``__main__`` under ``python -m``)."""
    spec = target.__spec__
    return target.__name__ if spec is None else spec.name


def main(target: ModuleType, argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(LIBFUZZER_FLAG.match(arg) for arg in argv):  # libFuzzer's own arguments, as given
        run_atheris(target.check, [f"{sys.executable} -m {module_name(target)}", *argv])
        return 0
    parser = argparse.ArgumentParser(
        prog=f"python -m {module_name(target)}", description=target.__doc__
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--engine", choices=["auto", "atheris", "hypothesis"], default="auto")
    parser.add_argument("--rss-limit-mb", type=float, default=DEFAULT_RSS_LIMIT_MB)
    parser.add_argument("--max-len", type=int, default=getattr(target, "MAX_LEN", 1 << 16))
    parser.add_argument("--corpus", type=Path, help="atheris: new inputs go to this folder")
    parser.add_argument(
        "--also", type=Path, action="append", default=[], help="atheris: a corpus read only"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="atheris: copy the inputs that add coverage (of --also and the seeds) to --corpus",
    )
    args = parser.parse_args(argv)
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if atheris_available() else "hypothesis"
    budget = Budget(args.seconds, args.rss_limit_mb)
    name = module_name(target).rsplit(".", 1)[-1]

    if engine == "atheris":  # libFuzzer prints its own summary (stat::...) and exits
        compiled = twins.compiled_modules()
        print(f"{name}: {len(compiled)} compiled modules loaded", file=sys.stderr, flush=True)
        seconds = None if args.merge else args.seconds
        run_atheris(
            target.check,
            libfuzzer_args(
                target, seconds, args.rss_limit_mb, args.max_len, args.corpus, args.also,
                args.merge,
            ),
            None if args.merge else budget,
        )  # fmt: skip
        return 0
    run_hypothesis(target.check, target.strategy(), budget)
    print(json.dumps(budget.summary(name, engine)), flush=True)
    return 0
