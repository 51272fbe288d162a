"""The package's optional compiled code, and the switch that turns it off.

`setup.py` builds it during `pip install` (a wheel has it), in two kinds:

* `KERNELS`: hand-written Cython or C, only where pointers, file reads, Arrow's buffers or
  OpenSSL need it, each with a pure-Python reference that gives identical results (a module
  beside it, or for the Arrow columns `pyarrow.array`). Code reaches one only through
  `kernel`, which returns None without a build or with ``STOMP_LAKE_PURE_PYTHON=1`` in the
  environment; the reference then runs.
* `SOURCE_MODULES`: plain Python modules of the per-packet and per-frame path (the session
  model, the connection tracker and reassembler, the STOMP decoder) that Cython compiles from
  their own source into an extension module of the same name, which Python's import prefers to
  the ``.py`` beside it. A ``.pxd`` beside a module declares the types Cython compiles some of
  its classes and methods with (extension types whose fields are C struct members, methods
  called in C): the ``.py`` is unchanged by it and behaves the same. The source is its own
  reference: `SourceFinder` imports it instead of the extension under
  ``STOMP_LAKE_PURE_PYTHON=1``, and, in a source checkout, when any of these modules (its
  ``.py`` or ``.pxd``) is newer than its extension (edited since the last build), so an edit is
  never shadowed by stale compiled code.

The variable is read at each `kernel` call and each import, not once per process: the twins'
differential tests and fuzz targets run both sides in one process.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

PURE_PYTHON_VARIABLE = "STOMP_LAKE_PURE_PYTHON"

# Compiled from their own source by setup.py. None of them defines a function that Spark
# pickles (a closure compiled by Cython cannot be pickled by value).
SOURCE_MODULES = (
    "pipeline.driver",
    "pipeline.reassembly.connections",
    "pipeline.reassembly.stream",
    "pipeline.session.clock",
    "pipeline.session.deliveries",
    "pipeline.session.message_rows",
    "pipeline.session.model",
    "pipeline.session.negotiation",
    "pipeline.session.outbox",
    "pipeline.session.privacy",
    "pipeline.session.protocol",
    "pipeline.session.receipts",
    "pipeline.session.rows",
    "pipeline.session.spilled",
    "pipeline.session.streams",
    "pipeline.session.transactions",
    "pipeline.spark.pieces",
    "pipeline.spark.task_counters",
    "pipeline.stomp.decoder",
    "pipeline.stomp.events",
    "pipeline.stomp.fast_path",
    "pipeline.stomp.headers",
    "pipeline.tls.offsets",
    "pipeline.tls.records",
    "pipeline.tls.session",
    "pipeline.tls.transport",
)

# The package runs from a source checkout (setup.py beside it), not from an installed wheel.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKOUT = os.path.exists(os.path.join(ROOT, "setup.py"))

_log = logging.getLogger(__name__)


# The hand-written kernels, by the name `kernel` takes.
KERNELS = {
    "scan": "pipeline.ingest._scan",  # capture records and packets (reference: pcap, pcapng)
    "packet_loop": "pipeline.spark._packet_loop",  # packets to connections (packet_loop.py)
    "frame_rows": "pipeline.session._frame_rows",  # frames table columns (frame_rows.py)
    "arrow_columns": "pipeline.session._arrow_columns",  # columns in Arrow's buffers (pa.array)
    "key_index": "pipeline.session._key_index",  # key hashes to slots in C (key_index.py)
    "digest": "pipeline.session._digest",  # bodies' sha256 with OpenSSL's EVP (digest.py)
    "speedups": "pipeline.stomp._speedups",  # decoder hot paths in C (fast_path.py, headers.py)
    "tls_bulk": "pipeline.tls._bulk",  # TLS records opened with OpenSSL's EVP (tls/bulk.py)
}


def kernel(name: str) -> ModuleType | None:
    """The kernel ``name`` of `KERNELS`, or None (not built, or pure Python asked for)."""
    if pure_python_asked():
        return None
    return built(name)


def built(name: str) -> ModuleType | None:
    """The kernel ``name`` if it is built, whatever the environment asks: for the modules that
    derive their compiled classes from it at import time."""
    try:
        return importlib.import_module(KERNELS[name])
    except ImportError:
        return None


def pure_python_asked() -> bool:
    return bool(os.environ.get(PURE_PYTHON_VARIABLE))


class SourceFinder:
    """Finds `SOURCE_MODULES` as source instead of as their extension modules when pure Python
    is asked for or, in a source checkout, when a source is newer than its extension; other
    modules are left to Python's own finders."""

    def __init__(
        self,
        modules: Sequence[str] = SOURCE_MODULES,
        *,
        checkout: bool = CHECKOUT,
        root: str = ROOT,
    ) -> None:
        self.modules = frozenset(modules)
        self.root = root  # where the modules' packages are, in a checkout
        # Builds are compared with their sources only in a source checkout (an editable
        # install): an installed wheel writes its files in no particular order.
        self.checkout = checkout
        self.stale: list[str] = []  # modules imported as source because their build is older
        self._checked: bool | None = None  # `_any_stale`, once known

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in self.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        built = spec.origin or ""
        source = os.path.join(os.path.dirname(built), name.rpartition(".")[2] + ".py")
        if not os.path.exists(source):
            return spec
        if not pure_python_asked():
            if not self.checkout or not (_edited_since(built, source) or self._any_stale()):
                return spec
            self.stale.append(name)
            _log.warning(
                "%s or another compiled module is newer than its build; importing the source "
                "(make venv builds it)",
                source,
            )
        return importlib.util.spec_from_file_location(name, source)

    def _any_stale(self) -> bool:
        """Whether any of the modules in this checkout is newer than its build: then all are
        imported as source, since the compiled ones read each other's classes as the types
        their ``.pxd`` files declare, and would refuse the source's."""
        if self._checked is None:
            self._checked = False
            for name in self.modules:
                base = os.path.join(self.root, *name.split("."))
                for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                    if os.path.exists(base + suffix) and _edited_since(base + suffix, base + ".py"):
                        self._checked = True
        return self._checked


def _edited_since(built: str, source: str) -> bool:
    """Whether ``source``, or the ``.pxd`` that declares its types beside it, is newer than
    ``built``."""
    sources = [source, source[: -len(".py")] + ".pxd"]
    mtime = os.stat(built).st_mtime
    return any(os.path.exists(path) and os.stat(path).st_mtime > mtime for path in sources)


def install_source_finder() -> SourceFinder:
    """`SourceFinder` ahead of Python's finders, once per process."""
    for finder in sys.meta_path:
        if isinstance(finder, SourceFinder):
            return finder
    finder = SourceFinder()
    sys.meta_path.insert(0, finder)
    return finder


def slot_values(instance: object) -> tuple[None, dict[str, object]]:
    """``__getstate__`` of a class of `SOURCE_MODULES` that a ``.pxd`` beside it makes an
    extension type where compiled: its slots as Python pickles a class with ``__slots__``, so the
    compiled and the pure-Python class pickle alike (Cython's own pickling names a function only
    the compiled module has) and a connection carried by one resumes in the other. Each class
    calls it from a ``__getstate__`` method of its own: Cython still generates its own pickling
    for a class that merely assigns this function to ``__getstate__``."""
    names = type(instance).__slots__  # type: ignore[attr-defined]
    return None, {name: getattr(instance, name) for name in names}


def set_slot_values(instance: object, state: tuple[None, dict[str, object]]) -> None:
    """``__setstate__`` to match `slot_values`."""
    for name, value in state[1].items():
        setattr(instance, name, value)


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was imported from an extension module."""
    return isinstance(
        getattr(module.__spec__, "loader", None), importlib.machinery.ExtensionFileLoader
    )
