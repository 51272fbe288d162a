"""The compiled parts against their pure-Python twins, end to end: every table of a whole run
without Spark (`fuzz.offline.run_offline`) is the same with the compiled capture scanner, flow
pass loop, session streams and STOMP decoder as with STOMP_LAKE_PURE_PYTHON=1, on every capture
the repository holds (the samples, the malformed corpus, the WebSocket and other real captures,
the capture reader's fuzz regressions). The modules compiled from their own source are compared
whole: a process importing them as source gives the same tables as this one, which imports them
compiled."""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.offline import OfflineResult, run_offline
from pipeline.compiled import (
    CHECKOUT,
    KERNELS,
    PURE_PYTHON_VARIABLE,
    SOURCE_MODULES,
    SourceFinder,
    built,
    is_compiled,
    kernel,
)
from pipeline.ingest.scan import new_scanner
from pipeline.spark.packet_loop import feed_packets, packet_loop
from pipeline.stomp import speedups
from tests.support.paths import REPO, REPO_CAPTURES


def test_every_compiled_part_is_built() -> None:
    assert new_scanner() is not None and speedups.compiled is not None
    assert packet_loop() is not feed_packets
    for name in SOURCE_MODULES:
        assert is_compiled(importlib.import_module(name)), name
    for name in KERNELS:
        assert kernel(name) is built(name) is not None, name


def test_kernels_are_off_when_pure_python_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    assert all(kernel(name) is None for name in KERNELS)
    assert all(built(name) is not None for name in KERNELS)


@pytest.mark.parametrize("path", REPO_CAPTURES, ids=lambda p: str(p.relative_to(REPO)))
def test_same_tables_compiled_and_pure_python(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = run_offline([str(path)], split_bytes=1 + path.stat().st_size // 2)
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    monkeypatch.setattr(speedups, "compiled", None)  # the decoder reads it on every scan
    pure = run_offline([str(path)], split_bytes=1 + path.stat().st_size // 2)
    assert pure.tables == compiled.tables
    assert pure.capture_anomalies == compiled.capture_anomalies
    assert pure.packets == compiled.packets


def _outcome(run: OfflineResult) -> tuple[object, ...]:
    return run.tables, run.capture_anomalies, run.packets


_RUN_AS_SOURCE = """
import pickle, sys
from pipeline import compiled
from fuzz.offline import run_offline
from tests.pipeline.test_compiled import SOURCE_MODULES, _outcome, _split_bytes
import importlib
assert not any(compiled.is_compiled(importlib.import_module(m)) for m in SOURCE_MODULES)
paths = sys.argv[1:-1]
outcomes = [_outcome(run_offline([p], split_bytes=_split_bytes(p))) for p in paths]
with open(sys.argv[-1], "wb") as out:
    pickle.dump(outcomes, out)
"""


def _split_bytes(path: str) -> int:
    return 1 + os.stat(path).st_size // 2


def test_same_tables_with_every_module_compiled_and_as_source(tmp_path: Path) -> None:
    paths = [str(p) for p in REPO_CAPTURES]
    result = tmp_path / "as-source.pickle"
    subprocess.run(
        [sys.executable, "-c", _RUN_AS_SOURCE, *paths, str(result)],
        cwd=REPO,
        env={**os.environ, PURE_PYTHON_VARIABLE: "1"},
        check=True,
    )
    as_source = pickle.loads(result.read_bytes())
    for path, pure in zip(paths, as_source, strict=True):
        assert pure == _outcome(run_offline([path], split_bytes=_split_bytes(path))), path


def test_source_modules_import_as_source_when_pure_python_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    finder = SourceFinder()
    name = "pipeline.session.model"
    package = importlib.import_module("pipeline.session").__path__
    spec = finder.find_spec(name, package)
    assert spec is not None and spec.origin is not None and spec.origin.endswith(".so")
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    spec = finder.find_spec(name, package)
    assert spec is not None and spec.origin == str(REPO / "pipeline/session/model.py")
    assert finder.find_spec("pipeline.session.options", package) is None  # not compiled
    assert finder.stale == []


def test_a_source_newer_than_its_build_is_imported_as_source(tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    built = importlib.import_module("pipeline.session.clock").__file__
    assert built is not None and built.endswith(".so")
    (package / Path(built).name).write_bytes(Path(built).read_bytes())
    source = package / "clock.py"
    source.write_text("STAMP = 'edited'\n")
    finder = SourceFinder(["pipeline.session.clock"], checkout=True)
    os.utime(source, (0, 0))  # older than the build
    spec = finder.find_spec("pipeline.session.clock", [str(package)])
    assert spec is not None and spec.origin is not None and spec.origin.endswith(".so")
    os.utime(source)  # edited after the build
    spec = finder.find_spec("pipeline.session.clock", [str(package)])
    assert spec is not None and spec.origin == str(source)
    assert finder.stale == ["pipeline.session.clock"]
    installed = SourceFinder(["pipeline.session.clock"], checkout=False)  # a wheel's files
    spec = installed.find_spec("pipeline.session.clock", [str(package)])
    assert spec is not None and spec.origin is not None and spec.origin.endswith(".so")
    assert CHECKOUT  # the tests run from the repository


def _built_package(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A package folder under ``tmp_path`` holding a copy of ``pipeline.session.<name>``'s build
    and a source older than it; returns the folder and the source."""
    package = tmp_path / "pipeline" / "session"
    package.mkdir(parents=True, exist_ok=True)
    built = importlib.import_module(f"pipeline.session.{name}").__file__
    assert built is not None and built.endswith(".so")
    (package / Path(built).name).write_bytes(Path(built).read_bytes())
    source = package / f"{name}.py"
    source.write_text("STAMP = 'source'\n")
    os.utime(source, (0, 0))
    return package, source


def test_a_pxd_newer_than_the_build_imports_the_source(tmp_path: Path) -> None:
    """The .pxd declares the types the module is compiled with: editing it stales the build."""
    package, source = _built_package(tmp_path, "clock")
    finder = SourceFinder(["pipeline.session.clock"], checkout=True, root=str(tmp_path))
    spec = finder.find_spec("pipeline.session.clock", [str(package)])
    assert spec is not None and spec.origin is not None and spec.origin.endswith(".so")
    (package / "clock.pxd").write_text("# edited after the build\n")
    finder = SourceFinder(["pipeline.session.clock"], checkout=True, root=str(tmp_path))
    spec = finder.find_spec("pipeline.session.clock", [str(package)])
    assert spec is not None and spec.origin == str(source)


def test_one_stale_module_imports_every_one_as_source(tmp_path: Path) -> None:
    """The compiled modules read each other's classes typed: one imported as source while the
    others stay compiled would be refused by them, so all are imported as source."""
    package, _ = _built_package(tmp_path, "clock")
    _, edited = _built_package(tmp_path, "outbox")
    os.utime(edited)  # edited after its build
    modules = ["pipeline.session.clock", "pipeline.session.outbox"]
    finder = SourceFinder(modules, checkout=True, root=str(tmp_path))
    spec = finder.find_spec("pipeline.session.clock", [str(package)])
    assert spec is not None and spec.origin == str(package / "clock.py")
    assert finder.stale == ["pipeline.session.clock"]
