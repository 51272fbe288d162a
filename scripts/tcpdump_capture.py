"""Run tcpdump on loopback for one TCP port while a block of code talks to a broker."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

BUFFER_KIB = 32768
READY_TIMEOUT_S = 10.0


@dataclass(slots=True)
class CaptureStats:
    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None
    stderr: list[str] = field(default_factory=list)


def _parse_stats(lines: list[str]) -> CaptureStats:
    stats = CaptureStats(stderr=lines)
    patterns = {
        "captured": r"(\d+) packets? captured",
        "received_by_filter": r"(\d+) packets? received by filter",
        "dropped_by_kernel": r"(\d+) packets? dropped by kernel",
    }
    for line in lines:
        for name, pattern in patterns.items():
            match = re.search(pattern, line)
            if match:
                setattr(stats, name, int(match.group(1)))
    return stats


@contextlib.contextmanager
def tcpdump(
    out: Path, port: int, *, nanoseconds: bool = False, settle_s: float = 0.5
) -> Iterator[CaptureStats]:
    """Capture `tcp port PORT` on lo into `out`; stats are filled in once the block exits."""
    # Without immediate mode, packets still in the TPACKET_V3 ring block are lost on SIGINT.
    argv = ["tcpdump", "-i", "lo", "--immediate-mode", "-w", str(out), "-B", str(BUFFER_KIB)]
    argv += ["-s", "0", "-n", "-U"]
    if nanoseconds:
        argv.append("--time-stamp-precision=nano")
    argv.append(f"tcp port {port}")
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    lines: list[str] = []
    listening = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if "listening on" in line:
                listening.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    if not listening.wait(READY_TIMEOUT_S):
        process.kill()
        raise RuntimeError(f"tcpdump did not start: {lines}")
    # "listening on" is printed once the handle is active; give the ring a moment anyway.
    time.sleep(0.2)
    stats = CaptureStats()
    try:
        yield stats
        time.sleep(settle_s)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=5)
        parsed = _parse_stats(lines)
        stats.captured = parsed.captured
        stats.received_by_filter = parsed.received_by_filter
        stats.dropped_by_kernel = parsed.dropped_by_kernel
        stats.stderr = lines
