"""pipeline/startup/class_archive.py: which archive a local JVM maps, and when a new one is due."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.spark.session import base_conf
from pipeline.startup import class_archive
from pipeline.startup.class_archive import archive_key, archive_path, java_options
from tests.support.java_install import fake_install

JAVA = "spark.driver.extraJavaOptions"


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_install(tmp_path, monkeypatch)


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
