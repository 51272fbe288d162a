"""A JDK and PySpark's jars of a test's own, and an empty cache folder: what the class archive
is keyed by, without touching the real install."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.paths import CACHE_VARIABLE
from pipeline.startup import class_archive


def fake_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
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
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "archives"))
    return tmp_path
