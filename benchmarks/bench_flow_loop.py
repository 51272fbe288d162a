"""The flow pass without Spark, compiled against pure Python, measured in the same run.

Run from the repository root:  python -m benchmarks.bench_flow_loop [--out DIR] [--mb N]
[--shape SHAPE]
Writes DIR/flow_loop.md and DIR/flow_loop.json (DIR defaults to benchmarks/results; with
``--shape small``, flow_loop-small.md and .json).

The capture (benchmarks/traffic.py, broker-like connections by default, small messages with
``--shape small``, generated once under work/bench/) is read into flow pieces as the capture
pass does; every round then feeds them, sorted as the pass sorts them, through one `FlowRunner`
(reassembly, STOMP decoding, the session model, table rows; no Parquet; the garbage
collector's threshold raised as in the pass), one core, six ways:

- ``compiled``: as `stomp-lake run` runs it;
- ``source_modules``: the modules compiled from their own source (`pipeline.compiled.
  SOURCE_MODULES`: the session model, the reassembler, the decoder's state machine) imported as
  source, every twin compiled; how the flow pass ran before they were compiled;
- ``pure_python_loop``: the packet loop's pure-Python twin (`pipeline/spark/packet_loop.py`),
  everything else compiled;
- ``pure_python``: nothing compiled (STOMP_LAKE_PURE_PYTHON=1);
- ``no_session_model``: compiled, with every frame and heart-beat decoded and passed over, but
  no session model and no rows: what is left when the session model costs nothing.

The ratios are medians over rounds of the two times in the same round. The two ways that import
modules as source run in a child process of their own (a module is imported once per process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.traffic import SHAPES, TrafficSpec, generate_files
from pipeline import driver
from pipeline.compiled import PURE_PYTHON_VARIABLE
from pipeline.process import fewer_collections
from pipeline.session.frame_rows import TableRows
from pipeline.session.model import SessionModel
from pipeline.session.streams import DirectionStream
from pipeline.spark import flows
from pipeline.spark.captures import read_paths
from pipeline.spark.flows import FlowPassConfig, FlowRunner
from pipeline.spark.packet_loop import feed_packets, packet_loop
from pipeline.stomp import speedups
from pipeline.stomp.events import Frame, HeartBeat

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
DEFAULT_DATA = Path("work/bench")
WAYS = (
    "compiled",
    "source_modules",
    "pure_python_loop",
    "pure_python",
    "no_session_model",
)
AS_SOURCE = ("source_modules", "pure_python")  # ways run in a child process
SHAPE_NAMES = {"broker": "bodies of about 2 KB", "small": "small messages"}
# The child: the source modules imported as source, then (``source_modules``) the twins' switch
# turned back on.
_CHILD = """
import json, os, sys
os.environ["{variable}"] = "1"
from benchmarks import bench_flow_loop
if sys.argv[1] == "source_modules":
    from pipeline.compiled import kernel
    del os.environ["{variable}"]
    from pipeline.stomp import speedups
    speedups.compiled = kernel("speedups")  # read once, as the decoder's module was imported
print(json.dumps(bench_flow_loop.child(*sys.argv[1:])))
"""


def child(way: str, megabytes: str, data: str, shape: str) -> tuple[float, int]:
    """`flow_pass` of ``way`` in this process, on the capture `run` made: the second of two,
    as the ways run in the parent meet modules and pools already warm."""
    paths = [str(p) for p in generate_files(_spec(int(megabytes), shape), Path(data)).paths]
    pieces = sorted_pieces(paths)
    flow_pass(paths, pieces, way)
    return flow_pass(paths, pieces, way)


def _in_child(way: str, megabytes: int, data: Path, shape: str) -> tuple[float, int]:
    code = _CHILD.format(variable=PURE_PYTHON_VARIABLE)
    out = subprocess.run(
        [sys.executable, "-c", code, way, str(megabytes), str(data), shape],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    seconds, frames = json.loads(out.splitlines()[-1])
    return seconds, frames


def _spec(megabytes: int, shape: str) -> TrafficSpec:
    return TrafficSpec(total_bytes=megabytes * 1_000_000, shape=shape)


def sorted_pieces(paths: list[str]) -> pa.RecordBatch:
    batches = [b for b in read_paths(paths, compiled=True) if b.num_rows]
    table = pa.Table.from_batches(batches)
    table = table.filter(pa.compute.equal(table["record_type"], "piece"))
    order = [("flow_key", "ascending"), ("ts_ns", "ascending"), ("file_id", "ascending")]
    return table.sort_by([*order, ("record_offset", "ascending")]).combine_chunks().to_batches()[0]


_decoded = [0]  # frames `_decode_only` passed over


class DecodingOnly(SessionModel):
    """A session model whose `_process` decodes every event and passes over it: no rows."""

    def _process(self, stream: DirectionStream) -> None:
        assert stream.decoder is not None
        for event in stream.decoder.events():
            if type(event) is Frame:
                _decoded[0] += 1
                stream.consumed(event.end)
            elif type(event) is HeartBeat:
                stream.consumed(event.offset + event.length)
        stream.prune()


def flow_pass(paths: list[str], pieces: pa.RecordBatch, way: str) -> tuple[float, int]:
    """Seconds to feed every piece through a `FlowRunner` and drain its rows; frames made
    (``no_session_model``: frames decoded)."""
    compiled_decoder = speedups.compiled
    loop = (
        packet_loop() if way in ("compiled", "source_modules", "no_session_model") else feed_packets
    )
    original = flows.packet_loop
    flows.packet_loop = lambda: loop
    if way == "pure_python":
        os.environ[PURE_PYTHON_VARIABLE] = "1"
        speedups.compiled = None
    if way == "no_session_model":
        _decoded[0] = 0
        driver.SessionModel = DecodingOnly  # type: ignore[misc]  # the models the driver makes
    try:
        frames = 0

        def count(kind: str, rows: TableRows, _keys: list[str | None]) -> None:
            nonlocal frames
            frames += len(rows) if kind == "frames" else 0

        start = time.perf_counter()
        with fewer_collections():  # as the flow pass's task runs
            runner = FlowRunner(FlowPassConfig(tuple(paths), close_open=True), count)
            runner.feed_batch(pieces)
            runner.close()
        seconds = time.perf_counter() - start
        return seconds, _decoded[0] if way == "no_session_model" else frames
    finally:
        flows.packet_loop = original
        driver.SessionModel = SessionModel  # type: ignore[misc]
        os.environ.pop(PURE_PYTHON_VARIABLE, None)
        speedups.compiled = compiled_decoder


def run(
    out: Path, data: Path, megabytes: int, repeat: int, shape: str = "broker"
) -> dict[str, Any]:
    suffix = "" if shape == "broker" else f"-{shape}"
    folder = data / f"flow-loop{suffix}-{megabytes}mb"
    capture = generate_files(_spec(megabytes, shape), folder)
    paths = [str(p) for p in capture.paths]
    size = sum(os.path.getsize(p) for p in paths)
    pieces = sorted_pieces(paths)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    frames: dict[str, int] = {}
    for _ in range(repeat):
        for way in WAYS:
            if way in AS_SOURCE:
                seconds, frames[way] = _in_child(way, megabytes, folder, shape)
            else:
                seconds, frames[way] = flow_pass(paths, pieces, way)
            times[way].append(seconds)
    if len(set(frames.values())) != 1:
        raise SystemExit(f"the ways made different frame counts: {frames}")

    def ratio(slow: str) -> float:
        pairs = zip(times[slow], times["compiled"], strict=True)
        return round(statistics.median(s / c for s, c in pairs), 2)

    result = {
        "shape": shape,
        "capture_bytes": size,
        "files": len(paths),
        "packets": int(pa.compute.sum(pieces.column("packet_count")).as_py()),
        "frames": frames["compiled"],
        "repeat": repeat,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "seconds": {way: round(min(runs), 3) for way, runs in times.items()},
        "mb_per_s": {way: round(size / min(runs) / 1e6, 1) for way, runs in times.items()},
        "runs": {way: [round(t, 3) for t in runs] for way, runs in times.items()},
        "compiled_vs_source_modules": ratio("source_modules"),
        "compiled_vs_pure_python_loop": ratio("pure_python_loop"),
        "compiled_vs_pure_python": ratio("pure_python"),
        "session_model_share": round(
            statistics.median(
                1 - n / c for n, c in zip(times["no_session_model"], times["compiled"], strict=True)
            ),
            2,
        ),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"flow_loop{suffix}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"flow_loop{suffix}.md").write_text(markdown(result))
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# The flow pass without Spark: compiled vs pure Python",
        "",
        f"{result['capture_bytes'] / 1e6:.0f} MB in {result['files']} pcapng files "
        f"(benchmarks/traffic.py, {SHAPE_NAMES[result.get('shape', 'broker')]}), "
        f"{result['packets']} packets, {result['frames']} frames; "
        f"one `FlowRunner`, one core, best of {result['repeat']} rounds, Python "
        f"{result['python']} (load average {result['load_average_1min']} on "
        f"{result['cpu_count']} cores).",
        "",
        "| way | seconds | MB/s | runs (s) |",
        "| --- | ---: | ---: | --- |",
    ]
    for way in WAYS:
        runs = ", ".join(str(t) for t in result["runs"][way])
        lines.append(f"| {way} | {result['seconds'][way]} | {result['mb_per_s'][way]} | {runs} |")
    lines += [
        "",
        "Time of the pure-Python way / the compiled one, median of per-round ratios: the "
        f"modules compiled from their source {result['compiled_vs_source_modules']}x, the "
        f"packet loop's twin {result['compiled_vs_pure_python_loop']}x, every twin "
        f"{result['compiled_vs_pure_python']}x.",
        "",
        "The session model and its rows take "
        f"{result['session_model_share']:.0%} of the compiled way (median over rounds of 1 - "
        "no_session_model / compiled): the part a compiled session model would cut.",
        "",
        "`compiled`: as `stomp-lake run` runs (the kernels of `pipeline.compiled.KERNELS`, "
        "and `pipeline.compiled.SOURCE_MODULES` compiled from their own source); "
        "`source_modules`: those imported as source; `pure_python_loop`: the "
        "loop's twin `pipeline/spark/packet_loop.py`; "
        "`pure_python`: STOMP_LAKE_PURE_PYTHON=1. What is left in every way is Python: the "
        "reassembler's per-run work, the session model and the table rows. `no_session_model`: "
        "compiled, every frame and heart-beat decoded (by the version the connection starts "
        "with) and passed over; the same number of frames.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", choices=SHAPES, default="broker", help="traffic shape")
    args = parser.parse_args()
    print(markdown(run(args.out, args.data, args.mb, args.repeat, args.shape)))


if __name__ == "__main__":
    main()
