"""Optional compiled hot paths of the decoder (``_speedups.c``), with pure Python as fallback.

Build them in place with ``python -m pipeline.stomp.build_speedups`` (needs a C compiler and
the Python headers). Without the build, or with ``STOMP_LAKE_PURE_PYTHON=1`` in the environment,
``compiled`` is None and the decoder runs its pure-Python twins, which give identical events.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from pipeline.compiled import load as compiled_module

MODULE = "pipeline.stomp._speedups"


def load() -> ModuleType | None:
    return compiled_module(MODULE)


def load_file(path: Path) -> ModuleType:
    """Import a build of ``_speedups`` from ``path`` (a build outside the source tree)."""
    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compiled: ModuleType | None = load()
