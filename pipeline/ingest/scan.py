"""The readers' compiled hot loop (`_scan.pyx`): whole TCP packets of the common shapes read
into column arrays, no Python object per packet. None when not built or when pure Python is
asked for (`pipeline.compiled`); the readers then read every record themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.compiled import kernel

if TYPE_CHECKING:
    from types import ModuleType

    from pipeline.ingest._scan import PacketScanner

__all__ = ["PacketScanner", "SCAN_CAPACITY", "compiled_walks", "new_scanner"]

SCAN_CAPACITY = 16_384  # packets a scanner holds before the reader hands them on


def new_scanner(capacity: int = SCAN_CAPACITY) -> PacketScanner | None:
    module = kernel("scan")
    return None if module is None else module.PacketScanner(capacity)


def compiled_walks() -> ModuleType | None:
    """The module of the splitter's compiled walks (`walk_pcap`, `PcapngWalk`), or None: the
    splitter then walks every record header in Python."""
    return kernel("scan")
