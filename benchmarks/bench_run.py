"""The main job, `stomp-lake run` in full (decode, every table, validation, commit), over about
0.5, 1 and 2 GB of broker-like STOMP traffic, against tshark decoding the same files.

Run from the repository root:  .venv/bin/python -m benchmarks.bench_run [--gb 0.5 1 2] [--out DIR]
Writes DIR/run.md and DIR/run.json (DIR defaults to benchmarks/results). Captures are generated
once by benchmarks/traffic.py under work/bench/ (gitignored) and reused; each size runs into a
fresh lake there.

- ours: a child process calls `pipeline.commands.run.run` (what `stomp-lake run` calls) on
  local[*], into a new lake, with validation on (its default engine: DuckDB with a local
  master) and open connections closed; RunResult.timings gives Spark start, compute, validation
  and commit times.
- tshark STOMP: Wireshark 4.0 has no STOMP dissector, so tshark runs the minimal Lua one in
  benchmarks/stomp.lua (`tshark -r F -X lua_script:benchmarks/stomp.lua -T fields -e
  stomp.command`), with TCP reassembly, one process per file, CPU-count processes at a time (the
  same cores local[*] uses). It only names each frame's command: no table, no validation, no
  write. `tshark -q -z conv,tcp` over the same files shows tshark's floor (dissecting packets).
Every process tree is sampled for its peak memory (benchmarks/measure.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks.measure import Measured, machine, report_and_exit, run_measured, warm_page_cache
from benchmarks.traffic import SHAPES, GeneratedCapture, TrafficSpec, generate_files

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results"
DEFAULT_DATA = REPO / "work" / "bench"
LUA = REPO / "benchmarks" / "stomp.lua"
CHILD_FLAG = "--child-run"
TARGET_SPEEDUP = 1.5


# --- the child: one run of the main job ---------------------------------------------------------


def run_child(lake: str, inputs: str) -> dict[str, object]:
    from pipeline.commands.run import RunConfig, run

    started = time.perf_counter()
    result = run(
        RunConfig(inputs=[Path(inputs)], lake=Path(lake), close_open=True, validate=True),
        progress=lambda message: print(message, file=sys.stderr, flush=True),
    )
    wall = time.perf_counter() - started
    counts = {k: v for k, v in result.counts.items() if not isinstance(v, dict)}
    return {
        "wall_s": wall,
        "elapsed_s": result.elapsed_s,
        "timings": dict(getattr(result, "timings", {}) or {}),
        "counts": counts,
        "frames_by_command": result.counts.get("frames_by_command", {}),
        "files": result.files,
    }


# --- the parent ---------------------------------------------------------------------------------


def run_ours(capture: GeneratedCapture, lake: Path) -> tuple[Measured, dict]:
    shutil.rmtree(lake, ignore_errors=True)
    env = dict(os.environ)
    env.setdefault("STOMP_LAKE_WORK", str(lake.parent / "spark-work"))
    command = [sys.executable, "-m", "benchmarks.bench_run", CHILD_FLAG, str(lake)]
    command.append(str(capture.paths[0].parent))
    measured = run_measured(command, cwd=REPO, env=env)
    if measured.returncode != 0:
        raise RuntimeError(f"the run failed:\n{measured.stderr[-4000:]}")
    return measured, json.loads(measured.stdout.strip().splitlines()[-1])


def run_tshark(
    paths: list[Path], parallel: int, scratch: Path, *, stomp: bool
) -> tuple[Measured, Counter]:
    """tshark over every file, `parallel` processes at a time, each writing its own output."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    tail = f"-X lua_script:{LUA} -T fields -e stomp.command" if stomp else "-q -z conv,tcp"
    one = f'tshark -n -r "$1" {tail} > "$2/$(basename "$1").out"'
    script = f'printf "%s\\0" "$@" | xargs -0 -P "$P" -I{{}} sh -c \'{one}\' _ {{}} "$OUT"'
    command = ["sh", "-c", script, "tshark", *map(str, paths)]
    env = {**os.environ, "P": str(parallel), "OUT": str(scratch)}
    measured = run_measured(command, env=env)
    if measured.returncode != 0:
        raise RuntimeError(f"tshark failed:\n{measured.stderr[-2000:]}")
    commands: Counter[str] = Counter()
    if stomp:
        for out in scratch.iterdir():
            with open(out) as lines:
                for line in lines:
                    commands.update(c for c in line.rstrip("\n").split(",") if c)
    shutil.rmtree(scratch, ignore_errors=True)
    return measured, commands


def case_folder(data: Path, gb: float, shape: str) -> Path:
    return data / (f"run-{gb:g}gb" if shape == "broker" else f"run-{shape}-{gb:g}gb")


def generate(gb: float, data: Path, connections: int, shape: str) -> GeneratedCapture:
    spec = TrafficSpec(
        total_bytes=int(gb * 1e9),
        connections=connections,
        concurrent=min(80, connections),
        files=max(4, round(gb * 8)),
        shape=shape,
    )
    return generate_files(spec, case_folder(data, gb, shape) / "captures")


def one_size(
    gb: float, data: Path, connections: int, rounds: int, shape: str = "broker"
) -> dict[str, object]:
    """Each case `rounds` times, the three alternated within a round; each case's fastest run
    is reported (this machine's speed drifts by 5-15% over minutes, as other work comes and
    goes: alternating lets each case meet the same drift)."""
    capture = generate(gb, data, connections, shape)
    folder = case_folder(data, gb, shape)
    before = machine()
    cpus = os.cpu_count() or 1
    scratch = folder / "tshark-out"
    ours_runs, stomp_runs, floor_runs = [], [], []
    for _ in range(rounds):
        warm_page_cache(capture.paths)  # before each case: all meet the files in the page cache
        ours_runs.append(run_ours(capture, folder / "lake"))
        warm_page_cache(capture.paths)
        stomp_runs.append(run_tshark(capture.paths, cpus, scratch, stomp=True))
        warm_page_cache(capture.paths)
        floor_runs.append(run_tshark(capture.paths, cpus, scratch, stomp=False))
    ours, child = min(ours_runs, key=lambda run: run[0].seconds)
    stomp, commands = min(stomp_runs, key=lambda run: run[0].seconds)
    floor, _ = min(floor_runs, key=lambda run: run[0].seconds)
    runs_s = {
        case: [measured.seconds for measured, _ in runs]
        for case, runs in (
            ("ours", ours_runs),
            ("tshark_stomp", stomp_runs),
            ("tshark_conv_tcp", floor_runs),
        )
    }
    after = machine()
    size = capture.file_bytes
    timings = child["timings"]
    measured_timings = bool(timings)
    if not measured_timings:  # RunResult.timings not filled in: only the whole call is known
        timings = {"run": child["wall_s"]}
    validate = timings.get("validate")
    frames_written = sum(capture.frames.values())
    tshark_frames = sum(n for c, n in commands.items() if c not in ("HEARTBEAT", "?"))
    return {
        "gb": gb,
        "shape": shape,
        "capture": {
            "files": len(capture.paths),
            "file_bytes": size,
            "packets": capture.packets,
            "connections": capture.connections,
            "concurrent": capture.spec.concurrent,
            "frames": frames_written,
            "heartbeats": capture.heartbeats,
            "generated_in_s": capture.seconds,
        },
        "machine_before": before,
        "machine_after": after,
        "ours": {
            **ours.figures(),
            "mb_per_s": round(size / ours.seconds / 1e6, 1),
            "timings": {k: round(v, 2) for k, v in timings.items()},
            "timings_from_run_result": measured_timings,
            "validate_share": round(validate / ours.seconds, 3) if validate else None,
            "runs_s": runs_s["ours"],
            "frames": child["counts"].get("frames"),
            "frames_per_s": round(frames_written / ours.seconds),
            "sessions": child["counts"].get("sessions"),
            "counts": child["counts"],
        },
        "tshark_stomp": {
            **stomp.figures(),
            "mb_per_s": round(size / stomp.seconds / 1e6, 1),
            "processes": cpus,
            "runs_s": runs_s["tshark_stomp"],
            "frames": tshark_frames,
            "frames_per_s": round(frames_written / stomp.seconds),
            "commands": dict(commands),
        },
        "tshark_conv_tcp": {
            **floor.figures(),
            "mb_per_s": round(size / floor.seconds / 1e6, 1),
            "runs_s": runs_s["tshark_conv_tcp"],
        },
        "speedup_vs_tshark_stomp": round(stomp.seconds / ours.seconds, 2),
        "speedup_vs_tshark_conv_tcp": round(floor.seconds / ours.seconds, 2),
    }


def run(args: argparse.Namespace) -> dict[str, object]:
    from pipeline.paths import SAMPLES_DIR
    from pipeline.startup.lean_home import use_lean_home
    from pipeline.warm import make_archive

    # As `make demo` and `make test` make it: without it the JVM starts 1-1.7 s slower.
    use_lean_home()  # the archive is of the classpath a local session serves
    archive = make_archive(SAMPLES_DIR)
    sizes = [
        one_size(gb, args.data, args.connections, args.rounds, args.shape) for gb in args.gb
    ]
    result: dict[str, object] = {
        "sizes": sizes,
        "shape": args.shape,
        "rounds": args.rounds,
        "target_speedup_vs_tshark": args.target,
        "target_speedup_vs_conv_tcp": args.target_conv,
        "class_archive": str(archive) if archive is not None and archive.is_file() else None,
    }
    if args.note:
        result["note"] = args.note
    if not args.keep_lakes:
        for gb in args.gb:
            shutil.rmtree(case_folder(args.data, gb, args.shape) / "lake", ignore_errors=True)
    return result


def markdown(result: dict) -> str:
    sizes = result["sizes"]
    first = sizes[0]
    lines = [
        "# The main job (`stomp-lake run`, full) vs tshark's STOMP decoding",
        "",
        f"{SHAPE_TEXT[result.get('shape', 'broker')]} STOMP traffic from benchmarks/traffic.py "
        "(SEND with receipts, MESSAGE and client-individual ACK, heart-beats, "
        "CONNECT/DISCONNECT with receipts; "
        f"{first['capture']['connections']} connections, {first['capture']['concurrent']} open "
        "at once; 1460-byte segments; rotated pcapng files as stomp-capture writes "
        f"them). {first['machine_before']['cpu_count']} CPUs shared with other work (load "
        "averages below); peak memory is the whole process tree (driver, JVM, Python workers; "
        "tshark: all its processes): RSS sampled every 0.2 s, PSS (shared pages counted once) "
        "every 2 s and at each new RSS high. "
        f"Each case is the fastest of {result.get('rounds', 1)} round(s), the cases alternated "
        "within a round (every run below). The JVM's class archive (`make spark-classes`): "
        f"{'used' if result.get('class_archive') else 'none'}. Python "
        f"{first['machine_before']['python']} "
        f"({first['machine_before'].get('python_executable', 'interpreter not recorded')}).",
        "",
        "| input | files | frames | ours s | ours MB/s | ours frames/s | ours peak RSS / PSS MB | "
        "validate s (share) | tshark STOMP s | tshark MB/s | tshark frames/s | "
        "tshark peak RSS / PSS MB | speed-up | vs conv,tcp | load before/after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: "
        "| ---: | --- |",
    ]
    for s in sizes:
        ours, ts = s["ours"], s["tshark_stomp"]
        validate = ours["timings"].get("validate")
        share = f"{validate:.1f} ({ours['validate_share']:.0%})" if validate else "n/a"
        lines.append(
            f"| {s['capture']['file_bytes'] / 1e9:.2f} GB | {s['capture']['files']} | "
            f"{s['capture']['frames']:,} | {ours['seconds']:.1f} | {ours['mb_per_s']} | "
            f"{_frames_per_s(s, 'ours')} | "
            f"{ours['peak_rss_mb']:.0f} / {ours['peak_pss_mb']:.0f} | {share} | "
            f"{ts['seconds']:.1f} | {ts['mb_per_s']} | {_frames_per_s(s, 'tshark_stomp')} | "
            f"{ts['peak_rss_mb']:.0f} / {ts['peak_pss_mb']:.0f} | "
            f"{s['speedup_vs_tshark_stomp']}x | {s['speedup_vs_tshark_conv_tcp']}x | "
            f"{s['machine_before']['load_average_1min']} / "
            f"{s['machine_after']['load_average_1min']} |"
        )
    lines += ["", "Stages of our run (RunResult.timings, seconds):", ""]
    for s in sizes:
        timings = ", ".join(f"{k} {v}" for k, v in s["ours"]["timings"].items())
        source = "" if s["ours"]["timings_from_run_result"] else " (measured around run())"
        lines.append(f"- {s['capture']['file_bytes'] / 1e9:.2f} GB: {timings}{source}")
    lines += ["", "Frames decoded (without heart-beats), and tshark's floor:", ""]
    for s in sizes:
        ours, ts = s["ours"], s["tshark_stomp"]
        lines.append(
            f"- {s['capture']['file_bytes'] / 1e9:.2f} GB: written {s['capture']['frames']}, "
            f"ours {ours['frames']} in {ours['sessions']} sessions (of "
            f"{s['capture']['connections']}), tshark {ts['frames']}; tshark -z "
            f"conv,tcp (dissection only) {s['tshark_conv_tcp']['seconds']:.1f} s = "
            f"{s['speedup_vs_tshark_conv_tcp']}x ours"
        )
    lines += ["", "Every run (seconds, in round order):", ""]
    for s in sizes:
        runs = ", ".join(
            f"{name} {s[key].get('runs_s', [s[key]['seconds']])}"
            for name, key in (
                ("ours", "ours"),
                ("tshark STOMP", "tshark_stomp"),
                ("tshark conv,tcp", "tshark_conv_tcp"),
            )
        )
        lines.append(f"- {s['capture']['file_bytes'] / 1e9:.2f} GB: {runs}")
    target = result["target_speedup_vs_tshark"]
    met = [s["speedup_vs_tshark_stomp"] >= target for s in sizes]
    lines += [
        "",
        f"Target: ours at least {target}x faster than tshark decoding STOMP: "
        + ", ".join(
            f"{s['capture']['file_bytes'] / 1e9:.2f} GB {s['speedup_vs_tshark_stomp']}x"
            for s in sizes
        )
        + f" ({'met' if all(met) else 'not met' if not any(met) else 'met for some sizes'}).",
        *_conv_target(result),
        "",
        "tshark runs a minimal Lua STOMP dissector (benchmarks/stomp.lua; Wireshark 4.0 ships "
        "none) that only names each frame's command; it reads one file per process, so frames "
        "cut by a file rotation are lost to it, and a broker's LF after NUL at a segment start "
        "counts as a heart-beat. Ours builds and validates all ten tables and commits them "
        "(validation as a run does by default with a local master: the Great Expectations "
        "suites on DuckDB over the staged files, `pipeline/validation/local_sql.py`).",
        "",
    ]
    if result.get("note"):
        lines += [result["note"], ""]
    return "\n".join(lines)


SHAPE_TEXT = {
    "broker": "Broker-like (bodies of about 2 KB, a long tail up to 48 KB)",
    "small": "Small-message (JSON bodies of 50-400 B, 8 headers a SEND or MESSAGE)",
}


def _frames_per_s(size: dict, case: str) -> str:
    """Frames written (heart-beats apart) over the case's time: the same count for every case."""
    return f"{round(size['capture']['frames'] / size[case]['seconds']):,}"


def _conv_target(result: dict) -> list[str]:
    target = result.get("target_speedup_vs_conv_tcp")
    if not target:
        return []
    ratios = [s["speedup_vs_tshark_conv_tcp"] for s in result["sizes"]]
    met = all(r >= target for r in ratios)
    shown = ", ".join(f"{r}x" for r in ratios)
    verdict = "met" if met else "not met"
    return [f"Target: at least {target}x `tshark -z conv,tcp`: {shown} ({verdict})."]


def write(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "run.md").write_text(markdown(result))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        report_and_exit(run_child(sys.argv[2], sys.argv[3]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--connections", type=int, default=600)
    parser.add_argument("--shape", choices=SHAPES, default="broker", help="traffic shape")
    parser.add_argument("--target", type=float, default=TARGET_SPEEDUP, help="x tshark + STOMP")
    parser.add_argument("--target-conv", type=float, default=None, help="x tshark -z conv,tcp")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each case, alternated")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--note", default="", help="a line added to the report")
    parser.add_argument("--keep-lakes", action="store_true")
    args = parser.parse_args()
    result = run(args)
    write(result, args.out)
    print(markdown(result))


if __name__ == "__main__":
    main()
