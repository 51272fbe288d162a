"""Every codec test runs twice: with the compiled hot paths and with their pure-Python twins.

The compiled module is built from source into a temporary folder for the run, so the tests do
not depend on an in-place build; without a working C compiler the compiled runs are skipped.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from pipeline.stomp import speedups


@pytest.fixture(scope="session")
def compiled_speedups(tmp_path_factory: pytest.TempPathFactory) -> ModuleType | None:
    from pipeline.stomp.build_speedups import build

    try:
        path: Path = build(tmp_path_factory.mktemp("speedups"))
    except Exception:  # noqa: BLE001 - any build failure means: no compiled backend here
        return None
    return speedups.load_file(path)


@pytest.fixture(autouse=True, params=["compiled", "python"])
def backend(
    request: pytest.FixtureRequest,
    compiled_speedups: ModuleType | None,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    if request.param == "compiled":
        if compiled_speedups is None:
            pytest.skip("no C compiler: the compiled speedups could not be built")
        monkeypatch.setattr(speedups, "compiled", compiled_speedups)
    else:
        monkeypatch.setattr(speedups, "compiled", None)
    return str(request.param)
