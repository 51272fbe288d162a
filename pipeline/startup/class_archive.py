"""A class-data-sharing archive of the classes a local run's JVM loads (JDK 17 AppCDS).

Spark's driver loads some 15,000 classes from ~250 jars at every start, and more at its first
queries (the validation's planner, Parquet, the shuffle). Loaded from a dynamic CDS archive they
are mapped, already parsed and verified: `stomp-lake run` over the samples takes 22-25 s with
the archive against 27-32 s without (runs alternated, 2 cores), Spark's start 3.7-4.2 s against
4.9-6.2 s, and every stage after it less as well.

The archive is made once per install (`stomp-lake warm`, which `make` runs; `pipeline.warm`): a
JVM started with ``-XX:ArchiveClassesAtExit`` runs the main job over the bundled samples and
writes what it loaded when it exits. Its file name is keyed by what it depends on (the JDK, and
PySpark's jars: their folder, names, sizes and times, all of which the JVM checks), so an upgrade
of either, or the venv made again, makes a new one instead of reusing a stale one, and the new
one replaces the install's old ones. A local session uses the archive matching its key when
there is one and starts as before when there is none. The JVM checks the archive itself too and,
should it not match, ignores it (its CDS log lines are off, so that is silent): keyed by the
jars' names and sizes alone, a venv made again kept a stale archive, and Spark's start took
1.4-1.7 s instead of 0.7-0.9 s.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from pipeline.paths import cache_dir

# Without these the JVM reports every class it cannot archive (signed jars, generated code) when
# dumping, and an archive it will not use when starting.
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
MAKING = "-XX:ArchiveClassesAtExit={path} " + QUIET_CDS
USING = "-XX:SharedArchiveFile={path} -Xshare:auto " + QUIET_CDS


def archive_key() -> str | None:
    """What the archive depends on, hashed: the JDK Spark will start and PySpark's jars. None
    when either cannot be found (no archive is made or used then)."""
    java = _java()
    jars = _spark_jars()
    if java is None or jars is None:
        return None
    digest = hashlib.sha256()
    home = java.parent.parent
    for part in (java, home / "lib" / "modules"):
        stat = part.stat() if part.exists() else None
        digest.update(f"{part}:{stat and stat.st_size}:{stat and stat.st_mtime_ns}\n".encode())
    # The jars' folder and times too: the archive holds the class path it was made with, the
    # jars' sizes and modification times, and a JVM whose class path differs in any of them
    # (another install of the same PySpark, or the same venv made again) starts without it.
    digest.update(f"{jars}\n".encode())
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path | None:
    """This install's archive: named by the install (its jars' folder) and by `archive_key`."""
    key = archive_key()
    jars = _spark_jars()
    if key is None or jars is None:
        return None
    return cache_dir() / f"spark-classes-{_install_tag(jars)}-{key}.jsa"


def _install_tag(jars: Path) -> str:
    return hashlib.sha256(str(jars).encode()).hexdigest()[:8]


def java_options() -> str:
    """The driver's Java options that use this install's archive; empty when there is none."""
    path = archive_path()
    return USING.format(path=path) if path is not None and path.is_file() else ""


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.exists(found) else None


def _spark_jars() -> Path | None:
    """The jars a local JVM loads: $SPARK_HOME's (the lean home, `pipeline.startup.lean_home`,
    or the caller's), else PySpark's."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    installed = pyspark_home()
    return None if installed is None else installed / "jars"


def pyspark_home() -> Path | None:
    """The installed PySpark's own Spark home (its package folder), when it holds Spark's jars."""
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).resolve().parent
    return home if (home / "jars").is_dir() else None
