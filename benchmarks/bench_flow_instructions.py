"""The flow pass's instructions, counted by valgrind's callgrind: a figure the machine's noise
does not move.

Run from the repository root:  python -m benchmarks.bench_flow_instructions [--out DIR] [--mb N]
[--shape SHAPE] [--baseline CHECKOUT]
Writes DIR/flow_instructions.md and DIR/flow_instructions.json (DIR defaults to
benchmarks/results). Needs valgrind (its ``callgrind_control`` and ``callgrind_annotate``).
``--baseline`` counts the compiled way of another checkout too (a clone at an earlier commit,
its extensions built with ``make venv``), on the same pieces: what a change costs or saves.

On a shared machine the same run's wall time moves by 15% from one run to the next, which hides
any step smaller than that; the count of instructions a pass executes does not move. The flow
pass as `stomp-lake run`'s tasks run it (`pipeline.spark.flows.run_partition`: reassembly,
STOMP decoding, the session model, rows converted to Arrow and written as Parquet) runs twice
in a child process under callgrind, over the capture's pieces sorted as the pass sorts them; only
the second pass is counted (the first meets imports and first calls). Two ways: ``compiled``, as
runs run it, and ``pure_python`` (STOMP_LAKE_PURE_PYTHON=1), the baseline. The compiled way's
count is split by component, from the inclusive counts of the functions that carry each.

Instructions are not time. Python's object code runs fewer instructions a cycle than Arrow's and
zstd's loops, so its share of the time is larger than its share of the count. Valgrind runs
OpenSSL's sha256 without the CPU's SHA instructions, so the bodies' hashing counts four to five
times what it runs: it has a line of its own and is left out of the figures per frame.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.bench_flow_loop import sorted_pieces
from benchmarks.traffic import SHAPES, TrafficSpec, generate_files
from pipeline.compiled import PURE_PYTHON_VARIABLE

DEFAULT_OUT = Path(__file__).resolve().parent / "results"
DEFAULT_DATA = Path("work/bench")
REPO = Path(__file__).resolve().parent.parent
WAYS = ("compiled", "pure_python")
BASELINE = "baseline"  # the compiled way of another checkout (--baseline)
SHA256 = "body sha256"
# Component -> patterns of the functions whose inclusive counts make it (the largest count
# among a pattern's lines: a function shows once per file it was inlined from, and recursion
# adds lines of its own). A method a .pxd declares cpdef is named without the number a def
# method's wrapper has.
COMPONENTS: dict[str, tuple[str, ...]] = {
    "packet loop, all of reassembly, decoding and the model": (r"_packet_loop_\d+feed_packets$",),
    "session model (frames, heart-beats, rows)": (r"SessionModel_\d*_process$",),
    "  of which STOMP decoding": (r"Decoder_\d*events$", r"Decoder_\d*next_event$"),
    "  of which protocol state": (r"ProtocolState_\d*on_frame$",),
    # OpenSSL's own functions: Debian's _hashlib module has no symbols for its wrappers
    SHA256: (r"^EVP_DigestUpdate$", r"^EVP_DigestFinal_ex$"),
    "pieces unpacked and merged": (
        r"pieces_\d+unpack_column$",
        r"PieceMerger_\d+add$",
        r"PieceMerger_\d+finish$",
    ),
    "rows converted to Arrow": (r"arrow::py::ConvertPySequence\(",),
    "Parquet written": (r"parquet::arrow::FileWriterImpl::WriteTable\(",),
}
# The child: the pass twice over the pieces the parent saved, the second counted.
_CHILD = """
import json, os, sys, tempfile
if sys.argv[1] == "pure_python":
    os.environ["{variable}"] = "1"
import pyarrow as pa, pyarrow.parquet as pq
import schemas
from pipeline.spark.flows import FlowPassConfig, run_partition
paths = tuple(json.loads(sys.argv[3]))
with pa.memory_map(sys.argv[2]) as source:
    pieces = pa.ipc.open_file(source).read_all().combine_chunks().to_batches()[0]
for counted in (False, True):
    folder = tempfile.mkdtemp()
    tables = tuple((t, f"{{folder}}/{{t}}") for t in schemas.TABLES)
    config = FlowPassConfig(paths, close_open=True, table_dirs=tables, batch_id="b")
    if counted:
        os.system(f"callgrind_control -i on {{os.getpid()}} > /dev/null")
    list(run_partition([pieces], config))
    if counted:
        os.system(f"callgrind_control -i off {{os.getpid()}} > /dev/null")
frames = sum(
    pq.read_metadata(os.path.join(root, name)).num_rows
    for root, _dirs, names in os.walk(f"{{folder}}/frames")
    for name in names
    if name.endswith(".parquet")
)
print(json.dumps({{"frames": frames}}))
"""
_LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[[^\]]*\])?$")


def counted(
    way: str, pieces_file: Path, paths: list[str], scratch: Path, checkout: Path = REPO
) -> dict[str, Any]:
    """Instructions of the second pass of ``way`` (total, and by component) with the code of
    ``checkout`` (its compiled modules built in place)."""
    out = scratch / f"callgrind.{way}.out"
    code = _CHILD.format(variable=PURE_PYTHON_VARIABLE)
    mode = "pure_python" if way == "pure_python" else "compiled"
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
        sys.executable, "-c", code, mode, str(pieces_file), json.dumps(paths),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}  # counts repeat
    done = subprocess.run(
        command, cwd=checkout, env=env, check=True, capture_output=True, text=True
    )
    frames = json.loads(done.stdout.strip().splitlines()[-1])["frames"]
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {"frames": frames, **split(annotated)}


def _commit(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def split(annotated: str) -> dict[str, Any]:
    """The total and the components' counts, from ``callgrind_annotate --inclusive=yes``."""
    total = 0
    largest: dict[str, int] = {}
    for line in annotated.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        count, name = int(match.group(1).replace(",", "")), match.group(2)
        if name == "PROGRAM TOTALS":
            total = count
            continue
        function = name.split(":", 1)[1] if ":" in name else name
        for patterns in COMPONENTS.values():
            for pattern in patterns:
                if re.search(pattern, function):
                    largest[pattern] = max(largest.get(pattern, 0), count)
    components = {
        component: sum(largest.get(pattern, 0) for pattern in patterns)
        for component, patterns in COMPONENTS.items()
    }
    return {"total": total, "components": components}


def run(
    out: Path, data: Path, megabytes: float, shape: str = "broker", baseline: Path | None = None
) -> dict[str, Any]:
    """``baseline``: another checkout of the repository (its extensions built in place), whose
    compiled way is counted on the same pieces as the ``baseline`` way: a change's cost."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        raise SystemExit("bench_flow_instructions needs valgrind (Debian: apt install valgrind)")
    # Connections of about 2 MB: about 1,300 frames each, as `bench_run`'s 600 connections of
    # 2.26 GB have 1,900 (the default 400 connections would make the sessions' start and end a
    # large part of a small capture).
    connections = max(1, int(megabytes // 2))
    spec = TrafficSpec(
        int(megabytes * 1_000_000), connections, concurrent=min(60, connections), shape=shape
    )
    suffix = "" if shape == "broker" else f"-{shape}"
    capture = generate_files(spec, data / f"flow-instructions{suffix}-{megabytes:g}mb")
    paths = [str(Path(p).resolve()) for p in capture.paths]  # read from another checkout too
    pieces = sorted_pieces(paths)
    ways: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        pieces_file = Path(scratch) / "pieces.arrow"
        with pa.OSFile(str(pieces_file), "wb") as sink, pa.ipc.new_file(sink, pieces.schema) as w:
            w.write_batch(pieces)
        for way in WAYS:
            ways[way] = counted(way, pieces_file, paths, Path(scratch))
        if baseline is not None:
            ways[BASELINE] = counted(BASELINE, pieces_file, paths, Path(scratch), baseline)
    if len({w["frames"] for w in ways.values()}) != 1:
        raise SystemExit(f"the ways wrote different frame counts: {ways}")
    frames = ways["compiled"]["frames"]
    compiled, pure = ways["compiled"]["total"], ways["pure_python"]["total"]
    result = {
        "shape": shape,
        "capture_bytes": sum(os.path.getsize(p) for p in paths),
        "connections": connections,
        "packets": int(pa.compute.sum(pieces.column("packet_count")).as_py()),
        "frames": frames,
        "instructions": {way: ways[way]["total"] for way in ways},
        "components": ways["compiled"]["components"],
        "compiled_per_frame_without_sha256": round(
            (compiled - ways["compiled"]["components"][SHA256]) / frames
        ),
        "pure_python_vs_compiled": round(pure / compiled, 2),
    }
    if baseline is not None:
        result["baseline"] = {
            "checkout": str(baseline),
            "commit": _commit(baseline),
            "components": ways[BASELINE]["components"],
            "compiled_vs_baseline": round(compiled / ways[BASELINE]["total"], 4),
        }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"flow_instructions{suffix}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"flow_instructions{suffix}.md").write_text(markdown(result))
    return result


def markdown(result: dict[str, Any]) -> str:
    frames = result["frames"]
    total = result["instructions"]["compiled"]
    lines = [
        "# The flow pass's instructions (callgrind): compiled vs pure Python",
        "",
        f"{result['capture_bytes'] / 1e6:.0f} MB of benchmarks/traffic.py "
        f"({result.get('shape', 'broker')} shape), "
        f"{result['connections']} connections, {result['packets']} packets, {frames} frames; "
        "`run_partition` as a flow task runs it, with Parquet, the second of two passes counted.",
        "",
        f"- compiled: {total:,} instructions; pure Python: "
        f"{result['instructions']['pure_python']:,} ({result['pure_python_vs_compiled']}x).",
        "- compiled, without the bodies' sha256: "
        f"{result['compiled_per_frame_without_sha256']:,} instructions a frame.",
        "",
        "| component of the compiled way | instructions | share | a frame |",
        "| --- | ---: | ---: | ---: |",
    ]
    for component, count in result["components"].items():
        lines.append(
            f"| {component} | {count:,} | {count / total:.0%} | {round(count / frames):,} |"
        )
    baseline = result.get("baseline")
    if baseline is not None:
        before = result["instructions"]["baseline"]
        lines += [
            "",
            f"Baseline: the compiled way of {baseline['checkout']} at {baseline['commit']}, on "
            f"the same pieces: {before:,} instructions, "
            f"{round((before - baseline['components'][SHA256]) / frames):,} a frame without the "
            f"bodies' sha256; this checkout's is {baseline['compiled_vs_baseline']:.2%} of it.",
            "",
            "| component | baseline a frame | this checkout a frame |",
            "| --- | ---: | ---: |",
        ]
        for component, count in result["components"].items():
            was = baseline["components"][component]
            lines.append(f"| {component} | {round(was / frames):,} | {round(count / frames):,} |")
    lines += [
        "",
        "Inclusive counts: the packet loop contains the session model, which contains decoding "
        "and the protocol state; the sha256 of the bodies is inside the session model, and "
        "valgrind runs it without the CPU's SHA instructions (4-5x its real cost). The rest of "
        "the total is the pass's own Python: spilling rows, the writer's bookkeeping.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--mb", type=float, default=20)
    parser.add_argument("--shape", choices=SHAPES, default="broker", help="traffic shape")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout whose compiled way is counted too"
    )
    args = parser.parse_args()
    print(markdown(run(args.out, args.data, args.mb, args.shape, args.baseline)))


if __name__ == "__main__":
    main()
