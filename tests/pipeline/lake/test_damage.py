"""A damaged lake's findings, and the one-line refusal they make."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.cli import EXIT_CODES
from pipeline.errors import StompLakeError
from pipeline.lake.damage import RECOVERY_DOC, Damage, DamagedLake
from tests.support.paths import REPO

LOG = Path("/lake/tables/frames/_delta_log/00000000000000000003.json")
CUT = Damage(LOG, "line 2 is not JSON (cut?)", "restore the file from a backup")
COUNTER = Damage(
    Path("/lake/_state/batch-counter.json"), "empty", "rebuild it with stomp-lake doctor"
)


def test_a_finding_is_one_line_naming_the_file_the_problem_and_the_repair() -> None:
    assert CUT.line() == (
        f"{LOG}: line 2 is not JSON (cut?); restore the file from a backup "
        "(see docs/operations.md#damaged-lake-state)"
    )
    assert "\n" not in CUT.line()


def test_findings_are_values() -> None:
    same = Damage(Path(str(LOG)), CUT.problem, CUT.repair)
    assert same == CUT and hash(same) == hash(CUT)
    with pytest.raises(AttributeError):
        CUT.problem = "other"  # type: ignore[misc]


def test_the_recovery_doc_section_exists() -> None:
    doc, anchor = RECOVERY_DOC.split("#")
    headings = re.findall(r"^#+ (.+)$", (REPO / doc).read_text(), re.MULTILINE)
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-") for h in headings}
    assert anchor in anchors


def test_one_finding_makes_the_whole_message() -> None:
    refused = DamagedLake([CUT])
    assert str(refused) == f"lake state damaged, refusing to run: {CUT.line()}"
    assert refused.findings == [CUT]


@pytest.mark.parametrize(("count", "more"), [(2, "1 more"), (3, "2 more")])
def test_more_findings_are_counted_and_left_to_doctor(count: int, more: str) -> None:
    findings = [CUT, *[COUNTER] * (count - 1)]
    refused = DamagedLake(findings)
    assert str(refused) == (
        f"lake state damaged, refusing to run: {CUT.line()} "
        f"(and {more}: stomp-lake doctor lists them)"
    )
    assert refused.findings == findings  # every finding kept for doctor, in order


def test_a_damaged_lake_exits_5_as_the_cli_and_the_doc_say() -> None:
    refused = DamagedLake([CUT])
    assert isinstance(refused, StompLakeError) and isinstance(refused, RuntimeError)
    assert refused.exit_code == DamagedLake.exit_code == 5
    assert "damaged" in EXIT_CODES[5]
    assert "exit 0 intact, 5 damaged" in (REPO / "docs" / "operations.md").read_text()
