"""Every violation kind is a documented, unique snake_case constant."""

from __future__ import annotations

import ast
import inspect
import re

from pipeline.stomp import violations


def test_every_kind_constant_is_listed_and_documented() -> None:
    tree = ast.parse(inspect.getsource(violations))
    constants: dict[str, str] = {}
    documented: set[str] = set()
    body = tree.body
    for node, following in zip(body, [*body[1:], None], strict=True):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            name = node.targets[0].id  # type: ignore[attr-defined]
            constants[name] = node.value.value
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                documented.add(name)
    assert set(constants.values()) == violations.ALL_KINDS
    assert len(set(constants.values())) == len(constants)
    assert documented == set(constants)
    assert all(re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", kind) for kind in constants.values())
    assert not violations.STREAM_KINDS & violations.FRAME_KINDS
