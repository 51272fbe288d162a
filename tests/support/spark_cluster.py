"""A Spark standalone cluster (one master, N workers) started from the pip-installed pyspark.

    with standalone_cluster(tmp_path, workers=2) as cluster:
        subprocess.run([..., "stomp-lake", "run", "--master", cluster.url, ...], env=cluster.env)

Master and workers are plain `spark-class` processes (no daemon scripts), bound to loopback,
each logging to its own file under the work folder, and always stopped on exit. The cluster is
ready when the master's JSON status page lists every worker ALIVE.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from tests.support.brokers import free_port

HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0


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
        STOMP_LAKE_WORK=str(work / "driver"),
    )
    return env


@dataclass(slots=True)
class StandaloneCluster:
    url: str
    status_url: str
    work: Path
    env: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def status(self) -> dict:
        with urllib.request.urlopen(self.status_url, timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> int:
        try:
            workers = self.status().get("workers", [])
        except OSError:
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


def _wait_for(cluster: StandaloneCluster, workers: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while cluster.alive_workers() < workers:
        dead = [cast(list[str], p.args)[1] for p in cluster.processes if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            reason = f"exited: {dead}" if dead else f"not ready in {START_TIMEOUT_S:.0f} s"
            raise RuntimeError(f"Spark standalone cluster {reason}\n{cluster.log_tail()}")
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
    port, ui_port = free_port(HOST), free_port(HOST)
    cluster = StandaloneCluster(
        f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}/json/", work, cluster_env(work)
    )
    try:
        _start(
            cluster,
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", HOST, "--port", str(port), "--webui-port", str(ui_port),
            ],
        )
        for n in range(workers):
            worker_dir = work / f"worker-{n}"
            worker_dir.mkdir(exist_ok=True)
            _start(
                cluster,
                f"worker-{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", HOST, "--cores", str(cores), "--memory", memory,
                    "--webui-port", str(free_port(HOST)), "--work-dir", str(worker_dir),
                    cluster.url,
                ],
            )
        _wait_for(cluster, workers)
        yield cluster
    finally:
        _stop(cluster.processes)
