from __future__ import annotations

from capture.cli import run_cli

run_cli()
