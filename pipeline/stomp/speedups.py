"""The decoder's optional C hot paths (`pipeline.compiled.KERNELS`' ``speedups``).

``compiled`` is the kernel, chosen when the decoder is imported, or None (not built, or
``STOMP_LAKE_PURE_PYTHON=1``): the decoder then runs its pure-Python twins, which give identical
events. Tests and benchmarks set it to compare the two.
"""

from __future__ import annotations

from types import ModuleType

from pipeline.compiled import kernel

compiled: ModuleType | None = kernel("speedups")
