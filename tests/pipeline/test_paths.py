"""Where the install keeps things: the repository's samples, and this user's cache folder as the
environment chooses it."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipeline
from pipeline.paths import CACHE_VARIABLE, REPO_ROOT, SAMPLES_DIR, cache_dir


def test_repo_root_is_the_folder_holding_the_package() -> None:
    assert Path(pipeline.__file__).resolve().parent.parent == REPO_ROOT
    assert (REPO_ROOT / "pipeline" / "paths.py").is_file()
    assert REPO_ROOT.is_absolute()


def test_samples_are_the_bundled_captures() -> None:
    assert SAMPLES_DIR == REPO_ROOT / "samples"
    captures = [p for p in SAMPLES_DIR.iterdir() if p.suffix in (".pcap", ".pcapng")]
    assert captures, "stomp-lake demo ingests these"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No cache variable set, and a home of the test's own."""
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_the_variable_names_the_folder_itself(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(clean_env / "archives"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(clean_env / "xdg"))  # the variable wins
    assert cache_dir() == clean_env / "archives"  # used as is: no stomp-lake below it


def test_xdg_cache_home_gets_a_stomp_lake_folder(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(clean_env / "xdg"))
    assert cache_dir() == clean_env / "xdg" / "stomp-lake"


def test_without_either_it_is_below_the_home_s_cache(clean_env: Path) -> None:
    assert cache_dir() == clean_env / "home" / ".cache" / "stomp-lake"


@pytest.mark.parametrize("variable", [CACHE_VARIABLE, "XDG_CACHE_HOME"])
def test_an_empty_variable_counts_as_unset(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "")
    assert cache_dir() == clean_env / "home" / ".cache" / "stomp-lake"


def test_asking_creates_nothing(clean_env: Path) -> None:
    cache_dir()
    assert not (clean_env / "home").exists()


def test_the_variable_is_the_one_the_readme_documents() -> None:
    assert CACHE_VARIABLE == "STOMP_LAKE_CLASS_ARCHIVE_DIR"
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"`{CACHE_VARIABLE}` | `~/.cache/stomp-lake`" in readme
