"""Where the install keeps things outside any lake: the bundled samples and this user's cache."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES_DIR = REPO_ROOT / "samples"
CACHE_VARIABLE = "STOMP_LAKE_CLASS_ARCHIVE_DIR"


def cache_dir() -> Path:
    """$STOMP_LAKE_CLASS_ARCHIVE_DIR, else this user's cache ($XDG_CACHE_HOME or ~/.cache): the
    JVM's class archive, the lean Spark home and the compiled Data Docs templates."""
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "stomp-lake"
