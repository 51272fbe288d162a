"""TLS-decrypted STOMP against plain STOMP over TCP: the same traffic (a broker's MESSAGEs and a
client's ACKs, each frame written on its own as clients and brokers write them) through the
session model directly, and through the TLS transport first (`pipeline.tls`: records cut out,
decrypted with the key log's secrets, handed on), for TLS 1.3 and TLS 1.2 suites.

The TLS bytes are real: OpenSSL on both sides (`tests/support/tls_pair.py`, in memory), in
1460-byte TCP segments in the order they crossed. Measured two ways, one core, CPU time:

- the flow pass as a `stomp-lake run` task runs it, without Spark: each conversation written as
  a capture file, read into flow pieces, fed through a `FlowRunner` (reassembly, TLS, STOMP
  decoding, the session model, table rows), as `benchmarks/bench_flow_loop.py` does: the cost
  per byte of traffic a run pays;
- the session model alone, fed the STOMP bytes directly or through the TLS transport (past the
  handshake, a packet's records opened in bulk, `TlsTransport.receive_run`, as in the flow
  pass): the TLS layer's share where nothing else is counted.

The paths take turns within each round; each TLS round is divided by the TCP time of the same
round. Writes benchmarks/results/tls.md and .json (or to --out).

    .venv/bin/python -m benchmarks.bench_tls [--messages 20000] [--repeat 7] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks.bench_flow_loop import sorted_pieces
from benchmarks.bench_websocket import measure, spread, traffic
from pipeline.net import Direction
from pipeline.process import fewer_collections
from pipeline.session import Endpoint, SessionModel
from pipeline.session.frame_rows import TableRows
from pipeline.spark.flows import FlowPassConfig, FlowRunner
from pipeline.tls.keylog import KeyLog
from pipeline.tls.transport import TlsTransport
from pipeline.websocket import apply
from tests.support.tls_pair import Conversation

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_COST_VS_TCP = 1.3
SEGMENT = 1460
Script = list[tuple[Direction, int, bytes]]
SUITES: dict[str, dict[str, Any]] = {
    "tls13_aes128_gcm": {"tls13_suite": "TLS_AES_128_GCM_SHA256"},
    "tls13_chacha20": {"tls13_suite": "TLS_CHACHA20_POLY1305_SHA256"},
    "tls12_aes128_gcm": {"tls12_cipher": "ECDHE-RSA-AES128-GCM-SHA256"},
    "tls12_aes128_cbc": {"tls12_cipher": "ECDHE-RSA-AES128-SHA256"},
}
LABELS = {
    "tcp": "TCP (baseline)",
    "tls13_aes128_gcm": "TLS 1.3 AES-128-GCM",
    "tls13_chacha20": "TLS 1.3 ChaCha20-Poly1305",
    "tls12_aes128_gcm": "TLS 1.2 ECDHE-RSA AES-128-GCM",
    "tls12_aes128_cbc": "TLS 1.2 ECDHE-RSA AES-128-CBC-SHA256",
}


def segmented(wire: list[tuple[Direction, bytes]]) -> Script:
    """(direction, offset, data) in crossing order, each write cut into TCP segments."""
    out: Script = []
    at = {Direction.C2S: 0, Direction.S2C: 0}
    for direction, data in wire:
        for start in range(0, len(data), SEGMENT):
            piece = data[start : start + SEGMENT]
            out.append((direction, at[direction], piece))
            at[direction] += len(piece)
    return out


def _model() -> SessionModel:
    return SessionModel("b", Endpoint("10.0.0.1", 1), Endpoint("10.0.0.2", 2))


def tcp_path(script: Script) -> int:
    model, frames = _model(), 0
    for n, (direction, offset, data) in enumerate(script):
        model.on_data_run(direction, offset, data, [len(data)], [n], [("", n)])
        if n % 64 == 0:
            frames += len(model.drain()["frames"])
    model.finish(len(script))
    return frames + len(model.drain()["frames"])


def tls_path(script: Script, keys: KeyLog) -> int:
    model, transport, frames = _model(), TlsTransport(keys.get), 0
    model.map_tcp_offsets(transport.tcp_offsets)
    for n, (direction, offset, data) in enumerate(script):
        if transport.runs:  # past the handshake: records opened in bulk, as a run's are
            transport.receive_run(model, direction, offset, data, [len(data)], [n], [("", n)])
        else:
            apply(model, transport.receive(direction, n, offset, data), ("", n))
        if n % 64 == 0:
            frames += len(model.drain()["frames"])
    model.finish(len(script))
    return frames + len(model.drain()["frames"])


def flow_pass(paths: list[str], pieces: pa.RecordBatch, keys: KeyLog | None) -> int:
    """Frames a `FlowRunner` made of the capture's pieces, as the flow pass's task runs it."""
    frames = 0

    def count(kind: str, rows: TableRows, _keys: list[str | None]) -> None:
        nonlocal frames
        frames += len(rows) if kind == "frames" else 0

    with fewer_collections():
        runner = FlowRunner(FlowPassConfig(tuple(paths), close_open=True, tls_keys=keys), count)
        runner.feed_batch(pieces)
        runner.close()
    return frames


def captures(
    folder: Path, exchanges: list[tuple[Direction, bytes]], talks: dict[str, Conversation]
) -> dict[str, list[str]]:
    """The plain conversation and each TLS one written as a capture file of their own."""
    from tests.support.tls_pair import write_capture

    out = {"tcp": [str(write_capture(Conversation(wire=exchanges), folder / "tcp.pcap"))]}
    for name, talk in talks.items():
        out[name] = [str(write_capture(talk, folder / f"{name}.pcap"))]
    return out


def conversations(
    messages: int,
) -> tuple[
    Script,
    dict[str, tuple[Script, KeyLog, str]],
    dict[str, Conversation],
    list[tuple[Direction, bytes]],
]:
    from tests.support.tls_pair import converse

    c2s, s2c = traffic(messages)
    exchanges = [(Direction.C2S, c2s[0]), (Direction.C2S, c2s[1]), (Direction.S2C, s2c[0])]
    for message, ack in zip(s2c[1:], c2s[2:], strict=True):
        exchanges += [(Direction.S2C, message), (Direction.C2S, ack)]
    tcp = segmented(exchanges)
    out = {}
    talks = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, options in SUITES.items():
            talk = converse(Path(scratch), exchanges=exchanges, **options)
            keys = KeyLog()
            keys.add_lines(talk.keylog.splitlines())
            out[name] = (segmented(talk.wire), keys, talk.cipher)
            talks[name] = talk
    return tcp, out, talks, exchanges


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7, help="rounds; each runs every path")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for tls.md/.json")
    args = parser.parse_args(argv)
    tcp, suites, talks, exchanges = conversations(args.messages)
    stomp_bytes = sum(len(data) for _, _, data in tcp)
    runs: dict[str, Callable[[], int]] = {"tcp": partial(tcp_path, tcp)}
    for name, (script, keys, _) in suites.items():
        runs[name] = partial(tls_path, script, keys)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        files = captures(Path(scratch), exchanges, talks)
        pass_runs: dict[str, Callable[[], int]] = {}
        for name, capture in files.items():
            keylog = None if name == "tcp" else suites[name][1]
            pass_runs[name] = partial(flow_pass, capture, sorted_pieces(capture), keylog)
        pass_seconds = measure(pass_runs, args.repeat)
    seconds = measure(runs, args.repeat)
    load_after = os.getloadavg()[0]
    paths: dict[str, Any] = {}
    for name in runs:
        script = tcp if name == "tcp" else suites[name][0]
        paths[name] = {
            "wire_bytes": sum(len(data) for _, _, data in script),
            "segments": len(script),
            "seconds": spread(seconds[name], 4),
            "stomp_mb_per_s_median": round(stomp_bytes / 1e6 / statistics.median(seconds[name]), 2),
        }
        if name != "tcp":
            paths[name]["openssl_cipher"] = suites[name][2]
    cost = {
        name: spread([t / b for t, b in zip(seconds[name], seconds["tcp"], strict=True)], 3)
        for name in suites
    }
    pass_cost = {
        name: spread(
            [t / b for t, b in zip(pass_seconds[name], pass_seconds["tcp"], strict=True)], 3
        )
        for name in suites
    }
    flow_pass_paths = {
        name: {
            "seconds": spread(pass_seconds[name], 4),
            "stomp_mb_per_s_median": round(
                stomp_bytes / 1e6 / statistics.median(pass_seconds[name]), 2
            ),
        }
        for name in pass_seconds
    }
    report = {
        "messages": args.messages,
        "frames": tcp_path(tcp),
        "stomp_bytes": stomp_bytes,
        "segment_bytes": SEGMENT,
        "repeat": args.repeat,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1min": {"start": round(load_before, 2), "end": round(load_after, 2)},
        "flow_pass": flow_pass_paths,
        "flow_pass_cost_vs_tcp": pass_cost,
        "paths": paths,
        "cost_vs_tcp": cost,
        "target_cost_vs_tcp": TARGET_COST_VS_TCP,
        "within_target": all(c["median"] <= TARGET_COST_VS_TCP for c in pass_cost.values()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tls.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "tls.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def markdown(report: dict[str, Any]) -> str:
    load = report["load_average_1min"]
    lines = [
        "# STOMP over TLS, decrypted, against STOMP over TCP",
        "",
        f"{report['stomp_bytes'] / 1e6:.2f} MB of STOMP ({report['messages']} MESSAGEs with "
        f"~340-byte JSON bodies and as many ACKs, {report['frames']} frames, each written on its "
        "own) through the session model: as TCP segments of "
        f"{report['segment_bytes']} bytes, and as real TLS records (OpenSSL on both sides) in "
        "segments of the same size, decrypted with the client's key log by `pipeline.tls`. One "
        f"core, CPU time, {report['repeat']} rounds in which the paths take turns; each TLS round "
        "is divided by the TCP round it ran with. Python "
        f"{report['python']} ({report['machine']}, {report['cpus']} CPUs, 1-minute load average "
        f"{load['start']} at start and {load['end']} at end). Produced by "
        "`benchmarks/bench_tls.py`.",
        "",
        "The flow pass (what a run pays per byte):",
        "",
        "| path | s median (min-max) | STOMP MB/s | cost vs TCP median (min-max) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, path in report["flow_pass"].items():
        lines.append(f"| {LABELS[name]} | {_figures(path, report['flow_pass_cost_vs_tcp'], name)}")
    lines += [
        "",
        "The session model alone, fed directly or through the TLS transport:",
        "",
        "| path | wire MB | segments | s median (min-max) | STOMP MB/s | cost vs TCP median "
        "(min-max) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, path in report["paths"].items():
        wire = f"{path['wire_bytes'] / 1e6:.2f} | {path['segments']:,}"
        lines.append(f"| {LABELS[name]} | {wire} | {_figures(path, report['cost_vs_tcp'], name)}")
    verdict = "met" if report["within_target"] else "not met"
    lines += [
        "",
        f"Target: the flow pass at most {report['target_cost_vs_tcp']}x the TCP cost per STOMP "
        f"byte ({verdict}).",
        "",
    ]
    return "\n".join(lines)


def _figures(path: dict[str, Any], costs: dict[str, Any], name: str) -> str:
    """A table row's times, speed and cost against TCP (1.00 for TCP itself)."""
    s = path["seconds"]
    ratio = "1.00"
    if name in costs:
        c = costs[name]
        ratio = f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})"
    times = f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f})"
    return f"{times} | {path['stomp_mb_per_s_median']:.1f} | {ratio} |"


if __name__ == "__main__":
    raise SystemExit(main())
