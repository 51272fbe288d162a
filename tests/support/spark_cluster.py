"""A Spark standalone cluster (one master, N workers) started from the pip-installed pyspark.

    with standalone_cluster(tmp_path, workers=2) as cluster:
        subprocess.run([..., "stomp-lake", "run", "--master", cluster.url, ...], env=cluster.env)

Master and workers are plain `spark-class` processes (no daemon scripts), bound to loopback,
each logging to its own file under the work folder, and always stopped on exit. Every port is
chosen by Spark itself (port 0) and read back from the master's log: a port picked here and
handed over would race with whatever binds it first. The cluster is ready when the master's
JSON status page lists every worker ALIVE.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
MASTER_UI_PORT = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def cluster_env(work: Path) -> dict[str, str]:
    """Environment for the cluster's processes and for drivers that use it."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=HOST,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOG_DIR=str(work / "logs"),
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        STOMP_LAKE_WORK=str(work / "driver"),
    )
    return env


@dataclass(slots=True)
class StandaloneCluster:
    work: Path
    env: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    url: str = ""
    status_url: str = ""

    def status(self) -> dict:
        with urllib.request.urlopen(self.status_url, timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except (OSError, ValueError):
            return 0
        return sum(1 for w in workers if w.get("state") == "ALIVE")

    def log_tail(self, chars: int = 3000) -> str:
        parts = []
        for log in self.logs:
            text = log.read_text(errors="replace") if log.exists() else ""
            parts.append(f"--- {log.name}\n{text[-chars:]}")
        return "\n".join(parts)


def _start(cluster: StandaloneCluster, name: str, args: list[str]) -> subprocess.Popen:
    log = cluster.work / "logs" / f"{name}.log"
    cluster.logs.append(log)
    command = [str(spark_home() / "bin" / "spark-class"), *args]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, env=cluster.env, stdout=out, stderr=subprocess.STDOUT, cwd=cluster.work
        )
    cluster.processes.append(process)
    return process


def _check_alive(cluster: StandaloneCluster, deadline: float) -> None:
    dead = [cast(list[str], p.args)[1] for p in cluster.processes if p.poll() is not None]
    if dead or time.monotonic() > deadline:
        reason = f"exited: {dead}" if dead else f"not ready in {START_TIMEOUT_S:.0f} s"
        raise RuntimeError(f"Spark standalone cluster {reason}\n{cluster.log_tail()}")


def _wait_for_master(cluster: StandaloneCluster, deadline: float) -> None:
    """Read the ports Spark chose from the master's log."""
    master_log = cluster.logs[0]
    while True:
        text = master_log.read_text(errors="replace") if master_log.exists() else ""
        url, ui_port = MASTER_URL.search(text), MASTER_UI_PORT.search(text)
        if url and ui_port:
            cluster.url = url.group(1)
            cluster.status_url = f"http://{HOST}:{ui_port.group(1)}/json/"
            return
        _check_alive(cluster, deadline)
        time.sleep(0.2)


def _wait_for_workers(cluster: StandaloneCluster, workers: int, deadline: float) -> None:
    while cluster.alive_workers() < workers:
        _check_alive(cluster, deadline)
        time.sleep(0.5)


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):  # workers first, then the master
        if process.poll() is None:
            process.terminate()
    for process in reversed(processes):
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def standalone_cluster(
    work: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"
) -> Iterator[StandaloneCluster]:
    work = Path(work).resolve()
    (work / "logs").mkdir(parents=True, exist_ok=True)
    cluster = StandaloneCluster(work, cluster_env(work))
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        _start(
            cluster,
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", HOST, "--port", "0", "--webui-port", "0",
            ],
        )
        _wait_for_master(cluster, deadline)
        for n in range(workers):
            worker_dir = work / f"worker-{n}"
            worker_dir.mkdir(exist_ok=True)
            _start(
                cluster,
                f"worker-{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", HOST, "--cores", str(cores), "--memory", memory,
                    "--webui-port", "0", "--work-dir", str(worker_dir),
                    cluster.url,
                ],
            )
        _wait_for_workers(cluster, workers, deadline)
        yield cluster
    finally:
        _stop(cluster.processes)
