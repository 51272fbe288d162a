"""GX's Data Docs templates compiled once per install, not at every run.

GX renders a batch's Data Docs with Jinja, and each of its views makes a Jinja environment of
its own, which compiles every template it meets from source: 78 compilations of 26 templates a
batch, a third of the docs' time (0.58 GB, runs alternated: the docs took 0.20-0.21 s with the
compiled code kept against 0.29-0.31 s). Jinja's bytecode cache keeps the compiled code in this
user's cache folder (`pipeline.paths.cache_dir`), one file per template, checked against the
template's source and Python's version when it is read: an upgrade of GX or of Python compiles
afresh. A folder that cannot be written, or a file that cannot be read, costs only the
compilation: the code is kept in memory too, so each template is compiled once per process.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import jinja2
from jinja2.bccache import Bucket

from pipeline.lake.layout import make_private_dir
from pipeline.paths import cache_dir

FOLDER = "jinja-templates"


class KeptTemplates(jinja2.FileSystemBytecodeCache):
    """Jinja's file cache of compiled templates, over one in memory, that never fails a
    render: a file it cannot read or write is left to compilation."""

    def __init__(self, directory: Path) -> None:
        super().__init__(str(directory))
        self._memory: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        kept = self._memory.get(bucket.key)
        if kept is not None:
            bucket.bytecode_from_string(kept)
            return
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001  a damaged file (pickle's errors vary): compile instead
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._memory[bucket.key] = bucket.bytecode_to_string()
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


_kept: KeptTemplates | None = None


def keep_compiled_templates(directory: Path | None = None) -> KeptTemplates:
    """Makes every GX view made from now on in this process keep its compiled templates in
    ``directory`` (default: this user's cache) and in memory. Once per process: later calls
    return the cache in place."""
    global _kept
    if _kept is not None:
        return _kept
    from great_expectations.render.view.view import DefaultJinjaView

    folder = directory or cache_dir() / FOLDER
    with contextlib.suppress(OSError):  # else kept in memory only: each file's writing fails
        make_private_dir(folder, 0o700)  # its files are code this process runs
    kept = KeptTemplates(folder)
    make_view = DefaultJinjaView.__init__

    def __init__(view: DefaultJinjaView, *args: Any, **kwargs: Any) -> None:
        make_view(view, *args, **kwargs)
        view.env.bytecode_cache = kept

    DefaultJinjaView.__init__ = __init__  # type: ignore[method-assign,assignment]
    _kept = kept
    return kept
