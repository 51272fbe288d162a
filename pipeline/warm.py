"""Warming an install: the JVM's class archive made once, by running the main job over the
bundled samples in a child process whose JVM writes the classes it loaded as it exits
(`pipeline.startup.class_archive` says which archive a local JVM maps, and why).

``stomp-lake warm`` (which `make` runs) calls `warm`; the child is ``python -m pipeline.warm
--dump PARTIAL SAMPLES LAKE``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline.paths import CACHE_VARIABLE, SAMPLES_DIR
from pipeline.startup.class_archive import MAKING, archive_path

# Named by the key alone: made before installs were told apart
_LEGACY = re.compile(r"spark-classes-[0-9a-f]{16}\.jsa")


def warm(*, force: bool = False) -> Path | None:
    """This install's class archive, made unless it exists (None: no JDK or PySpark found)."""
    from pipeline.startup.lean_home import use_lean_home

    use_lean_home()  # as a local session does: the archive is of the classpath it will serve
    return make_archive(SAMPLES_DIR, force=force)


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
        command = [sys.executable, "-m", "pipeline.warm", "--dump", str(partial)]
        # The child must not use an archive while making one: it looks for none where none is
        subprocess.run(
            [*command, str(samples), str(Path(work) / "lake")],
            check=True,
            env={**os.environ, CACHE_VARIABLE: str(Path(work) / "none")},
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
    from pipeline.spark.session import SparkSettings

    conf = {"spark.driver.extraJavaOptions": MAKING.format(path=partial)}
    run(RunConfig([samples], lake, spark=SparkSettings(conf=conf)), progress=lambda _: None)
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    active = SparkContext._active_spark_context
    if active is not None:
        active.stop()
    if process is not None:
        process.stdin.close()  # PySpark's gateway server exits when its stdin closes
        process.wait(timeout=300)


if __name__ == "__main__" and sys.argv[1:2] == ["--dump"]:
    _dump(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
