"""Every codec test runs twice: with the compiled hot paths and with their pure-Python twins.

The compiled runs use the package's build of the kernel (`pipeline.compiled.built`); without
one they are skipped.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from pipeline.compiled import built
from pipeline.stomp import speedups


@pytest.fixture(scope="session")
def compiled_speedups() -> ModuleType | None:
    return built("speedups")


@pytest.fixture(autouse=True, params=["compiled", "python"])
def backend(
    request: pytest.FixtureRequest,
    compiled_speedups: ModuleType | None,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    if request.param == "compiled":
        if compiled_speedups is None:
            pytest.skip("the compiled speedups are not built")
        monkeypatch.setattr(speedups, "compiled", compiled_speedups)
    else:
        monkeypatch.setattr(speedups, "compiled", None)
    return str(request.param)
