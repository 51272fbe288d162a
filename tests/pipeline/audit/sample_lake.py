"""The lake of the bundled samples, built once per test run and shared read-only by the audit,
sql and report tests (each module still asks for it through its own module-scoped fixture).

Also the client-side records of the samples, which the tests take their expected counts from.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.lake import Lake
from pipeline.runner import RunConfig, run
from tests.support.paths import SAMPLES

RECORDS = sorted(SAMPLES.glob("*.expected.json"))


def shared_sample_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """Needs the `spark` fixture to be up. `validate=False`: these tests read the tables, the
    validation gate has tests of its own."""
    root = tmp_path_factory.getbasetemp() / "shared-sample-lake"
    done = root / "_built"
    if not done.exists():
        result = run(
            RunConfig(inputs=[SAMPLES], lake=root, close_open=True, validate=False),
            progress=lambda _: None,
        )
        assert result.files == len(RECORDS)
        done.touch()
    return Lake(root)


def records() -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in RECORDS]


def connections() -> Iterator[dict[str, Any]]:
    for record in records():
        yield from record["connections"]
