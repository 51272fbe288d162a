"""Finish the capture files a crashed proxy left behind.

A proxy killed (SIGKILL, OOM, power loss) leaves its open file as ``<name>.pcapng.partial``.
On start the proxy calls ``recover_partial_files``: each such file is cut back to its last
complete block (a block torn by the crash, or garbage after it, is removed), synced and
renamed to its final name, so it is ingested like any other capture. A file too damaged to
keep even its section and interface headers is renamed ``<name>.unrecoverable``.

``valid_prefix`` is pure: it only reads the bytes it is given.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

from capture.writer import PARTIAL_SUFFIX
from pipeline.ingest.pcapng_blocks import IDB, SHB, PcapngBlocks
from pipeline.ingest.types import Buffer

log = logging.getLogger(__name__)

UNRECOVERABLE_SUFFIX = ".unrecoverable"
PROBE_PREFIX = ".stomp-capture-probe-"


@dataclass(frozen=True, slots=True)
class ValidPrefix:
    """How much of a pcapng file is whole blocks: ``length`` bytes, ``blocks`` blocks, and
    whether an interface was described (without one no packet can be read)."""

    length: int
    blocks: int
    has_interface: bool


def valid_prefix(data: Buffer) -> ValidPrefix:
    """The longest prefix of ``data`` made of whole pcapng blocks, starting with a section
    header, as the reader walks them (`PcapngBlocks`): each block's two length fields agree."""
    blocks = PcapngBlocks(data, len(data))
    off = count = 0
    has_interface = False
    while (length := blocks.block_len(off)) is not None:
        block_type = blocks.head(data, off)[0]
        if count == 0 and block_type != SHB:
            break  # a pcapng file starts with a section header
        blocks.next_block(off)  # keeps the section's byte order, as the reader does
        off += length
        count += 1
        has_interface = has_interface or block_type == IDB
    return ValidPrefix(off, count, has_interface)


@dataclass(frozen=True, slots=True)
class Recovered:
    partial: Path
    final: Path
    kept_bytes: int
    cut_bytes: int  # a torn block or garbage after the last whole block
    blocks: int

    @property
    def usable(self) -> bool:
        return not self.final.name.endswith(UNRECOVERABLE_SUFFIX)


def _free_name(path: Path) -> Path:
    """``path`` or, if taken, ``<stem>-recovered-N<suffix>``."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-recovered-{n}{path.suffix}")
    return candidate


def recover_file(partial: Path) -> Recovered:
    """Cut ``partial`` back to whole blocks, sync it and rename it (raises OSError)."""
    fd = os.open(partial, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            prefix = ValidPrefix(0, 0, False)
        else:
            with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as view:
                prefix = valid_prefix(view)
        if prefix.has_interface and prefix.length < size:
            os.ftruncate(fd, prefix.length)
        os.fsync(fd)
    finally:
        os.close(fd)
    name = partial.name.removesuffix(PARTIAL_SUFFIX)
    if prefix.has_interface:
        final = _free_name(partial.with_name(name))
        cut = size - prefix.length
    else:
        final = _free_name(partial.with_name(name + UNRECOVERABLE_SUFFIX))
        cut = 0
    os.rename(partial, final)
    return Recovered(partial, final, prefix.length if prefix.has_interface else size, cut,
                     prefix.blocks)


def recover_partial_files(out_dir: Path) -> list[Recovered]:
    """Recover every ``*.partial`` capture in ``out_dir`` and log what was done; a file that
    cannot be recovered is logged and left as it is."""
    results = []
    for partial in sorted(out_dir.glob("*" + PARTIAL_SUFFIX)):
        if partial.name.startswith(PROBE_PREFIX):
            partial.unlink(missing_ok=True)  # a writability probe of a killed proxy
            continue
        try:
            done = recover_file(partial)
        except OSError as exc:
            log.error("cannot recover %s left by an earlier run: %s", partial, exc)
            continue
        if done.usable:
            log.warning(
                "recovered %s left by an earlier run as %s: kept %d bytes (%d blocks),"
                " cut %d bytes of a torn block",
                partial.name, done.final.name, done.kept_bytes, done.blocks, done.cut_bytes,
            )
        else:
            log.error(
                "%s left by an earlier run has no whole section and interface header"
                " (%d bytes); renamed %s, not ingestible",
                partial.name, done.kept_bytes, done.final.name,
            )
        results.append(done)
    return results
