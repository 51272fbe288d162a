"""pipeline/warm.py: the class archive made once per install, replacing the install's older ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline import warm
from pipeline.startup.class_archive import archive_path
from pipeline.warm import make_archive
from tests.support.java_install import fake_install


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_install(tmp_path, monkeypatch)


def test_an_existing_archive_is_not_made_again(install: Path) -> None:
    path = archive_path()
    assert path is not None
    path.parent.mkdir()
    path.write_bytes(b"an archive")
    assert make_archive(install / "no-samples-needed") == path
    assert path.read_bytes() == b"an archive"


def test_a_new_archive_replaces_the_installs_older_ones(
    install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The venv made again: its new archive replaces its old one; another install's stays."""

    def dump(command: list[str], **_: object) -> None:  # the child JVM writes the archive
        Path(command[command.index("--dump") + 1]).write_bytes(b"an archive")

    monkeypatch.setattr(warm.subprocess, "run", dump)
    old = make_archive(install / "samples")
    assert old is not None and old.is_file()
    others = old.parent / "spark-classes-0123abcd-0123456789abcdef.jsa"
    others.write_bytes(b"another install's archive")
    legacy = old.parent / "spark-classes-0123456789abcdef.jsa"
    legacy.write_bytes(b"an archive named by its key alone")
    jar = install / "jars" / "spark-core.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    new = make_archive(install / "samples")
    assert new is not None and new != old
    assert new.is_file() and not old.exists() and not legacy.exists() and others.is_file()
