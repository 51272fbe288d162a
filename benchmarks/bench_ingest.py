"""Reading and reassembling a ~200 MB rotated capture: the job's first two phases against tshark
and tcpflow over the same files, with wall time and peak memory of each one's process tree.

Run from the repository root:  .venv/bin/python -m benchmarks.bench_ingest [--mb 200] [--out DIR]
Writes DIR/ingest.md and DIR/ingest.json (DIR defaults to benchmarks/results). The capture is
generated once by benchmarks/traffic.py under work/bench/ (gitignored) and reused.

Cases, each a child process whose whole tree is sampled (benchmarks/measure.py):
- ours: a local[*] SparkSession runs `packets_frame` (persisted, its stats collected and the
  flows placed, as the runner does) then `flow_pass`
  (connection tracking, TCP reassembly, STOMP decoding and the session model; its tasks write
  the table rows as Parquet into a scratch folder, rows counted per table), as `stomp-lake run`
  does before its tables; Spark start-up is timed apart.
- tshark conv,tcp: `tshark -q -z conv,tcp -r FILE` for each file (tshark reads one file at a
  time), one process at a time and CPU-count processes at a time. It dissects every packet and
  tracks TCP conversations; it neither reassembles streams nor decodes STOMP.
- tcpflow: `tcpflow -r F1 -r F2 ... -o DIR`, one process: every flow reassembled and written to
  a file per direction (on the same disk; its output is removed afterwards).
Rounds run every case once, in turn, so load from others on the shared machine hits all alike;
the figures are each case's fastest round, and the ratios are taken within rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.measure import (
    Measured,
    cpu_seconds_by_command,
    cpu_used,
    machine,
    report_and_exit,
    run_measured,
    warm_page_cache,
)
from benchmarks.traffic import GeneratedCapture, TrafficSpec, generate_files

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results"
DEFAULT_DATA = REPO / "work" / "bench"
CHILD_FLAG = "--child-ours"


# --- the child: our phases in one process -------------------------------------------------------


def ours_child(paths: list[str]) -> dict[str, object]:
    """Both phases twice in one SparkSession: cold (as a run meets them), then warm (JIT-compiled
    JVM, Python workers up), with the CPU seconds the JVM and the Python processes spent."""
    started = time.perf_counter()
    from pyspark import StorageLevel

    import schemas
    from pipeline.spark.captures import packets_frame
    from pipeline.spark.flows import FlowPassConfig, flow_pass
    from pipeline.spark.placement import ranges
    from pipeline.spark.session import build_spark
    from pipeline.spark.summary import capture_summary, flow_output

    spark = build_spark("local[*]", app_name="bench-ingest")
    timings = {"spark_start": time.perf_counter() - started}
    partitions = max(2, spark.sparkContext.defaultParallelism * 2)
    staging = Path(paths[0]).parent / "ingest-tables"  # beside the capture, removed after
    folders = tuple((table, str(staging / table)) for table in schemas.TABLES)
    config = FlowPassConfig(tuple(paths), close_open=True, table_dirs=folders, batch_id="bench")
    cpu_by_phase: dict[str, object] = {}
    out: dict[str, object] = {"timings": timings, "cpu": cpu_by_phase}
    for rep in ("", "warm_"):
        cpu = cpu_seconds_by_command(os.getpid())
        mark = time.perf_counter()
        # As the runner: the capture pass persisted, its stats collected, the flows placed.
        packets = packets_frame(spark, paths).persist(StorageLevel.DISK_ONLY)
        summary = capture_summary(packets)
        rows = {"packet": summary.stats.get("tcp_packets", 0)}
        cuts = ranges(summary.flow_weights, rows["packet"], partitions)
        timings[f"{rep}packets_frame"] = time.perf_counter() - mark
        now = cpu_seconds_by_command(os.getpid())
        cpu_by_phase[f"{rep}packets_frame"], cpu = cpu_used(cpu, now), now
        shutil.rmtree(staging, ignore_errors=True)
        mark = time.perf_counter()
        _written, counts = flow_output(flow_pass(packets, None, config, partitions, cuts=cuts))
        timings[f"{rep}flow_pass"] = time.perf_counter() - mark
        cpu_by_phase[f"{rep}flow_pass"] = cpu_used(cpu, cpu_seconds_by_command(os.getpid()))
        packets.unpersist()
        out["packet_rows"] = rows
        out["output_rows"] = {table: counts[table] for table in schemas.TABLES}
    shutil.rmtree(staging, ignore_errors=True)
    spark.stop()
    return out


# --- the parent ---------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("STOMP_LAKE_WORK", str(DEFAULT_DATA / "spark-work"))
    return env


def run_ours(paths: list[Path]) -> tuple[Measured, dict]:
    command = [sys.executable, "-m", "benchmarks.bench_ingest", CHILD_FLAG, *map(str, paths)]
    measured = run_measured(command, cwd=REPO, env=_env())
    if measured.returncode != 0:
        raise RuntimeError(f"our phases failed:\n{measured.stderr[-4000:]}")
    extra = json.loads(measured.stdout.strip().splitlines()[-1])
    # the warm repetition is extra: the case's time is what one run of the phases takes
    t = extra["timings"]
    measured.seconds = round(measured.seconds - t["warm_packets_frame"] - t["warm_flow_pass"], 3)
    return measured, extra


def run_tshark(paths: list[Path], parallel: int) -> Measured:
    script = 'printf "%s\\0" "$@" | xargs -0 -P "$P" -I{} tshark -n -q -z conv,tcp -r {}'
    command = ["sh", "-c", script, "tshark-conv", *map(str, paths)]
    measured = run_measured(command, env={**os.environ, "P": str(parallel)})
    if measured.returncode != 0:
        raise RuntimeError(f"tshark failed:\n{measured.stderr[-2000:]}")
    return measured


def run_tcpflow(paths: list[Path], out: Path) -> tuple[Measured, int]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    command = ["tcpflow", *[arg for p in paths for arg in ("-r", str(p))], "-o", str(out)]
    measured = run_measured(command)
    written = sum(f.stat().st_size for f in out.iterdir() if f.name != "report.xml")
    shutil.rmtree(out, ignore_errors=True)
    if measured.returncode != 0:
        raise RuntimeError(f"tcpflow failed:\n{measured.stderr[-2000:]}")
    return measured, written


def generate(args: argparse.Namespace) -> GeneratedCapture:
    spec = TrafficSpec(
        total_bytes=int(args.mb * 1e6),
        connections=args.connections,
        concurrent=min(args.connections, 60),
        files=args.files,
        segment_bytes=args.segment_bytes,
    )
    name = f"ingest-{args.mb:g}mb-{args.connections}c-{args.segment_bytes}b"
    return generate_files(spec, args.data / name)


def run(args: argparse.Namespace) -> dict[str, object]:
    capture = generate(args)
    paths = capture.paths
    before = machine()
    cpus = os.cpu_count() or 1
    cases = {
        "ours (packets_frame + flow_pass, local[*])": lambda: run_ours(paths),
        "tshark -z conv,tcp, 1 process": lambda: (run_tshark(paths, 1), {}),
        f"tshark -z conv,tcp, {cpus} processes": lambda: (run_tshark(paths, cpus), {}),
        "tcpflow, 1 process": lambda: _tcpflow_case(paths, args.data / "tcpflow-out"),
    }
    rounds: dict[str, list[tuple[Measured, dict]]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, case in cases.items():
            warm_page_cache(paths)  # every case meets the files in the page cache
            rounds[name].append(case())
    after = machine()
    return report(capture, rounds, before, after)


def _tcpflow_case(paths: list[Path], out: Path) -> tuple[Measured, dict]:
    measured, written = run_tcpflow(paths, out)
    return measured, {"bytes_written": written}


def report(
    capture: GeneratedCapture,
    rounds: dict[str, list[tuple[Measured, dict]]],
    before: dict,
    after: dict,
) -> dict[str, object]:
    size = capture.file_bytes
    ours_name = next(iter(rounds))
    rows = {}
    for name, runs in rounds.items():
        best, extra = min(runs, key=lambda run: run[0].seconds)
        row: dict[str, object] = {
            **best.figures(),
            "mb_per_s": round(size / best.seconds / 1e6, 1),
            "runs_seconds": [run.seconds for run, _ in runs],
            "peak_pss_mb_max": max(run.peak_pss_mb for run, _ in runs),
        }
        if extra:
            row.update({k: v for k, v in extra.items() if k not in ("timings", "cpu")})
        if "timings" in extra:
            t = extra["timings"]
            row["timings"] = {k: round(v, 2) for k, v in t.items()}
            row["cpu_seconds"] = extra["cpu"]
            cold = t["packets_frame"] + t["flow_pass"]
            warm = t["warm_packets_frame"] + t["warm_flow_pass"]
            row["phases_cold_seconds"] = round(cold, 2)
            row["phases_cold_mb_per_s"] = round(size / cold / 1e6, 1)
            row["phases_warm_seconds"] = round(warm, 2)
            row["phases_warm_mb_per_s"] = round(size / warm / 1e6, 1)
        rows[name] = row
    ratios = {  # the other case's time / ours, per round (>1: ours is faster)
        name: round(
            statistics.median(
                other.seconds / ours.seconds
                for (other, _), (ours, _) in zip(runs, rounds[ours_name], strict=True)
            ),
            2,
        )
        for name, runs in rounds.items()
        if name != ours_name
    }
    result = {
        "capture": {
            "files": len(capture.paths),
            "file_bytes": size,
            "stomp_bytes": capture.stomp_bytes,
            "packets": capture.packets,
            "connections": capture.connections,
            "segment_bytes": capture.spec.segment_bytes,
            "frames": sum(capture.frames.values()),
            "heartbeats": capture.heartbeats,
            "generated_in_s": capture.seconds,
        },
        "repeat": len(rounds[ours_name]),
        "machine_before": before,
        "machine_after": after,
        "rows": rows,
        "time_ratio_to_ours": ratios,
        "check": _check(capture, rows[ours_name]),
    }
    return result


def _check(capture: GeneratedCapture, ours: dict) -> dict[str, object]:
    """Did our phases see every packet and decode every frame the generator wrote?"""
    packets = ours.get("packet_rows", {}).get("packet", 0)
    frames = ours.get("output_rows", {}).get("frames", 0)
    sessions = ours.get("output_rows", {}).get("sessions", 0)
    expected_frames = sum(capture.frames.values())
    return {
        "packets_read": packets,
        "packets_written": capture.packets,
        "frames_decoded": frames,
        "frames_written": expected_frames,
        "sessions": sessions,
        "connections_written": capture.connections,
        "all_seen": packets == capture.packets
        and frames == expected_frames
        and sessions == capture.connections,
    }


def markdown(result: dict) -> str:
    cap = result["capture"]
    before, after = result["machine_before"], result["machine_after"]
    lines = [
        "# Ingest and reassembly: the job's phases vs tshark and tcpflow",
        "",
        f"{cap['file_bytes'] / 1e6:.0f} MB in {cap['files']} rotated pcapng files "
        f"(benchmarks/traffic.py: {cap['connections']} broker-like STOMP connections, "
        f"{cap['packets']} packets, {cap['segment_bytes']}-byte segments, "
        f"{cap['frames']} frames and "
        f"{cap['heartbeats']} heart-beats). Fastest of {result['repeat']} rounds; "
        f"{before['cpu_count']} CPUs shared with other work: 1-minute load average "
        f"{before['load_average_1min']} before, {after['load_average_1min']} after "
        "(absolute figures move with it; the ratios, taken within rounds, much less). "
        "Peak memory: the whole process tree (driver, JVM, Python workers), RSS sampled every "
        "0.2 s, PSS every 2 s and at each new RSS high (PSS counts pages shared by forked "
        "workers once).",
        "",
        "| case | seconds | MB/s | peak RSS MB | peak PSS MB | processes | runs (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, row in result["rows"].items():
        runs = ", ".join(f"{s:.1f}" for s in row["runs_seconds"])
        lines.append(
            f"| {name} | {row['seconds']:.1f} | {row['mb_per_s']} | {row['peak_rss_mb']:.0f} | "
            f"{row['peak_pss_mb']:.0f} | {row['peak_processes']} | {runs} |"
        )
    ours_name, ours = next(iter(result["rows"].items()))
    t, cpu = ours["timings"], ours["cpu_seconds"]
    lines += [
        "",
        f"Ours (the case's time is its process's wall time less the warm repetition below): "
        f"Spark start {t['spark_start']} s; cold, as a run meets them: packets_frame "
        f"{t['packets_frame']} s, flow_pass {t['flow_pass']} s = "
        f"{ours['phases_cold_mb_per_s']} MB/s; the same phases again in the same session "
        f"(JVM compiled, Python workers up): {t['warm_packets_frame']} s + "
        f"{t['warm_flow_pass']} s = {ours['phases_warm_mb_per_s']} MB/s.",
        "",
        "CPU seconds of our process tree by phase: "
        + "; ".join(
            f"{phase} " + ", ".join(f"{name} {secs}" for name, secs in used.items() if secs)
            for phase, used in cpu.items()
        )
        + ".",
        "",
        "Time of each case / ours, median over rounds (> 1: ours faster): "
        + ", ".join(f"{name} {ratio}x" for name, ratio in result["time_ratio_to_ours"].items())
        + ".",
        "",
        f"Check: {result['check']['packets_read']} of {result['check']['packets_written']} "
        f"packets read, {result['check']['frames_decoded']} of "
        f"{result['check']['frames_written']} frames decoded, {result['check']['sessions']} of "
        f"{result['check']['connections_written']} sessions "
        f"({'all seen' if result['check']['all_seen'] else 'NOT all seen'}).",
        "",
        "What each does: ours reads every record header, reassembles both directions of every "
        "connection, decodes every STOMP frame, and builds and writes every table row "
        "(Parquet in a scratch folder, removed after); tshark conv,tcp dissects every packet "
        "and counts conversations per file (no reassembly, no STOMP); tcpflow reassembles and "
        "writes every stream.",
        "",
    ]
    return "\n".join(lines)


def write(result: dict, out: Path, stem: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown(result))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        report_and_exit(ours_child(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument(
        "--segment-bytes",
        type=int,
        default=1460,
        help="65483: the 64 KiB packets loopback GSO captures show",
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    result = run(args)
    stem = "ingest" if args.segment_bytes == 1460 else f"ingest-{args.segment_bytes}b"
    write(result, args.out, stem)
    print(markdown(result))


if __name__ == "__main__":
    main()
