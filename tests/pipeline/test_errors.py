"""The errors an operator can act on: one family, each with the exit code its command ends
with."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator

import pytest

from pipeline.cli import EXIT_CODES
from pipeline.errors import DiskFull, StompLakeError, UsageError
from tests.support.paths import REPO

_CLASS = re.compile(r"^class (\w+)\(([^)]*)\)", re.MULTILINE)


def _defining_modules() -> set[str]:
    """Every module of the package that defines a member of the family, found in the source
    (a class deriving from a member, to a fixed point): the test imports them all, so the
    family it sees does not depend on what other tests imported."""
    classes = [
        (".".join(path.relative_to(REPO).with_suffix("").parts), name, set(bases.split(", ")))
        for path in sorted((REPO / "pipeline").rglob("*.py"))
        for name, bases in _CLASS.findall(path.read_text())
    ]
    members = {"StompLakeError"}
    while new := {name for _, name, bases in classes if bases & members} - members:
        members |= new
    return {module for module, _, bases in classes if bases & members}


DEFINING_MODULES = tuple(sorted(_defining_modules()))


def _family(root: type[StompLakeError]) -> Iterator[type[StompLakeError]]:
    for sub in root.__subclasses__():
        yield sub
        yield from _family(sub)


@pytest.mark.parametrize(("error", "code"), [(StompLakeError, 1), (UsageError, 2), (DiskFull, 1)])
def test_each_error_carries_its_exit_code(error: type[StompLakeError], code: int) -> None:
    assert error.exit_code == code
    assert error("x").exit_code == code


def test_usage_errors_and_a_full_disk_are_caught_as_the_family() -> None:
    for error in (UsageError("bad --lake"), DiskFull("no space left on /lake")):
        with pytest.raises(StompLakeError) as caught:
            raise error
        assert caught.value is error


def test_the_message_is_the_one_line_the_operator_reads() -> None:
    error = UsageError("no such file or directory: /captures")
    assert str(error) == "no such file or directory: /captures"


def test_a_subclass_s_code_leaves_its_parent_s_alone() -> None:
    class Busy(StompLakeError):
        exit_code = 3

    assert Busy("busy").exit_code == 3
    assert StompLakeError.exit_code == 1 and UsageError.exit_code == 2


def test_every_error_of_the_family_ends_with_a_documented_exit_code() -> None:
    for module in DEFINING_MODULES:
        importlib.import_module(module)
    family = [error for error in _family(StompLakeError) if error.__module__ != __name__]
    assert {error.__module__ for error in family} == {"pipeline.errors", *DEFINING_MODULES}
    for error in family:
        assert isinstance(error.exit_code, int) and error.exit_code in EXIT_CODES, error
        assert error.exit_code != 0, error  # an error never ends a command as "done"


def test_a_usage_error_s_subclasses_keep_exit_code_2() -> None:
    for module in DEFINING_MODULES:
        importlib.import_module(module)
    usage = list(_family(UsageError))
    assert usage  # the inputs, the lake root, the audit registry and the quarantine use it
    assert {error.exit_code for error in usage} == {2}


def test_a_full_disk_names_the_module_that_resumes_after_it() -> None:
    """DiskFull's docstring sends the reader to `pipeline.lake.full_disk`: it exists."""
    assert DiskFull.__doc__ is not None and "`pipeline.lake.full_disk`" in DiskFull.__doc__
    importlib.import_module("pipeline.lake.full_disk")
