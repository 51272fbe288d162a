"""The order and the threads the gate runs a batch's suites on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from typing import Any, TypeVar

# Suites run side by side: their Spark jobs are small, and much of each one's cost is per query
# (planning, code generation and its JIT compilation) or GX's Python, which suites in flight
# overlap. On 2 cores (116 MB batch): 2 threads 15.0-15.2 s, 3 threads 13.6-13.8 s, 4 no better.
SUITE_THREADS = 3

T = TypeVar("T")


def costliest_first(
    run: Callable[[str], T],
    order: list[str],
    threads: int,
    *,
    held: tuple[str, ...],
    until: Future[Any],
    then: Callable[[], None],
) -> Iterator[T]:
    """``run`` of every name, on ``threads`` threads, each thread taking the first name of
    ``order`` it may run; results as they come. The ``held`` names may run once ``until`` is
    done and ``then()`` (called here) has returned."""
    pending = list(order)
    running: set[Future[T]] = set()
    released = False
    with ThreadPoolExecutor(threads, thread_name_prefix="validate") as pool:
        while pending or running:
            if not released and until.done():
                then()
                released = True
            for name in [n for n in pending if released or n not in held]:
                if len(running) == threads:
                    break
                pending.remove(name)
                running.add(pool.submit(run, name))
            watched: set[Future[Any]] = set(running) if released else {*running, until}
            done, _ = wait_for(watched, return_when=FIRST_COMPLETED)
            for future in done & running:
                running.remove(future)
                yield future.result()


def expected_cost(name: str, counts: dict[str, Any]) -> int:
    """Rows a suite reads, to start the longest suites first (the session checks aggregate
    the frames)."""
    rows = counts.get("frames" if name == "session_consistency" else name)
    return rows if isinstance(rows, int) else 0
