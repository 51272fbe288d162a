"""Capture reader throughput against dpkt's per-layer decode, measured in the same run.

Run from the repository root:  python -m benchmarks.bench_capture_reader [--out DIR]
Writes DIR/capture_reader.md and DIR/capture_reader.json (DIR defaults to benchmarks/results).
Times are the best of --repeat rounds over the same synthetic capture (STOMP-like traffic,
Ethernet + IPv4, MSS 1460); each round runs every case once, and the speed-up is the median
over rounds of dpkt's time divided by ours in the same round, so load from other processes on
a shared machine skews it as little as possible.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import dpkt

from pipeline.ingest import CaptureReader, TcpPacket, split_capture
from pipeline.ingest.scan import new_scanner
from pipeline.spark.captures import read_paths
from tests.support import pcapgen

DEFAULT_OUT = Path(__file__).resolve().parent / "results"


def interleaved(repeat: int, cases: dict[str, Callable[[], int]]) -> dict[str, list[float]]:
    """Wall times of every case, run in rounds (one run of each case per round) so that load
    changes on a shared machine hit all cases alike."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            start = time.perf_counter()
            case()
            times[name].append(time.perf_counter() - start)
    return times


def read_ours(path: Path) -> int:
    count = 0
    with CaptureReader(str(path)) as reader:
        for item in reader:
            if type(item) is TcpPacket:
                count += 1
    return count


def read_ours_with_payload(path: Path) -> int:
    count = 0
    with CaptureReader(str(path)) as reader:
        for item in reader:
            if type(item) is TcpPacket:
                count += len(reader.payload(item)) >= 0
    return count


def read_dpkt(path: Path, reader_class: type) -> int:
    """dpkt's per-layer decode: link, IP and TCP objects for every packet."""
    count = 0
    with open(path, "rb") as handle:
        for _ts, frame in reader_class(handle):
            ip = dpkt.ethernet.Ethernet(frame).data
            if isinstance(ip.data, dpkt.tcp.TCP):
                count += len(ip.data.data) >= 0
    return count


def capture_pass(path: Path, compiled: bool) -> int:
    """What the capture pass does for one file: every packet read and packed into its flow's
    piece (`pipeline.spark.captures.read_split`), with the compiled scanner or without."""
    return sum(batch.num_rows for batch in read_paths([str(path)], compiled=compiled))


def split_walk(path: Path) -> int:
    return len(split_capture(str(path), max(1, path.stat().st_size // 8)))


def run(out: Path, conversations: int, messages: int, repeat: int) -> dict[str, object]:
    convs = [pcapgen.stomp_conversation(i, messages=messages) for i in range(conversations)]
    capture = pcapgen.generate(convs)
    with tempfile.TemporaryDirectory() as tmp:
        pcap = pcapgen.write_pcap(Path(tmp) / "bench.pcap", capture.packets, nanos=True)
        pcapng = pcapgen.write_pcapng(Path(tmp) / "bench.pcapng", capture.packets)
        sizes = {"pcap": pcap.stat().st_size, "pcapng": pcapng.stat().st_size}
        times = interleaved(
            repeat,
            {
                "ours_pcap": lambda: read_ours(pcap),
                "ours_pcap_with_payload_bytes": lambda: read_ours_with_payload(pcap),
                "ours_pcapng": lambda: read_ours(pcapng),
                "dpkt_pcap": lambda: read_dpkt(pcap, dpkt.pcap.Reader),
                "dpkt_pcapng": lambda: read_dpkt(pcapng, dpkt.pcapng.Reader),
                "pieces_pcap_compiled": lambda: capture_pass(pcap, True),
                "pieces_pcap_pure_python": lambda: capture_pass(pcap, False),
                "pieces_pcapng_compiled": lambda: capture_pass(pcapng, True),
                "pieces_pcapng_pure_python": lambda: capture_pass(pcapng, False),
                "split_capture_pcap_8_ways": lambda: split_walk(pcap),
                "split_capture_pcapng_8_ways": lambda: split_walk(pcapng),
            },
        )
    packets = len(capture.packets)
    rows = {}
    for name, runs in times.items():
        seconds = min(runs)
        size = sizes["pcapng" if "pcapng" in name else "pcap"]
        rows[name] = {
            "seconds": round(seconds, 6),
            "us_per_packet": round(seconds / packets * 1e6, 3),
            "mb_per_s": round(size / seconds / 1e6, 1),
        }
    speedup = {  # median over rounds of dpkt time / our time in the same round
        fmt: round(
            statistics.median(
                d / o for d, o in zip(times[f"dpkt_{fmt}"], times[f"ours_{fmt}"], strict=True)
            ),
            2,
        )
        for fmt in ("pcap", "pcapng")
    }
    compiled_speedup = {  # the capture pass, pure-Python time / compiled time, same round
        fmt: round(
            statistics.median(
                p / c
                for p, c in zip(
                    times[f"pieces_{fmt}_pure_python"], times[f"pieces_{fmt}_compiled"], strict=True
                )
            ),
            2,
        )
        for fmt in ("pcap", "pcapng")
    }
    result = {
        "packets": packets,
        "file_bytes": sizes,
        "repeat": repeat,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "rows": rows,
        "speedup_vs_dpkt": speedup,
        "compiled_scanner_built": new_scanner() is not None,
        "capture_pass_compiled_vs_pure_python": compiled_speedup,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "capture_reader.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "capture_reader.md").write_text(markdown(result))
    return result


def markdown(result: dict[str, object]) -> str:
    lines = [
        "# Capture reader vs dpkt",
        "",
        f"{result['packets']} packets (STOMP-like, Ethernet/IPv4, MSS 1460), "
        f"best of {result['repeat']} rounds, Python {result['python']}, one core "
        f"(load average {result['load_average_1min']} on {result['cpu_count']} cores: "
        "absolute figures move with load, the ratio to dpkt much less).",
        "",
        "| run | seconds | us / packet | MB/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    rows = cast(dict[str, dict[str, object]], result["rows"])
    for name, row in rows.items():
        lines.append(f"| {name} | {row['seconds']} | {row['us_per_packet']} | {row['mb_per_s']} |")
    speedup = result["speedup_vs_dpkt"]
    compiled = cast(dict[str, float], result["capture_pass_compiled_vs_pure_python"])
    lines += [
        "",
        "Speed-up over dpkt's per-layer decode (median of per-round ratios): "
        f"pcap {speedup['pcap']}x, "  # type: ignore[index]
        f"pcapng {speedup['pcapng']}x.",  # type: ignore[index]
        "",
        "The capture pass (`pieces_*`: every packet read and packed into its flow's piece, as "
        "a Spark task of `stomp-lake run` does), compiled scanner (`pipeline/ingest/_scan.pyx`) "
        "vs the pure-Python reader (STOMP_LAKE_PURE_PYTHON=1), median of per-round ratios: "
        f"pcap {compiled['pcap']}x, pcapng {compiled['pcapng']}x.",
        "",
        "`ours_*` yield a TcpPacket per segment (payload left in the file); "
        "`*_with_payload_bytes` also copies each payload out of the mapped file; "
        "`split_capture_*` walks record/block headers to cut the file in 8 ranges.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    result = run(args.out, args.conversations, args.messages, args.repeat)
    print(markdown(result))


if __name__ == "__main__":
    main()
