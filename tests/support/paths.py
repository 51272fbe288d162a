"""Where the repository's test inputs are."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
DATA = REPO / "tests" / "data"
# every capture file the repository holds: samples, real and malformed test captures, the
# capture reader's fuzz regressions (the compiled-vs-pure tests run them all)
REPO_CAPTURES = sorted(
    path
    for folder in ("samples", "tests/data", "fuzz/regressions")
    for path in (REPO / folder).rglob("*")
    if path.suffix in (".pcap", ".pcapng")
)
