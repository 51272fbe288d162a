"""A Spark home for local sessions: PySpark's own, less MLlib's jar.

Spark 4's MLlib jar names a session extension in its ``META-INF/services``
(``org.apache.spark.sql.ml.InternalFunctionRegistration``) whose first use starts Scala's
runtime reflection, in every JVM, as its first SparkSession is made. A run needs nothing of
MLlib. Measured on 2 cores: the session's start 4.2-5.0 s with the jar against 2.7 s without,
2.1 against 1.6 s with the class archive (the first query 0.15 s longer); `stomp-lake run` on
0.58 GB 12.5-13.0 s against 12.1-12.3 s, runs alternated.

The lean home is a folder of links to everything in PySpark's home, its ``jars`` a folder of
links to every jar but that one, made once per PySpark install beside the class archive (which
is then made, and mapped, on the lean home's classpath). A caller's own ``SPARK_HOME`` is
left alone, and so are sessions on a cluster.

Its ``bin`` links PySpark's scripts but ``spark-class``, a copy whose launcher (the small JVM
that only writes out the command of Spark's own JVM) has the launcher's jar for its classpath
instead of all of them: it looked for its classes through 276 jars. The launcher's command is
the same; it took 0.15-0.30 s against 0.06-0.07 s, and a session's start 1.91 against 1.78 s
(6 alternated pairs). Where the script has no such line (another Spark release), it is linked.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from pipeline.paths import cache_dir
from pipeline.startup.class_archive import pyspark_home

LEFT_OUT = "spark-mllib_"  # not spark-mllib-local_ (linear algebra, no session extension)
LAUNCHER_JAR = "spark-launcher_"
LAUNCHER_CLASSPATH = 'LAUNCH_CLASSPATH="$SPARK_JARS_DIR/*"'  # in bin/spark-class
LAYOUT = "2"  # of the home's folder: 2, with its own spark-class
HOME_VARIABLE = "SPARK_HOME"


def use_lean_home() -> None:
    """``SPARK_HOME`` set to the lean home for the JVMs this process starts, unless it is set."""
    if os.environ.get(HOME_VARIABLE):
        return
    home = lean_home()
    if home is not None:
        os.environ[HOME_VARIABLE] = str(home)


def lean_home() -> Path | None:
    """The lean home of this PySpark install, made if need be; None when PySpark has no such
    jar or the folder cannot be made (Spark then starts from PySpark's own home)."""
    source = pyspark_home()
    if source is None:
        return None
    jars = sorted(path.name for path in (source / "jars").glob("*.jar"))
    if not any(name.startswith(LEFT_OUT) for name in jars):
        return None
    key = hashlib.sha256("\n".join([LAYOUT, str(source), *jars]).encode()).hexdigest()[:16]
    target = cache_dir() / f"spark-home-{key}"
    if (target / "jars").is_dir():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Made aside, then renamed into place: a concurrent start sees a whole home or none
        with tempfile.TemporaryDirectory(prefix=".making-", dir=target.parent) as work:
            made = Path(work) / "home"
            _link(source, made)
            try:
                made.rename(target)
            except OSError:
                if not (target / "jars").is_dir():  # not made meanwhile by another start
                    raise
    except OSError:
        return None
    return target


def _link(source: Path, home: Path) -> None:
    home.mkdir()
    for entry in source.iterdir():
        if entry.name not in ("jars", "bin"):
            (home / entry.name).symlink_to(entry)
    (home / "jars").mkdir()
    for jar in (source / "jars").iterdir():
        if not jar.name.startswith(LEFT_OUT):
            (home / "jars" / jar.name).symlink_to(jar)
    launchers = [jar.name for jar in (source / "jars").glob(f"{LAUNCHER_JAR}*.jar")]
    (home / "bin").mkdir()
    for script in (source / "bin").iterdir():
        own = _on_launcher_jar(script, launchers) if script.name == "spark-class" else None
        if own is None:
            (home / "bin" / script.name).symlink_to(script)
        else:
            (home / "bin" / script.name).write_text(own)
            (home / "bin" / script.name).chmod(0o755)


def _on_launcher_jar(spark_class: Path, launchers: list[str]) -> str | None:
    """``spark-class`` with its launcher's classpath the launcher's one jar; None where there
    is not exactly one such jar, or the script does not name the classpath as expected."""
    text = spark_class.read_text()
    if len(launchers) != 1 or text.count(LAUNCHER_CLASSPATH) != 1:
        return None
    return text.replace(LAUNCHER_CLASSPATH, f'LAUNCH_CLASSPATH="$SPARK_JARS_DIR/{launchers[0]}"')
