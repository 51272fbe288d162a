"""pipeline/spark/class_archive.py: which archive a local JVM maps, and when a new one is due."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.spark import class_archive
from pipeline.spark.class_archive import (
    ARCHIVE_VARIABLE,
    archive_key,
    archive_path,
    java_options,
    make_archive,
)
from pipeline.spark.session import base_conf

JAVA = "spark.driver.extraJavaOptions"


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A JDK and PySpark's jars of our own, and an empty archive folder."""
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "lib").mkdir()
    (jdk / "bin" / "java").write_bytes(b"java")
    (jdk / "lib" / "modules").write_bytes(b"modules")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setattr(class_archive, "_java", lambda: jdk / "bin" / "java")
    monkeypatch.setattr(class_archive, "_spark_jars", lambda: jars)
    monkeypatch.setenv(ARCHIVE_VARIABLE, str(tmp_path / "archives"))
    return tmp_path


def test_the_key_changes_with_the_jdk_and_the_jars(install: Path) -> None:
    first = archive_key()
    assert first is not None and archive_key() == first
    (install / "jars" / "delta.jar").write_bytes(b"delta")
    second = archive_key()
    assert second != first
    (install / "jdk" / "lib" / "modules").write_bytes(b"modules of another build")
    assert archive_key() not in (first, second)


def test_another_install_of_the_same_jars_has_its_own_key(
    install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive holds the class path it was made with: a JVM on the same jars in another
    folder (another venv's PySpark) cannot use it."""
    first = archive_key()
    other = install / "other-venv" / "jars"
    other.mkdir(parents=True)
    (other / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setattr(class_archive, "_spark_jars", lambda: other)
    assert archive_key() not in (None, first)


def test_a_jar_made_again_changes_the_key(install: Path) -> None:
    """The same venv made again: the jars have the same names and sizes, but the JVM checks
    their times too, and starts without an archive made before."""
    first = archive_key()
    jar = install / "jars" / "spark-core.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert archive_key() not in (None, first)


def test_no_jdk_no_archive(install: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(class_archive, "_java", lambda: None)
    assert archive_key() is None and archive_path() is None and java_options() == ""


def test_a_local_session_maps_the_archive_once_it_exists(install: Path) -> None:
    assert java_options() == "" and "SharedArchiveFile" not in base_conf("local[2]")[JAVA]
    path = archive_path()
    assert path is not None
    path.parent.mkdir()
    path.write_bytes(b"an archive")
    local = base_conf("local[2]", scratch=install)[JAVA]
    assert f"-XX:SharedArchiveFile={path} -Xshare:auto" in local
    assert "SharedArchiveFile" not in base_conf("spark://host:7077", scratch=install)[JAVA]


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

    monkeypatch.setattr(class_archive.subprocess, "run", dump)
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


@pytest.mark.spark
def test_the_running_jvm_maps_this_installs_archive(spark) -> None:
    """`make test` made the archive before the suite; the suite's own session uses it."""
    path = archive_path()
    if path is None or not path.is_file():
        pytest.skip("no class archive for this install (made by `make spark-classes`)")
    jvm = spark.sparkContext._jvm
    arguments = list(
        jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert f"-XX:SharedArchiveFile={path}" in arguments


def test_an_archive_that_cannot_be_made_never_stops_the_setup(
    install: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess

    def failing(samples: Path, *, force: bool = False) -> Path:
        raise subprocess.CalledProcessError(1, ["java"])

    monkeypatch.setattr(class_archive, "make_archive", failing)
    assert class_archive.main([]) == 0
    assert "not made" in capsys.readouterr().err
