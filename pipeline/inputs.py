"""What a run ingests: the capture files under its inputs (files still being written left
alone, unfinished ones left by a crash reported), told from other files by their first bytes,
and the TLS secrets of the key logs given and of the pcapng captures' Decryption Secrets Blocks.
Checked before the lake is touched or Spark starts."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from pipeline.errors import UsageError
from pipeline.ingest.secrets import embedded_keylogs
from pipeline.ingest.sniff import detect_format, unknown_format
from pipeline.tls.keylog import KeyLog, read_keylogs

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".dmp")


def discover(inputs: Iterable[Path]) -> list[str]:
    """Capture files under the inputs; files still being written (temp names) are left alone."""
    found: list[str] = []
    for path in inputs:
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        for candidate in candidates:
            name = candidate.name
            if name.startswith(".") or name.endswith(".partial") or not candidate.is_file():
                continue
            if path.is_dir() and not name.lower().endswith(CAPTURE_SUFFIXES):
                continue
            found.append(str(candidate.resolve()))
    return found


NOT_A_CAPTURE = "not a capture file"
# A capture still being written ends in .partial and is touched at least every flush interval
# (stomp-capture: 1 s); one untouched for this long was most likely left by a crash.
PARTIAL_GRACE_SECONDS = 300.0
STALE_PARTIAL = (
    "unfinished capture (.partial) not written to for 5 minutes, left by a crash? "
    "starting stomp-capture on its folder recovers it"
)


def stale_partials(
    inputs: Iterable[Path], grace_s: float = PARTIAL_GRACE_SECONDS, now: float | None = None
) -> list[str]:
    """``.partial`` files under the inputs that nothing has written to for ``grace_s``: they are
    never ingested as they are, so the run reports them instead of passing over them."""
    now = time.time() if now is None else now
    stale = []
    for path in inputs:
        candidates = sorted(path.rglob("*.partial")) if path.is_dir() else [path]
        for candidate in candidates:
            if not candidate.name.endswith(".partial") or not candidate.is_file():
                continue
            try:
                idle = now - candidate.stat().st_mtime
            except OSError:
                continue
            if idle > grace_s:
                stale.append(str(candidate.resolve()))
    return stale


SNIFF_BYTES = 8


class InputError(UsageError):
    """The inputs name nothing to ingest: found before the lake is touched or Spark starts."""


def sniff_captures(paths: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """The files that start like a pcap or pcapng, and the others with the reason. A file that
    cannot be read is left with the captures: the ledger scan reports it."""
    captures: list[str] = []
    others: dict[str, str] = {}
    for path in paths:
        try:
            with open(path, "rb") as handle:
                head = handle.read(SNIFF_BYTES)
        except OSError:
            captures.append(path)
            continue
        if detect_format(head, len(head)) == "unknown":
            others[path] = unknown_format(head, len(head)).detail
        else:
            captures.append(path)
    return captures, others


def tls_keylog(paths: Iterable[Path], captures: Iterable[str]) -> KeyLog:
    """The secrets of the key log files (or folders of them) given, and of the Decryption
    Secrets Blocks the pcapng captures hold, read once for the run."""
    keylog = read_keylogs(paths)
    for capture in captures:
        for text in embedded_keylogs(capture):
            keylog.add_lines(text.splitlines())
    return keylog


def check_inputs(
    inputs: Sequence[Path], tls_keylogs: Sequence[Path] = (), *, close_open: bool = False
) -> tuple[list[str], dict[str, str]]:
    """The capture files to scan and the files that are not captures; InputError (exit 2) for a
    missing input or inputs without one capture file, unless the run only closes carried
    connections (`--open-connections close` over an empty folder, as maintenance does)."""
    missing = [str(path) for path in (*inputs, *tls_keylogs) if not path.exists()]
    if missing:
        raise InputError(f"no such file or directory: {', '.join(missing)}")
    captures, others = sniff_captures(discover(inputs))
    if not captures and not close_open:
        named = ", ".join(str(path) for path in inputs)
        if others:
            why = "; ".join(f"{path}: {reason}" for path, reason in others.items())
            raise InputError(f"no capture files in {named} ({NOT_A_CAPTURE}: {why})")
        suffixes = ", ".join(CAPTURE_SUFFIXES)
        raise InputError(f"no capture files ({suffixes}) in {named}")
    return captures, others
