"""TLS key logs embedded in pcapng files: Decryption Secrets Blocks, as `editcap
--inject-secrets tls,KEYLOG` writes them, read before any packet is.

Only the blocks ahead of a file's first packet block are read: that is where editcap puts them,
and where Wireshark needs them (a reader meets the secrets before the packets they decrypt). The
walk stops at the first packet, so a file of gigabytes costs a few block headers.
"""

from __future__ import annotations

import mmap
import os
from struct import Struct

from pipeline.ingest.pcapng_blocks import DSB, EPB, OPB, SPB, PcapngBlocks, is_pcapng_magic

TLS_KEY_LOG = 0x544C534B  # "TLSK": the secrets are an NSS key log
PACKET_BLOCKS = frozenset({EPB, SPB, OPB})


def embedded_keylogs(path: str | os.PathLike[str]) -> list[str]:
    """The key logs (NSS text) of the Decryption Secrets Blocks before `path`'s first packet."""
    try:
        size = os.path.getsize(path)
        if size < 28:
            return []
        with open(path, "rb") as handle, mmap.mmap(
            handle.fileno(), 0, access=mmap.ACCESS_READ
        ) as buf:
            return _keylogs(buf, size) if is_pcapng_magic(buf, size) else []
    except OSError:
        return []


def _keylogs(buf: mmap.mmap, size: int) -> list[str]:
    blocks = PcapngBlocks(buf, size)
    found: list[str] = []
    off: int | None = 0
    while off is not None and off < size:
        nxt, anomaly, btype, blen = blocks.next_block(off)
        if (anomaly is not None and btype == 0) or btype in PACKET_BLOCKS:
            break
        if btype == DSB and blen >= 20:
            kind, length = Struct(blocks.order + "II").unpack_from(buf, off + 8)
            if kind == TLS_KEY_LOG and 16 + length <= blen - 4:
                found.append(bytes(buf[off + 16 : off + 16 + length]).decode("ascii", "replace"))
        off = nxt
    return found
