"""pipeline/validation/scheduling.py: the threads and the order suites run in. test_gate.py holds
the costliest-first order with a held suite on one thread, the cap on suites in flight and the
basic costs; these are the other rules: results as they finish, the pool's own threads, what
waits for ``until`` and what does not, and errors."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from pipeline.validation.scheduling import costliest_first, expected_cost

WAIT_S = 10.0  # a bound on every wait below: a broken rule fails, never hangs


def _done() -> Future[Any]:
    until: Future[Any] = Future()
    until.set_result(None)
    return until


def test_results_come_as_suites_finish_not_in_their_order() -> None:
    slow_may_end = threading.Event()

    def run(name: str) -> str:
        if name == "slow":
            assert slow_may_end.wait(WAIT_S)
        return name

    results = costliest_first(run, ["slow", "fast"], 2, held=(), until=_done(), then=lambda: None)
    assert next(results) == "fast"  # while "slow" still runs
    slow_may_end.set()
    assert list(results) == ["slow"]


def test_suites_run_on_the_pools_threads() -> None:
    def run(name: str) -> str:
        return threading.current_thread().name

    threads = list(
        costliest_first(run, ["a", "b", "c"], 2, held=(), until=_done(), then=lambda: None)
    )
    assert all(name.startswith("validate") for name in threads), threads
    assert threading.current_thread().name not in threads


def test_with_until_done_from_the_start_then_comes_first_and_order_is_kept() -> None:
    events: list[str] = []

    def run(name: str) -> str:
        events.append(name)
        return name

    order = ["cross", "a", "b", "checks"]
    finished = list(
        costliest_first(
            run,
            order,
            1,
            held=("cross", "checks"),
            until=_done(),
            then=lambda: events.append("then"),
        )
    )
    assert events == ["then", *order]  # once, before any suite: the held ones keep their place
    assert finished == order


def test_suites_not_held_never_wait_for_until() -> None:
    never: Future[Any] = Future()
    released: list[bool] = []
    finished = costliest_first(
        lambda name: name,
        ["a", "b", "c"],
        2,
        held=("x",),
        until=never,
        then=lambda: released.append(True),
    )
    assert sorted(finished) == ["a", "b", "c"]
    assert released == []  # then() only once until is done


def test_no_suite_yields_nothing_and_waits_for_nothing() -> None:
    never: Future[Any] = Future()
    assert list(costliest_first(lambda n: n, [], 3, held=(), until=never, then=lambda: None)) == []


def test_an_error_of_then_ends_the_run_before_a_held_suite_starts() -> None:
    started: list[str] = []

    def then() -> None:
        raise RuntimeError("the checks failed")

    def run(name: str) -> str:
        started.append(name)
        return name

    results = costliest_first(run, ["cross", "a"], 1, held=("cross",), until=_done(), then=then)
    with pytest.raises(RuntimeError, match="the checks failed"):
        list(results)
    assert "cross" not in started


def test_an_error_of_a_suite_is_raised_to_whoever_reads_the_results() -> None:
    def run(name: str) -> str:
        if name == "b":
            raise ValueError(f"suite {name} broke")
        return name

    finished: list[str] = []
    with pytest.raises(ValueError, match="suite b broke"):
        for name in costliest_first(
            run, ["a", "b", "c"], 1, held=(), until=_done(), then=lambda: None
        ):
            finished.append(name)
    assert finished == ["a"]


@pytest.mark.parametrize(
    ("name", "counts", "cost"),
    [
        ("frames", {"frames": None}, 0),  # a counter the run did not keep
        ("frames", {"frames": 2.5}, 0),  # not a row count
        ("batch_consistency", {"frames": 900, "sessions": 3}, 0),  # reads a row per table
        ("session_consistency", {"sessions": 3}, 0),  # costs the frames, not the sessions
    ],
)
def test_a_suite_without_a_row_count_costs_nothing(
    name: str, counts: dict[str, Any], cost: int
) -> None:
    assert expected_cost(name, counts) == cost
