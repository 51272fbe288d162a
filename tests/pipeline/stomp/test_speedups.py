"""Loading the optional compiled module, and its argument checks."""

from __future__ import annotations

from types import ModuleType

import pytest

from pipeline.compiled import PURE_PYTHON_VARIABLE, kernel


def test_the_environment_can_force_pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    assert kernel("speedups") is None


def test_compiled_functions_refuse_wrong_arguments(compiled_speedups: ModuleType | None) -> None:
    if compiled_speedups is None:
        pytest.skip("the compiled speedups are not built")
    with pytest.raises(TypeError):
        compiled_speedups.scan(b"", 0)
    with pytest.raises(TypeError):
        compiled_speedups.decode_headers("not bytes", 0)
    assert compiled_speedups.decode_headers(b"a:1\nb:\\cx", 1) == [("a", "1"), ("b", ":x")]
    assert compiled_speedups.decode_headers(b"a:1\nno colon", 1) is None
