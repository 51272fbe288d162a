"""The package's pure-Python twin, imported beside the compiled package in the same process.

A target compares what the compiled modules give (the Cython and C twins, and the modules
compiled from their own source, `pipeline.compiled.SOURCE_MODULES`) with what their Python
source gives, input by input. `pure(names)` imports ``names`` once more with every
``pipeline`` module taken from source (``STOMP_LAKE_PURE_PYTHON=1``), then puts the compiled
modules back in ``sys.modules``: the twin's modules hold references to each other only, so
calling into them runs Python source all the way down, while the rest of the process keeps the
compiled package. Calls into the twin go inside `running_pure()`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from pipeline.compiled import KERNELS, PURE_PYTHON_VARIABLE, SOURCE_MODULES, is_compiled

_loaded: dict[str, ModuleType] = {}
_twin_modules: dict[str, ModuleType] = {}  # every module of the twin, by name
_twin_names: set[str] = set()  # names outside `pipeline` that the twin has its own of


def _ours(name: str) -> bool:
    return name == "pipeline" or name.startswith("pipeline.") or name in _twin_names


def pure(*names: str) -> tuple[ModuleType, ...]:
    """The pure-Python twins of modules ``names`` (importing each of them once per process);
    modules outside ``pipeline`` named here (``fuzz.offline``) are imported again too, so
    that they use the twin."""
    missing = [name for name in names if name not in _loaded]
    if missing:
        _twin_names.update(name for name in missing if not name.startswith("pipeline"))
        _names_while_compiled.count = _names_while_pure.count = -1  # what is ours changed
        with running_pure():
            for name in missing:
                _loaded[name] = importlib.import_module(name)
    return tuple(_loaded[name] for name in names)


class _Names:
    """Our modules' names in ``sys.modules``, taken again only when its size changed: a swap
    touches a few hundred names, where scanning every loaded module cost a millisecond."""

    __slots__ = ("count", "names")

    def __init__(self) -> None:
        self.count = -1
        self.names: list[str] = []

    def current(self) -> list[str]:
        if len(sys.modules) != self.count:
            self.names = [name for name in sys.modules if _ours(name)]
            self.count = len(sys.modules)
        return self.names


_names_while_compiled = _Names()  # while the compiled package is in sys.modules
_names_while_pure = _Names()  # while the twin is


@contextmanager
def running_pure() -> Iterator[None]:
    """Around a call into the twin: ``sys.modules`` holds the twin's modules, and pure Python is
    asked for, so that what the twin looks up while running (`pipeline.compiled.kernel`, a module
    found by name in ``sys.modules``) is its own too."""
    saved = {name: sys.modules.pop(name) for name in _names_while_compiled.current()}
    finders = list(sys.meta_path)
    previous = os.environ.get(PURE_PYTHON_VARIABLE)
    sys.modules.update(_twin_modules)
    os.environ[PURE_PYTHON_VARIABLE] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ[PURE_PYTHON_VARIABLE]
        else:
            os.environ[PURE_PYTHON_VARIABLE] = previous
        for name in _names_while_pure.current():
            _twin_modules[name] = sys.modules.pop(name)
        sys.modules.update(saved)
        sys.meta_path[:] = finders  # the twin's package installs its own SourceFinder


def compiled_modules() -> list[str]:
    """The package's compiled modules loaded in this process (its twins are never among them)."""
    return [
        name
        for name in (*KERNELS.values(), *SOURCE_MODULES)
        if name in sys.modules and is_compiled(sys.modules[name])
    ]
