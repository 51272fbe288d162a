"""Every entry point, and plain library use, exits 0 run after run: Arrow's thread pools are
drained before interpreter teardown (without it, a child that reads a 40-file ledger and returns
aborted with exit -6 in 10 of 40 runs here; with it, 0 of 40)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.paths import REPO, SAMPLES

PYTHON = sys.executable
BIN = Path(sys.executable).parent
RUNS = 16  # at the 1-in-4 rate of aborts measured without the fix, 16 runs miss it 1% of the time
LEDGER_FILES = 40  # one ledger commit each: a scan over many files races teardown most often
OLD = 1_600_000_000  # 2020: past any retention

# The pipeline used as a library: read the ledger, return, let the interpreter tear down.
READ_LEDGER = (
    "import sys; from pathlib import Path; from pipeline.lake import Lake, Ledger; "
    "print(Ledger(Lake(Path(sys.argv[1]))).entries().num_rows)"
)
BENCHMARK_CHILD = (
    "import sys; from pathlib import Path; from pipeline.lake import Lake, Ledger; "
    "from benchmarks.measure import report_and_exit; "
    "report_and_exit({'rows': Ledger(Lake(Path(sys.argv[1]))).entries().num_rows})"
)


@pytest.fixture(scope="module")
def tiny_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A lake whose ledger holds 40 old capture files, one commit each, and one small table."""
    root = tmp_path_factory.mktemp("tiny")
    captures, lake_root = root / "captures", root / "lake"
    captures.mkdir()
    sample = (SAMPLES / "activemq-heartbeat-v10.pcap").read_bytes()
    for index in range(LEDGER_FILES):
        capture = captures / f"capture-{index:02d}.pcap"
        capture.write_bytes(sample + bytes([index]))  # distinct contents: no duplicates
        os.utime(capture, (OLD, OLD))
    script = (
        "import sys, pyarrow as pa\nfrom pathlib import Path\n"
        "from deltalake import write_deltalake\nfrom pipeline.lake import Lake, Ledger\n"
        "from pipeline.lake.fingerprint import fingerprint\n"
        "lake = Lake(Path(sys.argv[1]))\n"
        "for index, path in enumerate(sorted(Path(sys.argv[2]).iterdir())):\n"
        "    Ledger(lake).record([fingerprint(path)], f'tiny-{index}')\n"
        "write_deltalake(str(lake.tables_dir / 'probe'), pa.table({'x': [1, 2, 3]}))\n"
    )
    _run([PYTHON, "-c", script, str(lake_root), str(captures)]).check_returncode()
    return lake_root, captures


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
        env=_env(),
    )  # fmt: skip


def _run_many(command: Sequence[str], runs: int = RUNS) -> list[subprocess.CompletedProcess[str]]:
    """`command` `runs` times, two at a time (the machine has two cores)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda _: _run(command), range(runs)))


def _assert_all_exit_0(done: list[subprocess.CompletedProcess[str]]) -> None:
    failed = [d for d in done if d.returncode != 0]
    detail = "\n".join(f"exit {d.returncode}: {d.stderr[-400:]}" for d in failed[:3])
    assert not failed, f"{len(failed)} of {len(done)} runs failed:\n{detail}"
    assert not any("terminate called" in d.stderr for d in done)


@pytest.mark.slow
def test_library_use_exits_0_every_time(tiny_lake: tuple[Path, Path]) -> None:
    lake, _ = tiny_lake
    done = _run_many([PYTHON, "-c", READ_LEDGER, str(lake)])
    _assert_all_exit_0(done)
    assert {d.stdout.strip() for d in done} == {str(LEDGER_FILES)}


@pytest.mark.slow
def test_maintain_retain_captures_exits_0_every_time(tiny_lake: tuple[Path, Path]) -> None:
    lake, captures = tiny_lake
    command = [
        str(BIN / "stomp-lake"), "maintain", "--lake", str(lake), "retain-captures",
        "--capture-dir", str(captures), "--older-than-days", "30", "--action", "keep",
    ]  # fmt: skip
    done = _run_many(command)
    _assert_all_exit_0(done)
    assert f"{LEDGER_FILES} ingested, 0 not ingested" in done[0].stdout


@pytest.mark.slow
def test_stomp_lake_exits_0_every_time(tiny_lake: tuple[Path, Path]) -> None:
    lake, _ = tiny_lake
    done = _run_many([str(BIN / "stomp-lake"), "tables", "--lake", str(lake)])
    _assert_all_exit_0(done)
    assert "probe" in done[0].stdout


@pytest.mark.slow
def test_stomp_capture_exits_0_every_time() -> None:
    _assert_all_exit_0(_run_many([str(BIN / "stomp-capture"), "--help"]))
    _assert_all_exit_0(_run_many([PYTHON, "-m", "capture.cli", "--help"]))


@pytest.mark.slow
def test_benchmark_child_exits_0_every_time(tiny_lake: tuple[Path, Path]) -> None:
    lake, _ = tiny_lake
    done = _run_many([PYTHON, "-c", BENCHMARK_CHILD, str(lake)])
    _assert_all_exit_0(done)
    assert {json.loads(d.stdout.splitlines()[-1])["rows"] for d in done} == {LEDGER_FILES}


def test_importing_the_package_registers_the_drain_without_loading_arrow() -> None:
    script = (
        "import sys, pipeline\n"
        "assert 'pipeline.process' in sys.modules and 'pyarrow' not in sys.modules\n"
        "from pipeline.process import drain_native_thread_pools\n"
        "assert drain_native_thread_pools(timeout=0) is True\n"
        "print('ok')\n"
    )
    done = _run([PYTHON, "-c", script])
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_drain_sees_arrow_pools_idle_after_a_read(tiny_lake: tuple[Path, Path]) -> None:
    lake, _ = tiny_lake
    script = (
        READ_LEDGER + "\nfrom pipeline.process import ArrowPools, drain_native_thread_pools\n"
        "pools = ArrowPools.loaded(); assert pools is not None\n"
        "assert drain_native_thread_pools(timeout=10) and pools.busy_tasks() == 0\n"
    )
    done = _run([PYTHON, "-c", script, str(lake)])
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("body", "code", "stderr"),
    [
        ("return 0", 0, ""),
        ("return 3", 3, ""),
        ("return None", 0, ""),
        ("raise SystemExit(2)", 2, ""),
        ("raise SystemExit('usage: bad')", 1, "usage: bad"),
        ("raise RuntimeError('boom')", 1, "RuntimeError: boom"),
    ],
)
def test_run_main_exits_with_main_s_code_and_flushed_output(
    body: str, code: int, stderr: str
) -> None:
    script = (
        "import sys\nfrom pipeline.process import run_main\n"
        "def main():\n"
        "    sys.stdout.write('unflushed')\n"
        f"    {body}\n"
        "run_main(main)\n"
    )
    done = _run([PYTHON, "-c", script])
    assert done.returncode == code
    assert done.stdout == "unflushed"
    assert stderr in done.stderr


def test_run_main_ends_quietly_when_its_reader_leaves() -> None:
    """`stomp-lake ... | head`: no traceback once head has what it wants."""
    script = (
        "from pipeline.process import run_main\n"
        "def main():\n"
        "    for n in range(1_000_000):\n"
        "        print('line', n)\n"
        "run_main(main)\n"
    )
    reader = subprocess.Popen(
        [PYTHON, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.readline() == b"line 0\n"
    reader.stdout.close()
    assert reader.wait(timeout=60) == 141
    assert reader.stderr.read() == b""


def test_fewer_collections_raises_the_threshold_then_restores_it() -> None:
    import gc

    from pipeline.process import fewer_collections

    before = gc.get_threshold()
    with fewer_collections(12_345):
        assert gc.get_threshold() == (12_345, *before[1:])
        assert gc.isenabled()
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_collections(999):
        raise RuntimeError("inside")
    assert gc.get_threshold() == before


GIVE_BACK = """
import json, os
from pipeline.process import give_back_memory

def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

import pyarrow as pa
before = rss()
rows = [{"frame": i, "text": str(i) * 3} for i in range(1_000_000)]  # small objects, as rows are
table = pa.array(rows)
held = rss()
del rows, table
give_back_memory()
print(json.dumps({"held": held - before, "kept": rss() - before}))
"""


def test_give_back_memory_returns_a_finished_tasks_memory(tmp_path: Path) -> None:
    """What a reused worker keeps after its task is small next to what the task held."""
    from tests.support.scripts import run_script

    figures = json.loads(run_script(GIVE_BACK, tmp_path))
    assert figures["held"] > 200 << 20
    assert figures["kept"] < figures["held"] // 5  # 31% without give_back_memory, 13% with
