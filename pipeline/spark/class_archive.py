"""A class-data-sharing archive of the classes a local run's JVM loads (JDK 17 AppCDS).

Spark's driver loads some 15,000 classes from ~250 jars at every start, and more at its first
queries (the validation's planner, Parquet, the shuffle). Loaded from a dynamic CDS archive they
are mapped, already parsed and verified: `stomp-lake run` over the samples takes 22-25 s with
the archive against 27-32 s without (runs alternated, 2 cores), Spark's start 3.7-4.2 s against
4.9-6.2 s, and every stage after it less as well.

The archive is made once per install (`make` runs ``python -m pipeline.spark.class_archive``):
a JVM started with ``-XX:ArchiveClassesAtExit`` runs the main job over the bundled samples and
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
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ARCHIVE_VARIABLE = "STOMP_LAKE_CLASS_ARCHIVE_DIR"
# Named by the key alone: made before installs were told apart
_LEGACY = re.compile(r"spark-classes-[0-9a-f]{16}\.jsa")
# Without these the JVM reports every class it cannot archive (signed jars, generated code) when
# dumping, and an archive it will not use when starting.
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
MAKING = "-XX:ArchiveClassesAtExit={path} " + QUIET_CDS
USING = "-XX:SharedArchiveFile={path} -Xshare:auto " + QUIET_CDS


def archive_dir() -> Path:
    """$STOMP_LAKE_CLASS_ARCHIVE_DIR, else this user's cache ($XDG_CACHE_HOME or ~/.cache)."""
    configured = os.environ.get(ARCHIVE_VARIABLE)
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "stomp-lake"


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
    return archive_dir() / f"spark-classes-{_install_tag(jars)}-{key}.jsa"


def _install_tag(jars: Path) -> str:
    return hashlib.sha256(str(jars).encode()).hexdigest()[:8]


def java_options() -> str:
    """The driver's Java options that use this install's archive; empty when there is none."""
    path = archive_path()
    return USING.format(path=path) if path is not None and path.is_file() else ""


def make_archive(samples: Path, *, force: bool = False) -> Path | None:
    """Make the archive for this install unless it exists; returns its path (None: no JDK or
    PySpark found). The job runs in a child process whose JVM writes the archive as it exits."""
    path = archive_path()
    if path is None or (path.is_file() and not force):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # Next to the archive, so that it is put in place by a rename: a start never maps half a file
    with tempfile.TemporaryDirectory(prefix=".making-", dir=path.parent) as work:
        partial = Path(work) / path.name
        command = [sys.executable, "-m", "pipeline.spark.class_archive", "--dump", str(partial)]
        # The child must not use an archive while making one: it looks for none where none is
        subprocess.run(
            [*command, str(samples), str(Path(work) / "lake")],
            check=True,
            env={**os.environ, ARCHIVE_VARIABLE: str(Path(work) / "none")},
        )
        if not partial.is_file():
            raise RuntimeError(f"the JVM wrote no class archive at {partial}")
        os.replace(partial, path)
    _remove_superseded(path)
    return path


def _remove_superseded(path: Path) -> None:
    """The install's archives made before ``path`` (its venv made again, PySpark upgraded), and
    those named before installs were told apart, are of no more use: 150 MB each. A JVM that
    maps one keeps it until it exits."""
    install = path.name[: path.name.rindex("-") + 1]  # "spark-classes-{install tag}-"
    for other in path.parent.glob("spark-classes-*.jsa"):
        if other != path and (other.name.startswith(install) or _LEGACY.fullmatch(other.name)):
            other.unlink(missing_ok=True)


def _dump(partial: Path, samples: Path, lake: Path) -> None:
    """In the child: the main job over the samples, then the JVM's exit, waited for, since
    the archive is written by the exiting JVM."""
    from pyspark import SparkContext

    from pipeline.runner import RunConfig, run

    conf = {"spark.driver.extraJavaOptions": MAKING.format(path=partial)}
    run(RunConfig([samples], lake, spark_conf=conf), progress=lambda _: None)
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    if process is not None:
        process.stdin.close()  # PySpark's gateway server exits when its stdin closes
        process.wait(timeout=300)


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.exists(found) else None


def _spark_jars() -> Path | None:
    """The jars a local JVM loads: $SPARK_HOME's (the lean home, `pipeline.spark.lean_home`,
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--dump"]:
        _dump(Path(args[1]), Path(args[2]), Path(args[3]))
        return 0
    from pipeline.cli import SAMPLES_DIR
    from pipeline.spark.lean_home import use_lean_home

    use_lean_home()  # as a local session does: the archive is of the classpath it will serve
    try:
        path = make_archive(SAMPLES_DIR, force="--force" in args)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        # An optimisation only: without the archive every start is as it was
        print(f"class archive: not made ({error}); Spark starts without it", file=sys.stderr)
        return 0
    print(f"class archive: {path}" if path is not None else "class archive: no JDK or PySpark")
    return 0


if __name__ == "__main__":
    sys.exit(main())
