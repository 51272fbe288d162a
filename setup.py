"""The package's compiled parts, built by the package's own build (`pip install .`, a wheel).

* `pipeline.stomp._speedups` (C): the STOMP decoder's hot paths.
* `pipeline.ingest._scan` (Cython): the capture readers' loop over plain TCP packets.
* `pipeline.spark._packet_loop` (Cython): the flow pass's loop over a flow's packets (in-order
  runs gathered, payloads read back).
* `pipeline.session._arrow_columns` (Cython): table columns built in Arrow's buffers as their
  values come.
* `pipeline.session._frame_rows` (Cython): the frames table's columns, a value of each per
  decoded frame, in Arrow's buffers.
* `pipeline.session._key_index` (Cython): key hashes to slots in one C array, the index of the
  unsettled MESSAGEs spilled to disk.
* `pipeline.tls._bulk` (Cython, with OpenSSL's libcrypto): TLS application-data records opened
  in bulk.
* `pipeline.session._digest` (Cython, with OpenSSL's libcrypto): the bodies' sha256, one digest
  context reused.
* `pipeline.compiled.SOURCE_MODULES` (Cython, from their own unchanged source): the session
  model, its streams and rows, the connection tracker and reassembler, the STOMP decoder; the
  source is imported instead under STOMP_LAKE_PURE_PYTHON=1 or when it is newer than its build.

All are optional: without a working compiler (or without Cython, for the second) the install
still succeeds and the pure-Python twins run, as with STOMP_LAKE_PURE_PYTHON=1
(`pipeline.compiled`).
"""

import os
import runpy

from setuptools import Extension, setup

# Read by path: importing the package would import its dependencies, which a build may not have.
SOURCE_MODULES = runpy.run_path("pipeline/compiled.py")["SOURCE_MODULES"]
GENERATED_C = "build/cython"  # Cython's C output, kept out of the source tree

# `make venv` installs the package editable with this set, then builds the extensions in place
# once (`setup.py build_ext --inplace`): the editable install would compile them all a first time
# in a temporary folder, for nothing.
SKIP_EXTENSIONS = os.environ.get("STOMP_LAKE_SKIP_EXTENSIONS") == "1"

extensions = [
    Extension(
        "pipeline.stomp._speedups",
        ["pipeline/stomp/_speedups.c"],
        extra_compile_args=["-O2"],
        optional=True,
    )
]
try:
    import numpy
    from Cython.Build import cythonize
except ImportError:  # the build requires both (pyproject.toml); a bare setup.py call may not
    HAVE_CYTHON = False
else:
    HAVE_CYTHON = True
if SKIP_EXTENSIONS:
    extensions = []
elif HAVE_CYTHON:
    extensions += cythonize(
        [
            Extension(
                "pipeline.ingest._scan",
                ["pipeline/ingest/_scan.pyx"],
                include_dirs=[numpy.get_include()],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                extra_compile_args=["-O2"],
                optional=True,
            ),
            Extension(
                "pipeline.spark._packet_loop",
                ["pipeline/spark/_packet_loop.pyx"],
                extra_compile_args=["-O2"],
                optional=True,
            ),
            Extension(
                "pipeline.session._frame_rows",
                ["pipeline/session/_frame_rows.pyx"],
                extra_compile_args=["-O2"],
                optional=True,
            ),
            Extension(
                "pipeline.session._arrow_columns",
                ["pipeline/session/_arrow_columns.pyx"],
                extra_compile_args=["-O2"],
                optional=True,
            ),
            Extension(
                "pipeline.session._key_index",
                ["pipeline/session/_key_index.pyx"],
                extra_compile_args=["-O2"],
                optional=True,
            ),
            # OpenSSL's headers (Debian: libssl-dev) and libcrypto; without them, not built
            Extension(
                "pipeline.tls._bulk",
                ["pipeline/tls/_bulk.pyx"],
                libraries=["crypto"],
                extra_compile_args=["-O2"],
                optional=True,
            ),
            Extension(
                "pipeline.session._digest",
                ["pipeline/session/_digest.pyx"],
                libraries=["crypto"],
                extra_compile_args=["-O2"],
                optional=True,
            ),
        ],
        build_dir=GENERATED_C,
        nthreads=os.cpu_count() or 1,
        compiler_directives={"language_level": "3"},
    )
    extensions += cythonize(
        [
            Extension(
                name,
                [name.replace(".", "/") + ".py"],
                extra_compile_args=["-O2"],
                optional=True,
            )
            for name in SOURCE_MODULES
        ],
        build_dir=GENERATED_C,
        nthreads=os.cpu_count() or 1,
        compiler_directives={
            "language_level": "3",
            "binding": True,  # functions keep their signatures and docstrings, as in Python
            "annotation_typing": False,  # type hints stay hints: Python's semantics, unchanged
        },
    )

# the extensions compiled side by side, one per core (`setup.py build_ext` and `pip install`)
setup(ext_modules=extensions, options={"build_ext": {"parallel": os.cpu_count() or 1}})
