"""A body's sha256 as hex text, the reference of the compiled ``_digest.pyx``, which gives the
same text from one OpenSSL digest context kept for the process: no hash object a body, and no
release of the GIL that `hashlib` makes around a digest of 2 KiB or more.

`tests/pipeline/session/test_digest.py` holds the two to the same digests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from pipeline.compiled import kernel


def python_sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_hex_function() -> Callable[[bytes], str]:
    """The compiled function, or the reference (not built, or pure Python asked for)."""
    compiled = kernel("digest")
    return python_sha256_hex if compiled is None else compiled.sha256_hex
