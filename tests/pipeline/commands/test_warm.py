"""`stomp-lake warm`: the class archive made, or a note that it was not; never a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import warm
from pipeline.cli import main
from tests.support.java_install import fake_install


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_install(tmp_path, monkeypatch)


def test_an_archive_that_cannot_be_made_never_stops_the_setup(
    install: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess

    def failing(samples: Path, *, force: bool = False) -> Path:
        raise subprocess.CalledProcessError(1, ["java"])

    monkeypatch.setattr(warm, "make_archive", failing)
    assert main(["warm"]) == 0
    assert "not made" in capsys.readouterr().err
