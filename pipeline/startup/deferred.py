"""Modules that GX imports at its own import and no suite of ours uses, imported at their first
use instead.

GX 1.x imports every expectation it ships when it is imported. Its distribution expectations
(KL divergence, Kolmogorov-Smirnov) bring in ``scipy.stats`` and ``altair`` at module level, and
its Spark compatibility layer brings in ``pyspark.ml``, which imports ``scipy.sparse``. No
suite of ours uses any of them. Deferring them cuts the CPU that importing GX costs a run's
driver from 2.2-2.3 to 1.45-1.5 s, and the driver imports GX while the capture pass wants both
cores (`pipeline.startup.preload`). 0.58 GB: 9.39-9.68 s against 9.79-9.95 s, runs
alternated.

:func:`deferring` lets GX bind a stand-in for each of them: the stand-in imports the real module
at the first attribute asked of it, so a suite that did use one would still work.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

DEFERRED = ("scipy.stats", "scipy.sparse", "altair")


class DeferredModule(types.ModuleType):
    """Stands in for the module of the same name until an attribute of it is asked for."""

    def __getattr__(self, name: str) -> Any:
        _withdraw(self)  # in its place only while deferring; an import now finds the real one
        return getattr(importlib.import_module(self.__name__), name)


@contextmanager
def deferring(names: Sequence[str] = DEFERRED) -> Iterator[None]:
    """While the block runs, each module of ``names`` not imported yet is a `DeferredModule`,
    in ``sys.modules`` and on its package; when it ends they are withdrawn, so that later
    imports import the real modules. What the block imported keeps its stand-ins.

    ``sys.modules`` is changed for everyone: only for a block during which no other thread
    imports (`pipeline.startup.preload`'s rule)."""
    placed = [_stand_in(name) for name in names if name not in sys.modules]
    try:
        yield
    finally:
        for module in placed:
            _withdraw(module)


def _stand_in(name: str) -> DeferredModule:
    module = DeferredModule(name)
    package, _, child = name.rpartition(".")
    if package:
        setattr(importlib.import_module(package), child, module)
    sys.modules[name] = module
    return module


def _withdraw(module: DeferredModule) -> None:
    name = module.__name__
    if sys.modules.get(name) is module:
        del sys.modules[name]
    package, _, child = name.rpartition(".")
    parent = sys.modules.get(package) if package else None
    if parent is not None and parent.__dict__.get(child) is module:
        delattr(parent, child)
