"""The package's optional compiled modules, and the switch that turns them off.

`setup.py` builds them during `pip install` (a wheel has them). Each has a pure-Python twin that
stays the readable reference and gives identical results; without a build, or with
``STOMP_LAKE_PURE_PYTHON=1`` in the environment, `load` returns None and the twins run.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_VARIABLE = "STOMP_LAKE_PURE_PYTHON"


def load(module: str) -> ModuleType | None:
    """The compiled module ``module``, or None (not built, or pure Python asked for)."""
    if os.environ.get(PURE_PYTHON_VARIABLE):
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
