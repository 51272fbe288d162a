"""pipeline/startup/lean_home.py: the Spark home a local session starts from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.paths import CACHE_VARIABLE
from pipeline.startup import lean_home as module
from pipeline.startup.lean_home import HOME_VARIABLE, lean_home, use_lean_home

JARS = (
    "spark-core_2.13-4.2.0.jar",
    "spark-mllib_2.13-4.2.0.jar",
    "spark-mllib-local_2.13-4.2.0.jar",
    "spark-launcher_2.13-4.2.0.jar",
)
SPARK_CLASS = """#!/usr/bin/env bash
if [ -d "${SPARK_HOME}/jars" ]; then
  SPARK_JARS_DIR="${SPARK_HOME}/jars"
fi
  LAUNCH_CLASSPATH="$SPARK_JARS_DIR/*"
build_command() {
  "$RUNNER" -Xmx128m $SPARK_LAUNCHER_OPTS -cp "$LAUNCH_CLASSPATH" org.apache.spark.launcher.Main
}
"""


@pytest.fixture
def pyspark_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "pyspark"
    (home / "jars").mkdir(parents=True)
    (home / "bin").mkdir()
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (home / "bin" / "spark-class").write_text(SPARK_CLASS)
    for jar in JARS:
        (home / "jars" / jar).write_bytes(jar.encode())
    monkeypatch.setattr(module, "pyspark_home", lambda: home)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.delenv(HOME_VARIABLE, raising=False)
    return home


def test_the_lean_home_links_all_but_mllibs_jar(pyspark_home: Path) -> None:
    home = lean_home()
    assert home is not None and home.parent.name == "cache"
    assert sorted(p.name for p in (home / "jars").iterdir()) == sorted([JARS[0], JARS[2], JARS[3]])
    assert (home / "jars" / JARS[0]).resolve() == pyspark_home / "jars" / JARS[0]
    assert (home / "bin" / "spark-submit").resolve() == pyspark_home / "bin" / "spark-submit"
    assert lean_home() == home  # made once
    assert [p.name for p in home.parent.iterdir()] == [home.name]  # nothing left aside


def test_the_launcher_looks_for_its_classes_in_its_own_jar(pyspark_home: Path) -> None:
    home = lean_home()
    assert home is not None
    script = home / "bin" / "spark-class"
    assert not script.is_symlink() and os.access(script, os.X_OK)
    assert script.read_text() == SPARK_CLASS.replace(
        '"$SPARK_JARS_DIR/*"', f'"$SPARK_JARS_DIR/{JARS[3]}"'
    )


@pytest.mark.parametrize("change", ["another script", "no launcher jar"])
def test_a_spark_class_unlike_ours_is_linked(pyspark_home: Path, change: str) -> None:
    if change == "another script":
        (pyspark_home / "bin" / "spark-class").write_text('#!/bin/sh\nexec java "$@"\n')
    else:
        (pyspark_home / "jars" / JARS[3]).unlink()
    home = lean_home()
    assert home is not None
    assert (home / "bin" / "spark-class").resolve() == pyspark_home / "bin" / "spark-class"


def test_a_new_pyspark_gets_a_home_of_its_own(pyspark_home: Path) -> None:
    first = lean_home()
    (pyspark_home / "jars" / JARS[0]).rename(pyspark_home / "jars" / "spark-core_2.13-4.3.0.jar")
    second = lean_home()
    assert first is not None and second is not None and second != first
    assert (second / "jars" / "spark-core_2.13-4.3.0.jar").exists()


def test_no_mllib_or_no_folder_means_pysparks_own_home(
    pyspark_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv(CACHE_VARIABLE, str(blocked / "cache"))
    assert lean_home() is None
    (pyspark_home / "jars" / JARS[1]).unlink()
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    assert lean_home() is None


def test_a_callers_spark_home_is_kept(pyspark_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_VARIABLE, "/opt/spark")
    use_lean_home()
    assert os.environ[HOME_VARIABLE] == "/opt/spark"
    monkeypatch.delenv(HOME_VARIABLE)
    use_lean_home()
    assert os.environ[HOME_VARIABLE] == str(lean_home())


@pytest.mark.spark
def test_the_local_session_has_no_mllib_extension(spark) -> None:
    """The suite's own session started from the lean home: MLlib's session extension is not
    on its classpath (the start it cost is what the lean home saves)."""
    if not (Path(os.environ[HOME_VARIABLE]) / "jars").is_dir():
        pytest.skip("no lean home for this install")
    jvm = spark.sparkContext._jvm
    loader = jvm.Thread.currentThread().getContextClassLoader()
    with pytest.raises(Exception, match="ClassNotFoundException"):
        jvm.java.lang.Class.forName(
            "org.apache.spark.sql.ml.InternalFunctionRegistration", False, loader
        )
    assert spark.range(3).count() == 3
