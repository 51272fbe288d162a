"""Compile the decoder's optional C hot paths: ``python -m pipeline.stomp.build_speedups``.

Without a target folder the module lands next to its source, where ``speedups.load`` finds it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pipeline.stomp.speedups import MODULE

SOURCE = Path(__file__).with_name("_speedups.c")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def build(target: Path | None = None) -> Path:
    """Compile ``_speedups.c`` into ``target`` (default: in place); returns the module's path.
    Raises setuptools/distutils errors when there is no working compiler."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    extension = Extension(MODULE, [str(SOURCE)], extra_compile_args=["-O2"])
    command = build_ext(Distribution({"name": "stomp-lake-speedups", "ext_modules": [extension]}))
    with tempfile.TemporaryDirectory() as scratch:
        command.build_lib = str(target or PACKAGE_ROOT)
        command.build_temp = scratch
        command.ensure_finalized()
        command.run()
    return Path(command.build_lib) / command.get_ext_filename(MODULE)


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
