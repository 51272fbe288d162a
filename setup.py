"""The package's compiled parts, built by the package's own build (`pip install .`, a wheel).

`_speedups` (the STOMP decoder's C hot paths) is optional: without a working compiler the
install still succeeds and the pure-Python twins run (as with STOMP_LAKE_PURE_PYTHON=1).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "pipeline.stomp._speedups",
            ["pipeline/stomp/_speedups.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
