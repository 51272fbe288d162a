"""A consumer lagging far behind its deliveries: the session model's memory and speed with the
rows of unsettled MESSAGEs held in memory and with them spilled to disk
(`pipeline.session.spilled`), in the same run.

One connection: CONNECT, a client-individual SUBSCRIBE, then MESSAGEs of small JSON bodies and
8 headers, each ACKed ``--lag`` MESSAGEs after its delivery (the last ``--lag`` never), fed to a
compiled SessionModel in 64 KiB chunks, the rows drained as the flow pass drains them; a child
process a case. Reported: seconds and frames/s, the RSS the model adds while the consumer lags
(measured just before the connection ends), and the peak the process adds, which comes at the
end, when the MESSAGEs still unsettled become rows (a writer's batch at a time). A third case
carries the lagging connection to a next run first (`pipeline.spark.carried_state`: its state
cut into rows and read back a row at a time, as Spark hands them), then ends it.

    .venv/bin/python -m benchmarks.bench_pending [--messages 2000000] [--lag 1000000]
        [--in-memory 10000] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).resolve().parent / "results"
CHUNK = 64 * 1024
ALL_IN_MEMORY = 10**9  # max_pending_in_memory that spills nothing


def stream(messages: int, lag: int) -> Iterator[tuple[str, bytes]]:
    """(direction, bytes) of the connection, in order."""
    from pipeline.stomp import encode_frame

    yield "c2s", encode_frame("CONNECT", [("accept-version", "1.2"), ("host", "/")], b"")
    yield "s2c", encode_frame("CONNECTED", [("version", "1.2")], b"")
    subscribe = [("id", "0"), ("destination", "/queue/orders"), ("ack", "client-individual")]
    yield "c2s", encode_frame("SUBSCRIBE", subscribe, b"")
    for n in range(messages):
        body = b'{"order":%d,"sku":"A-%05d","quantity":%d,"note":"%s"}' % (
            n, n % 99991, n % 17, b"x" * (50 + n % 250)
        )  # fmt: skip
        headers = [
            ("subscription", "0"),
            ("message-id", f"ID:broker-1-{n}"),
            ("ack", f"ack-{n}"),
            ("destination", "/queue/orders"),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            ("priority", "4"),
            ("timestamp", str(1_700_000_000_000 + n)),
        ]
        yield "s2c", encode_frame("MESSAGE", headers, body) + b"\n"
        if n >= lag:
            yield "c2s", encode_frame("ACK", [("id", f"ack-{n - lag}")], b"")


def chunked(frames: Iterator[tuple[str, bytes]]) -> Iterator[tuple[str, bytes] | int]:
    """The frames joined into chunks of about 64 KiB, a direction's run at a time as they were
    sent; last, the number of frames."""
    count = 0
    run: list[bytes] = []
    size = 0
    last = None
    for direction, data in frames:
        count += 1
        if run and (direction != last or size >= CHUNK):
            yield last, b"".join(run)  # type: ignore[misc]
            run, size = [], 0
        last = direction
        run.append(data)
        size += len(data)
    if run:
        yield last, b"".join(run)  # type: ignore[misc]
    yield count


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(in_memory: int, messages: int, lag: int, carry: bool = False) -> dict[str, Any]:
    """One case (``max_pending_in_memory``, whether the connection is carried to a next run
    before it ends) in this process: the figures as a dict."""
    import gc
    import resource

    from pipeline.session import Endpoint, ModelOptions, SessionModel
    from pipeline.spark.carried_state import StateReader, dump_state
    from pipeline.spark.flows import OUTPUT_BATCH_ROWS

    options = ModelOptions(
        max_pending_messages=messages + 1,
        max_pending_bytes=1 << 40,
        max_pending_in_memory=in_memory,
    )
    model = SessionModel(
        "bench", Endpoint("10.0.0.1", 40000), Endpoint("10.0.0.2", 61613), options
    )
    chunks = list(chunked(stream(messages, lag)))  # made before the clock starts
    frames = chunks.pop()
    assert isinstance(frames, int)
    offsets = {"c2s": 0, "s2c": 0}
    ts = 1_700_000_000_000_000_000
    gc.collect()
    start_rss = rss_mb()
    started = time.perf_counter()
    for direction, data in chunks:  # type: ignore[misc]
        model.on_data(direction, ts, offsets[direction], data)
        offsets[direction] += len(data)
        ts += 1_000_000
        model.drain()
    lagging_rss = rss_mb()
    carried = {"state_rows": 0, "state_mb": 0.0}
    if carry:
        state = dump_state(model)  # type: ignore[arg-type]  # the model stands for the driver's
        del model
        reader = StateReader()
        for chunk in state.chunks():
            reader.add(chunk)
            carried["state_rows"] += 1
            carried["state_mb"] += len(chunk) / 1e6
        del state, chunk
        model = reader.load()  # type: ignore[assignment]
    model.finish(ts)
    rows = model.drain(OUTPUT_BATCH_ROWS)
    (session,) = rows["sessions"]
    while model.rows_left:  # handed to the writer a batch at a time, as the flow pass does
        rows = model.drain(OUTPUT_BATCH_ROWS)
    del rows
    seconds = time.perf_counter() - started
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    case = "rows in memory" if in_memory == ALL_IN_MEMORY else f"rows spilled past {in_memory:,}"
    return {
        "case": case + (", carried to a next run" if carry else ""),
        "max_pending_in_memory": in_memory,
        "carried": carry,
        "state_rows": carried["state_rows"],
        "state_mb": round(carried["state_mb"], 1),
        "frames": frames,
        "seconds": round(seconds, 2),
        "frames_per_s": round(frames / seconds),
        "unsettled_at_end": session["unacked_messages"],
        "lagging_added_mb": round(lagging_rss - start_rss, 1),
        "peak_rss_mb": round(peak_rss, 1),
        "peak_added_mb": round(peak_rss - start_rss, 1),
        "start_rss_mb": round(start_rss, 1),
    }


def run(messages: int, lag: int, in_memory: int, out: Path) -> list[dict[str, Any]]:
    """The cases, each in a child process: every row in memory, ``in_memory`` rows, and the
    same carried to a next run before the connection ends."""
    results = []
    for case, carry in ((ALL_IN_MEMORY, False), (in_memory, False), (in_memory, True)):
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_pending", "--child", str(case),
             "--messages", str(messages), "--lag", str(lag), *(["--carry"] if carry else [])],
            check=True, capture_output=True, text=True,
            cwd=Path(__file__).resolve().parents[1],
        )  # fmt: skip
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    report = {
        "messages": messages,
        "lag": lag,
        "python": platform.python_version(),
        "load_average": os.getloadavg()[0],
        "cases": results,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "pending.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "pending.md").write_text(markdown(report))
    return results


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# A lagging consumer: unsettled MESSAGEs' rows in memory vs spilled to disk, and carried",
        "",
        f"One connection, {report['messages']:,} MESSAGEs (small JSON bodies, 8 headers) to a "
        f"client-individual subscription, each ACKed {report['lag']:,} MESSAGEs after its "
        "delivery (the last ones never); the compiled session model alone, fed in 64 KiB chunks, "
        "rows drained as the flow pass drains them, one child process a case "
        f"(`benchmarks/bench_pending.py`, Python {report['python']}, 1-minute load "
        f"{report['load_average']:.2f}). When the connection ends, its unsettled MESSAGEs "
        "become rows, handed to the writer a batch at a time as the flow pass hands them. "
        "*Added while lagging*: RSS just before the connection ends, less RSS before the first "
        "frame (the input, made beforehand, is in both). *Peak added*: the highest RSS of the "
        "process, less the same.",
        "",
        "| case | frames | seconds | frames/s | unsettled at the end | added while lagging "
        "| peak added |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case in report["cases"]:
        lines.append(
            f"| {case['case']} | {case['frames']:,} | {case['seconds']} | "
            f"{case['frames_per_s']:,} | {case['unsettled_at_end']:,} | "
            f"{case['lagging_added_mb']:,} MB | {case['peak_added_mb']:,} MB |"
        )
    memory, spilled, carried = report["cases"]
    lines += [
        "",
        f"Carried: the connection's state went to {carried['state_rows']:,} rows, "
        f"{carried['state_mb']:,} MB in all (the spilled rows' bytes in rows of at most 8 MB "
        "after the pickle's), each handed on before the next is read.",
    ]
    if spilled["lagging_added_mb"] > 0:
        ratio = memory["lagging_added_mb"] / spilled["lagging_added_mb"]
        lines += [
            "",
            f"Spilling: {ratio:.1f}x less memory while the consumer lags, at "
            f"{spilled['frames_per_s'] / memory['frames_per_s']:.2f}x the frames a second.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--lag", type=int, default=1_000_000)
    parser.add_argument("--in-memory", type=int, default=10_000, help="max_pending_in_memory")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--carry", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.messages, args.lag, args.carry)))
        return
    for case in run(args.messages, args.lag, args.in_memory, args.out):
        print(json.dumps(case))


if __name__ == "__main__":
    main()
