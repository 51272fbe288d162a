from __future__ import annotations

import hashlib
import os
import random

import pytest

from pipeline.compiled import PURE_PYTHON_VARIABLE, built
from pipeline.session.digest import python_sha256_hex, sha256_hex_function

compiled = built("digest")
needs_build = pytest.mark.skipif(compiled is None, reason="the compiled kernel is not built")


def test_the_reference_is_hashlibs_hex_digest() -> None:
    assert python_sha256_hex(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert python_sha256_hex(b"") == hashlib.sha256(b"").hexdigest()


@needs_build
def test_the_twins_give_the_same_digest_at_every_size_around_blocks_and_the_gil_bound() -> None:
    assert compiled is not None
    rng = random.Random(7)
    sizes = [0, 1, 55, 56, 63, 64, 65, 119, 120, 2047, 2048, 2049, 1 << 20]
    sizes += [rng.randrange(1, 5000) for _ in range(200)]
    for size in sizes:
        data = os.urandom(size)
        digest = compiled.sha256_hex(data)
        assert digest == python_sha256_hex(data)
        assert type(digest) is str and digest.isascii() and len(digest) == 64


@needs_build
def test_other_bytes_like_values_are_hashlibs_and_others_raise_as_hashlib_does() -> None:
    assert compiled is not None
    for value in (bytearray(b"abc"), memoryview(b"abc")):
        assert compiled.sha256_hex(value) == python_sha256_hex(b"abc")
    with pytest.raises(TypeError):
        compiled.sha256_hex("abc")


@needs_build
def test_a_reused_context_keeps_no_state_between_digests() -> None:
    assert compiled is not None
    first = compiled.sha256_hex(b"x" * 3000)
    compiled.sha256_hex(b"y" * 10)
    assert compiled.sha256_hex(b"x" * 3000) == first


def test_the_function_is_the_reference_when_pure_python_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    assert sha256_hex_function() is python_sha256_hex
    monkeypatch.delenv(PURE_PYTHON_VARIABLE)
    expected = python_sha256_hex if compiled is None else compiled.sha256_hex
    assert sha256_hex_function() is expected
