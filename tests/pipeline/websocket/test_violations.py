"""Every WebSocket violation kind is a documented, unique snake_case constant, told apart from the
STOMP and TLS kinds in the same anomalies column, and reported somewhere by the transport."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from pipeline.stomp import violations as stomp_violations
from pipeline.websocket import violations as v


def _kinds() -> tuple[dict[str, str], set[str]]:
    """The module's string constants by name, and the names a docstring follows."""
    body = ast.parse(inspect.getsource(v)).body
    constants: dict[str, str] = {}
    documented: set[str] = set()
    for node, following in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            [target] = node.targets
            assert isinstance(target, ast.Name)
            constants[target.id] = node.value.value
            if (
                isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
                and following.value.value.strip()
            ):
                documented.add(target.id)
    return constants, documented


CONSTANTS, DOCUMENTED = _kinds()


def test_the_module_holds_the_twenty_kinds_it_documents() -> None:
    assert len(CONSTANTS) == 20
    assert {name: getattr(v, name) for name in CONSTANTS} == CONSTANTS


def test_every_kind_has_its_own_docstring() -> None:
    assert set(CONSTANTS) == DOCUMENTED


def test_kinds_are_unique() -> None:
    assert len(set(CONSTANTS.values())) == len(CONSTANTS)


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_a_kind_is_websocket_prefixed_snake_case_named_like_its_constant(name: str) -> None:
    """The session model files a transport kind under source `tls` when it starts with `tls_`,
    else under `websocket`: the prefix is what puts these in the right place."""
    kind = CONSTANTS[name]
    assert re.fullmatch(r"websocket(_[a-z0-9]+)+", kind)
    assert kind == "websocket_" + name.lower()


def test_no_kind_collides_with_a_stomp_kind() -> None:
    assert not set(CONSTANTS.values()) & stomp_violations.ALL_KINDS


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_every_kind_is_reported_by_the_transport(name: str) -> None:
    package = Path(v.__file__).parent
    source = "".join(path.read_text() for path in package.glob("*.py") if path.stem != "violations")
    assert re.search(rf"\bv\.{name}\b", source), f"{name} is never reported"
