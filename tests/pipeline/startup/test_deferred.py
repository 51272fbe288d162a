"""Modules deferred while GX imports: bound as stand-ins, imported at their first use."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.startup.deferred import DeferredModule, deferring
from tests.support.scripts import run_script

GX_DEFERRING = """
import json, sys
from pipeline.startup.deferred import DEFERRED, deferring
with deferring():
    import great_expectations
left_out = [name for name in DEFERRED if name in sys.modules]
from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl
stand_in = type(kl.stats).__name__
entropy = float(kl.stats.entropy([0.5, 0.5]))  # the real scipy.stats, imported now
loaded = type(sys.modules["scipy.stats"]).__name__
print(json.dumps([left_out, stand_in, round(entropy, 6), loaded]))
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package ``deferred_pkg`` with a module ``heavy`` and modules that import it, and a
    top-level module ``deferred_top``; all removed from ``sys.modules`` afterwards."""
    root = tmp_path / "deferred_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "heavy.py").write_text("VALUE = 42\n")
    (root / "binds.py").write_text(
        "from deferred_pkg import heavy\nimport deferred_top as top\nimport deferred_pkg.heavy\n"
    )
    (root / "uses.py").write_text("from deferred_pkg import heavy\nSEEN = heavy.VALUE\n")
    (tmp_path / "deferred_top.py").write_text("NAME = 'top'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "deferred_pkg"
    for name in [n for n in sys.modules if n.startswith(("deferred_pkg", "deferred_top"))]:
        del sys.modules[name]


def test_a_module_bound_in_the_block_is_imported_at_its_first_use(package: str) -> None:
    with deferring(("deferred_pkg.heavy", "deferred_top")):
        binds = importlib.import_module("deferred_pkg.binds")
    assert "deferred_pkg.heavy" not in sys.modules
    assert "deferred_top" not in sys.modules
    assert "heavy" not in vars(sys.modules["deferred_pkg"])
    assert isinstance(binds.heavy, DeferredModule) and isinstance(binds.top, DeferredModule)

    assert binds.heavy.VALUE == 42
    real = sys.modules["deferred_pkg.heavy"]
    assert not isinstance(real, DeferredModule) and real.VALUE == 42
    assert not isinstance(importlib.import_module("deferred_top"), DeferredModule)
    assert binds.top.NAME == "top"


def test_a_module_used_in_the_block_is_imported_for_real(package: str) -> None:
    with deferring(("deferred_pkg.heavy",)):
        assert importlib.import_module("deferred_pkg.uses").SEEN == 42
        assert not isinstance(sys.modules["deferred_pkg.heavy"], DeferredModule)
    heavy = importlib.import_module(package).heavy
    assert not isinstance(heavy, DeferredModule)
    assert heavy is sys.modules["deferred_pkg.heavy"]


def test_a_module_imported_before_is_left_alone() -> None:
    before = sys.modules["json"]
    with deferring(("json",)):
        assert sys.modules["json"] is before
    assert sys.modules["json"] is before


def test_gx_imports_without_the_deferred_modules_and_still_reaches_them(tmp_path: Path) -> None:
    left_out, stand_in, entropy, loaded = json.loads(run_script(GX_DEFERRING, tmp_path))
    assert left_out == []
    assert stand_in == DeferredModule.__name__
    assert entropy == round(0.693147, 6)
    assert loaded == "module"
