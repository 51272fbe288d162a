"""pipeline/validation/gx_context.py: the gate's GX context, its validation definitions run
cheaply or with details, and its Data Docs built private and scrubbed. test_gate.py holds that
the context writes no copy of its configuration and where its docs site points; the suites run
here on GX's pandas engine (a real GX run, without Spark)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import great_expectations as gx
import pandas as pd
import pytest

from pipeline.lake import Lake
from pipeline.lake.layout import DIR_MODE, FILE_MODE
from pipeline.validation import gx_context

SECRET = "hunter2"
# Seven frames of one session, the last six with an unknown command: more than SAMPLE_ROWS.
ROWS = pd.DataFrame(
    {
        "session_id": ["s1"] * 7,
        "frame_index": list(range(7)),
        "command": ["SEND", "FROB", "FROB", "FROB", "FROB", "FROB", f"passcode:{SECRET}"],
    }
)


def _modes(folder: Path) -> set[tuple[bool, int]]:
    return {(p.is_dir(), stat.S_IMODE(p.stat().st_mode)) for p in [folder, *folder.rglob("*")]}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return Lake(tmp_path_factory.mktemp("gx_context") / "lake").ensure()


@pytest.fixture(scope="module")
def validated(lake: Lake) -> Iterator[tuple[Any, Any]]:
    """A context of batch b1 with one validation definition over ``ROWS`` (commands in a set,
    a description spelling a passcode out): the context and the definition."""
    context = gx_context.new_context(lake, "b1")
    batch = (
        context.data_sources.add_pandas("frames_source")
        .add_dataframe_asset("frames")
        .add_batch_definition_whole_dataframe("batch")
    )
    suite = gx.ExpectationSuite(
        "frames",
        expectations=[
            gx.expectations.ExpectColumnValuesToBeInSet(
                column="command",
                value_set=["SEND"],
                description=f"a known command (login with passcode:{SECRET})",
            ),
            gx.expectations.ExpectColumnValuesToNotBeNull(column="session_id"),
        ],
    )
    yield context, gx_context.add_definition(context, "frames", batch, suite)


def _run(definition: Any, columns: list[str], *, detailed: bool) -> Any:
    return gx_context.run_definition(
        definition, {"dataframe": ROWS}, columns, "b1", detailed=detailed
    )


def test_a_context_keeps_its_batchs_docs_in_a_private_folder_of_its_own(lake: Lake) -> None:
    gx_context.new_context(lake, "b2")
    assert (lake.docs_dir / "b2").is_dir()
    assert stat.S_IMODE((lake.docs_dir / "b2").stat().st_mode) == DIR_MODE
    other = gx_context.new_context(lake, "b3").variables.data_docs_sites[gx_context.DOCS_SITE]
    assert other["store_backend"]["base_directory"] == str(lake.docs_dir / "b3")


def test_a_definition_is_named_and_its_suite_added_to_the_context(
    validated: tuple[Any, Any],
) -> None:
    context, definition = validated
    assert definition.name == "frames"
    assert context.validation_definitions.get("frames").name == "frames"
    assert definition.suite.name == "frames" == context.suites.get("frames").name
    assert len(context.suites.get("frames").expectations) == 2
    assert definition.data.name == "batch" and definition.data.data_asset.name == "frames"


def test_a_cheap_run_gives_each_expectations_success_only(validated: tuple[Any, Any]) -> None:
    result = _run(validated[1], list(ROWS.columns), detailed=False)
    assert not result.success
    by_kind = {r.expectation_config.type: r.success for r in result.results}
    assert by_kind == {
        "expect_column_values_to_be_in_set": False,
        "expect_column_values_to_not_be_null": True,
    }
    assert all(r.result == {} for r in result.results)  # BOOLEAN_ONLY: no counts, no values
    assert result.meta["run_id"].run_name == "b1"


def test_a_detailed_run_counts_and_names_up_to_sample_rows(validated: tuple[Any, Any]) -> None:
    result = _run(validated[1], list(ROWS.columns), detailed=True)
    [details] = [r.result for r in result.results if not r.success]
    assert details["unexpected_count"] == 6
    assert len(details["partial_unexpected_list"]) == gx_context.SAMPLE_ROWS
    assert details["unexpected_index_column_names"] == ["session_id", "frame_index"]
    named = details["partial_unexpected_index_list"]
    assert sorted(row["frame_index"] for row in named) == [1, 2, 3, 4, 5]
    assert {row["session_id"] for row in named} == {"s1"}
    assert result.meta["run_id"].run_name == "b1"


@pytest.mark.parametrize(
    ("columns", "named"),
    [
        (["frame_index", "command", "session_id"], ["session_id", "frame_index"]),
        (["session_id", "command"], ["session_id"]),
        (["frame_index", "command"], ["frame_index"]),
        (["command"], None),  # a relation with neither: GX names rows by position
    ],
)
def test_rows_are_named_by_the_index_columns_the_relation_has(
    validated: tuple[Any, Any], columns: list[str], named: list[str] | None
) -> None:
    result = _run(validated[1], columns, detailed=True)
    [details] = [r.result for r in result.results if not r.success]
    assert details.get("unexpected_index_column_names") == named


def test_docs_are_built_private_with_passcodes_masked(
    lake: Lake, validated: tuple[Any, Any]
) -> None:
    context, definition = validated
    _run(definition, list(ROWS.columns), detailed=True)  # a failed value and a description
    previous = os.umask(0)  # whatever this process's umask, the docs stay private
    try:
        index = gx_context.build_docs(context, lake, "b1")
    finally:
        os.umask(previous)
    assert index == lake.docs_dir / "b1" / "index.html" and index.is_file()
    pages = index.parent.rglob("*.html")
    assert any("passcode:***" in p.read_text() for p in pages)  # the docs did spell it out
    files = [p for p in index.parent.rglob("*") if p.is_file()]
    assert not any(SECRET.encode() in p.read_bytes() for p in files)
    assert _modes(index.parent) <= {(True, DIR_MODE), (False, FILE_MODE)}


def test_scrubbing_masks_text_files_only_and_keeps_their_bytes(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "static" / "images").mkdir(parents=True)
    spelled = f"login: guest passcode:{SECRET} done".encode()
    texts = {
        docs / "index.html": b"<p>" + spelled + b"</p>",
        docs / "static" / "page.json": b'{"v": "' + spelled + b'"}',
        docs / "static" / "notes.txt": b"\xff\xfe not UTF-8, then " + spelled,
    }
    others = {
        docs / "static" / "images" / "logo.png": b"\x89PNG " + spelled,
        docs / "static" / "style.css": spelled,
    }
    clean = docs / "clean.md"
    for path, content in {**texts, **others, clean: b"# nothing secret"}.items():
        path.write_bytes(content)
    os.utime(clean, ns=(1_000_000_000, 1_000_000_000))

    gx_context.scrub_docs(docs)

    masked = spelled.replace(SECRET.encode(), b"***")
    for path, content in texts.items():
        assert path.read_bytes() == content.replace(spelled, masked), path
    for path, content in others.items():
        assert path.read_bytes() == content, path  # not a page's text: left as it is
    assert clean.stat().st_mtime_ns == 1_000_000_000  # nothing to mask: not written again
    assert _modes(docs) <= {(True, DIR_MODE), (False, FILE_MODE)}
