"""Rotating pcapng file writer behind a bounded in-memory buffer, on its own thread.

The forwarding side only ever calls ``has_room``/``offer``/``drop``, which never block on
the disk. Two modes for a full buffer:
- lossless (the proxy's default): every record is admitted; ``backlogged`` tells the proxy
  to stop reading from its sockets, and ``on_drained`` (called from the writer thread) when
  the queue is down to half the buffer, to read again. Traffic slows to the disk's pace.
- drop: data records are refused (and counted) instead of waiting; forwarding never slows.
Control records (handshake, FIN, RST, markers) are tiny and always admitted so a capture
keeps its connection structure even when payload is lost.

A failing disk (full, or any write error): in lossless mode the writer keeps the records that
did not fit and retries them for up to ``disk_full_wait`` seconds while ``backlogged`` holds
the proxy's reading (traffic pauses, nothing is lost if space returns in time); past that, or
at once in drop mode, payload is dropped and only control records are still tried, until a
write succeeds again. One wait per episode (from the first failed write to the next one that
succeeds), none within DISK_REWAIT_SECONDS of a wait that ran out; logged and counted.
Payload lost at the disk is tallied per connection, direction and reason, with the time
range of the lost bytes, and written as capture-loss blocks as soon as the disk takes them
again (retried while idle, and at close); whatever is still unwritten at close is logged
with its bytes and time range (``unrecorded_losses``).

Files are written as ``<name>.partial`` and renamed when complete, with mode 0640 by default.
Queued records reach the file within ``flush_seconds`` (unless the disk is behind), and an
fdatasync of the file starts at most that long after a write (on a thread of its own, so
writing goes on meanwhile): a crash of the process loses what was queued, a power loss also
what was written since the last fdatasync that completed. Writeback of each batch is started
right after it is written (Linux ``sync_file_range``), so the disk streams all along instead
of dirty pages piling up until the kernel throttles the writer or an fdatasync finds a second
of data to write. Feeding the writer 2 GB as fast as it takes them, alternating with dd on
this shared machine, the time until all was on disk varied less with it (362-405 MB/s over
four runs, 297-446 without; dd 338-464).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from capture import pcapng

log = logging.getLogger(__name__)

IOV_MAX = 1024
DEFAULT_DISK_FULL_WAIT = 5.0
# how often a failing disk is retried (held records in lossless mode, loss blocks when idle)
DISK_RETRY_SECONDS = 0.1
# after a wait for the disk ran out, a disk failing again this soon is not waited for: a
# nearly full disk that takes small writes but not large ones would else pause traffic again
# and again
DISK_REWAIT_SECONDS = 60.0
MAX_BATCH_BYTES = 8 << 20
# the writer thread is woken when this much is queued, and else looks every WAKE_SECONDS
WAKE_BYTES = 1 << 20
WAKE_SECONDS = 0.05
DEFAULT_FLUSH_SECONDS = 1.0
PARTIAL_SUFFIX = ".partial"
SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[[int, int, int], None] | None:
    """Linux's sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE) (not in ``os``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    function.restype = ctypes.c_int

    def start_writeback(fd: int, offset: int, length: int) -> None:
        function(fd, offset, length, SYNC_FILE_RANGE_WRITE)  # a hint: errors show at fdatasync

    return start_writeback


start_writeback = _sync_file_range()


@dataclass(slots=True)
class LossTally:
    """Capture bytes lost, in how many records, and when they were read."""

    size: int = 0
    records: int = 0
    first_ts_ns: int = 0
    last_ts_ns: int = 0

    def add(self, size: int, records: int, first_ts_ns: int, last_ts_ns: int) -> None:
        if not self.records or first_ts_ns < self.first_ts_ns:
            self.first_ts_ns = first_ts_ns
        self.last_ts_ns = max(self.last_ts_ns, last_ts_ns)
        self.size += size
        self.records += records


@dataclass(slots=True)
class CaptureRecord:
    """One encoded pcapng block as parts; ``payload`` is the TCP payload it carries, ``flow``
    names its connection and direction and ``ts_ns`` is when it was read (for recording its
    loss). A capture-loss block carries the loss it records in ``loss``, for ``loss_reason``."""

    parts: tuple[bytes | memoryview, ...]
    size: int
    payload: int = 0
    flow: str = ""
    ts_ns: int = 0
    loss: LossTally | None = None
    loss_reason: str = ""

    @classmethod
    def of(
        cls, parts: tuple[bytes | memoryview, ...], payload: int = 0, ts_ns: int = 0
    ) -> CaptureRecord:
        return cls(parts, sum(len(part) for part in parts), payload, ts_ns=ts_ns)


@dataclass(slots=True)
class RotationPolicy:
    max_bytes: int | None = None
    max_seconds: float | None = None


@dataclass(slots=True)
class WriterCounters:
    bytes_captured: int = 0
    bytes_dropped: int = 0
    records_written: int = 0
    records_dropped: int = 0
    file_bytes: int = 0
    files_written: int = 0
    write_errors: int = 0
    backlog_waits: int = 0  # lossless mode: times forwarding was held for the disk
    loss_records: int = 0  # capture-loss blocks written by the writer itself
    bytes_loss_recorded: int = 0  # dropped payload covered by capture-loss blocks in files
    disk_full_waits: int = 0  # lossless mode: times forwarding was held for a failing disk
    disk_full_timeouts: int = 0  # ... and the disk did not recover within disk_full_wait


LossKey = tuple[str, str]  # flow, reason


def loss_detail(flow: str, reason: str, tally: LossTally) -> str:
    return (
        f"{flow} bytes={tally.size} records={tally.records} ts_ns={tally.first_ts_ns}"
        f" last_ts_ns={tally.last_ts_ns} reason={reason}"
    )


MAX_LOSS_LINES = 20


def format_ts(ts_ns: int) -> str:
    """``2026-11-29T04:03:09.123456789Z``"""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts_ns // 1_000_000_000))
    return f"{stamp}.{ts_ns % 1_000_000_000:09d}Z"


def capture_file_name(prefix: str, ts_ns: int, seq: int) -> str:
    """``stomp-20240101T120000.123456789Z-000001.pcapng``: names sort by opening time."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(ts_ns // 1_000_000_000))
    return f"{prefix}-{stamp}.{ts_ns % 1_000_000_000:09d}Z-{seq:06d}.pcapng"


def _file_header(seq: int) -> bytes:
    return pcapng.file_header(comment=f"stomp-capture file {seq:06d}")


def ensure_writable_dir(path: Path) -> None:
    """Create ``path`` if needed and prove a file can be created in it (raises OSError)."""
    path.mkdir(parents=True, exist_ok=True)
    probe = path / f".stomp-capture-probe-{os.getpid()}{PARTIAL_SUFFIX}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, b"probe")
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


@dataclass(slots=True)
class _OpenFile:
    fd: int
    partial: Path
    final: Path
    opened_monotonic: float
    size: int
    records: int = 0


@dataclass(slots=True)
class CaptureWriter:
    out_dir: Path
    rotation: RotationPolicy = field(default_factory=RotationPolicy)
    buffer_bytes: int = 64 << 20
    prefix: str = "stomp"
    file_mode: int = 0o640
    lossless: bool = False
    flush_seconds: float = DEFAULT_FLUSH_SECONDS
    disk_full_wait: float = DEFAULT_DISK_FULL_WAIT  # lossless: most a failing disk holds traffic
    on_drained: Callable[[], None] | None = None
    counters: WriterCounters = field(default_factory=WriterCounters)
    files: list[Path] = field(default_factory=list)
    _queue: deque[CaptureRecord] = field(default_factory=deque)
    _queued_bytes: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _closing: bool = False
    _thread: threading.Thread | None = None
    _file: _OpenFile | None = None
    _file_seq: int = 0
    _failing: bool = False  # a write failed and none has succeeded since (an episode)
    _waited: bool = False  # this episode's wait for the disk is over
    _wait_expired_monotonic: float | None = None  # when the last wait ran out
    _disk_wait: bool = False  # holding forwarding while a failing disk is retried
    _holding: bool = False
    _unrecorded_loss: dict[LossKey, LossTally] = field(default_factory=dict)
    _loss_tried_monotonic: float = 0.0
    _loss_told: bool = False
    _synced_monotonic: float = 0.0
    _unsynced: bool = False
    _syncing: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
        self._thread.start()

    # --- producer side (event loop thread) ---------------------------------------------

    def has_room(self, size: int) -> bool:
        if self.lossless:
            return not self._closing
        return not self._closing and self._queued_bytes + size <= self.buffer_bytes

    def backlogged(self) -> bool:
        """Lossless mode: the queue is past the buffer size, or a failing disk is being waited
        for, so the proxy should stop reading until ``on_drained`` is called."""
        if self.lossless and (self._queued_bytes > self.buffer_bytes or self._disk_wait):
            if not self._holding:
                self._holding = True
                self.counters.backlog_waits += 1
            return True
        return False

    def offer(self, records: list[CaptureRecord], essential: bool = False) -> bool:
        """Queue all records or none; essential records (and all in lossless mode) bypass
        the size bound."""
        size = sum(record.size for record in records)
        bounded = not (essential or self.lossless)
        with self._cond:
            if self._closing or (bounded and self._queued_bytes + size > self.buffer_bytes):
                self._count_dropped(records, in_file=False)
                return False
            self._queue.extend(records)
            self._queued_bytes += size
            if self._queued_bytes >= WAKE_BYTES:
                self._cond.notify()
        return True

    def drop(self, payload: int) -> None:
        """Count payload bytes that were forwarded but never offered."""
        with self._cond:
            self.counters.bytes_dropped += payload

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued and the loss not yet recorded, finish the open file, stop the
        thread; log the loss that could not be recorded in any file."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout)
        self._log_unrecorded_loss()

    def unrecorded_losses(self) -> list[tuple[str, str, LossTally]]:
        """Capture loss not (yet) written as capture-loss blocks: flow, reason, tally."""
        with self._cond:
            return [
                (flow, reason, LossTally(t.size, t.records, t.first_ts_ns, t.last_ts_ns))
                for (flow, reason), t in self._unrecorded_loss.items()
            ]

    def _log_unrecorded_loss(self) -> None:
        losses = self.unrecorded_losses()
        if not losses or self._loss_told:
            return
        self._loss_told = True
        total = LossTally()
        for _, _, tally in losses:
            total.add(tally.size, tally.records, tally.first_ts_ns, tally.last_ts_ns)
        log.error(
            "capture loss recorded in no file (%s unwritable): %d bytes in %d records read"
            " between %s and %s",
            self.out_dir, total.size, total.records,
            format_ts(total.first_ts_ns), format_ts(total.last_ts_ns),
        )
        shown = sorted(losses, key=lambda loss: -loss[2].size)[:MAX_LOSS_LINES]
        for flow, reason, tally in shown:
            log.error(
                "capture loss recorded in no file: %s reason=%s bytes=%d records=%d from %s"
                " to %s", flow, reason, tally.size, tally.records,
                format_ts(tally.first_ts_ns), format_ts(tally.last_ts_ns),
            )
        if len(losses) > len(shown):
            log.error("capture loss recorded in no file: %d more flows", len(losses) - len(shown))

    # --- writer thread -------------------------------------------------------------------

    def _count_dropped(
        self, records: list[CaptureRecord] | deque[CaptureRecord], in_file: bool = True
    ) -> None:
        """(with the lock held) ``in_file``: record the loss in the capture when writes
        succeed again (payload refused by ``offer`` is recorded by its recorder). The loss a
        capture-loss block carries is kept to be written again, whatever ``in_file``."""
        self.counters.records_dropped += len(records)
        self.counters.bytes_dropped += sum(record.payload for record in records)
        now = time.time_ns()
        for record in records:
            flow = record.flow or "flow=unknown"
            if record.loss is not None:
                tally = record.loss
                key = (flow, record.loss_reason or "unknown")
                self._tally(key, tally.size, tally.records, tally.first_ts_ns, tally.last_ts_ns)
            elif in_file and record.payload:
                ts_ns = record.ts_ns or now
                self._tally((flow, "write_failed"), record.payload, 1, ts_ns, ts_ns)

    def _tally(self, key: LossKey, size: int, records: int, first: int, last: int) -> None:
        tally = self._unrecorded_loss.get(key)
        if tally is None:
            tally = self._unrecorded_loss[key] = LossTally()
        tally.add(size, records, first, last)

    def _release_if_drained(self) -> None:
        """(with the lock held) Let the proxy read again once half the buffer is free."""
        drained = self._queued_bytes <= self.buffer_bytes // 2
        if self._holding and drained and not self._disk_wait:
            self._holding = False
            if self.on_drained is not None:
                try:
                    self.on_drained()
                except RuntimeError:  # the proxy's event loop is gone: nobody to wake
                    log.debug("capture drained after the proxy stopped")

    def _run(self) -> None:
        while True:
            with self._cond:
                self._wait_for_work()
                batch = self._take_batch()
                self._release_if_drained()
                done = self._closing and not self._queue
            try:
                if batch:
                    self._write(batch)
                elif self._loss_retry_due():
                    self._write_loss_records()
                if self._rotation_due():
                    self._finish_file()
                self._sync_if_due()
            except Exception:  # a bug here must not stop capture for good
                log.exception("capture writer failed on a batch; going on")
                with self._cond:
                    self._count_dropped(batch)
            if done:
                break
        self._write_loss_records()
        self._finish_file()

    def _wait_for_work(self) -> None:
        """Until WAKE_BYTES are queued (the producer notifies), or a WAKE_SECONDS tick finds
        records queued, or the open file is due for rotation, or the writer is closing.

        Small records are not notified: a wake-up right when a chunk is forwarded would make
        the forwarding thread wait for the GIL on the latency path; a timer tick does not
        coincide with traffic."""
        tick = min(WAKE_SECONDS, self.flush_seconds)
        while not self._closing and self._queued_bytes < WAKE_BYTES:
            timeout = self._seconds_until_rotation()
            if timeout is not None and timeout <= 0:
                return
            self._cond.wait(tick if timeout is None else min(timeout, tick))
            self._release_if_drained()
            if self._queue or self._sync_due() or self._loss_retry_due():
                return

    def _take_batch(self) -> list[CaptureRecord]:
        batch: list[CaptureRecord] = []
        parts = size = 0
        while self._queue and parts < IOV_MAX - 8 and size < MAX_BATCH_BYTES:
            record = self._queue.popleft()
            batch.append(record)
            parts += len(record.parts)
            size += record.size
        self._queued_bytes -= size
        return batch

    def _loss_retry_due(self) -> bool:
        return bool(self._unrecorded_loss) and (
            time.monotonic() - self._loss_tried_monotonic >= DISK_RETRY_SECONDS
        )

    def _sync_due(self) -> bool:
        return self._unsynced and (
            time.monotonic() - self._synced_monotonic >= self.flush_seconds
        )

    def _sync_if_due(self) -> None:
        """Start an fdatasync of the open file once ``flush_seconds`` have passed since the
        last one. It runs on a thread of its own (on a duplicate descriptor, so rotation may
        close the file meanwhile): the writer goes on writing while the disk catches up."""
        f = self._file
        if f is None or self._syncing.locked() or not self._sync_due():
            return
        self._synced_monotonic = time.monotonic()
        self._unsynced = False
        self._syncing.acquire()
        try:
            fd = os.dup(f.fd)
        except OSError as exc:
            self._syncing.release()
            self._note_failure(exc)
            return
        threading.Thread(target=self._sync, args=(fd,), name="capture-sync", daemon=True).start()

    def _sync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            self._note_failure(exc)
        finally:
            os.close(fd)
            self._syncing.release()

    def _seconds_until_rotation(self) -> float | None:
        if self._file is None or self.rotation.max_seconds is None:
            return None
        return self._file.opened_monotonic + self.rotation.max_seconds - time.monotonic()

    def _rotation_due(self) -> bool:
        remaining = self._seconds_until_rotation()
        return remaining is not None and remaining <= 0

    def _fits(self, size: int, records: int) -> bool:
        """Whether ``records`` more records of ``size`` bytes may go into the current file;
        a record larger than the limit still goes into a file of its own."""
        limit = self.rotation.max_bytes
        if limit is None:
            return True
        f = self._file
        if f is None:
            return records <= 1 or len(_file_header(0)) + size <= limit
        return f.records + records <= 1 or f.size + size <= limit

    def _write(self, batch: list[CaptureRecord]) -> None:
        chunk: list[CaptureRecord] = []
        chunk_size = 0
        for record in batch:
            if not self._fits(chunk_size + record.size, len(chunk) + 1):
                self._write_chunk(chunk)
                self._finish_file()
                chunk, chunk_size = [], 0
            chunk.append(record)
            chunk_size += record.size
        self._write_chunk(chunk)

    def _write_chunk(self, chunk: list[CaptureRecord]) -> None:
        if not chunk:
            return
        # while the disk fails, loss blocks are retried on a timer, not before every chunk
        # (encoding one per flow each time would cost the most when the proxy is busiest)
        if not self._failing or self._loss_retry_due():
            self._write_loss_records()
        try:
            self._writev_all(chunk)
        except OSError as exc:
            self._note_failure(exc)
            if not self._wait_for_disk(chunk):
                self._salvage(chunk)
                return
        self._count_written(chunk)
        if self._failing:
            self._note_success()
            self._write_loss_records()

    def _wait_for_disk(self, chunk: list[CaptureRecord]) -> bool:
        """Lossless mode, once an episode: hold forwarding (``backlogged``) and retry
        ``chunk`` until it is written (True) or ``disk_full_wait`` has passed or the writer
        is closing (False: it is to be dropped)."""
        if not self.lossless or self._waited or self.disk_full_wait <= 0:
            return False
        expired = self._wait_expired_monotonic
        if expired is not None and time.monotonic() - expired < DISK_REWAIT_SECONDS:
            return False
        self._waited = True
        with self._cond:
            self._disk_wait = True
            self.counters.disk_full_waits += 1
        log.warning(
            "capture disk failing in %s: forwarding held for up to %g s while it is retried",
            self.out_dir, self.disk_full_wait,
        )
        deadline = time.monotonic() + self.disk_full_wait
        try:
            while True:
                with self._cond:
                    if self._closing:
                        return False
                    self._cond.wait(min(DISK_RETRY_SECONDS, max(0.0, deadline - time.monotonic())))
                    if self._closing:
                        return False
                if self._rotation_due():
                    self._finish_file()
                self._write_loss_records()
                try:
                    self._writev_all(chunk)
                except OSError:
                    if time.monotonic() >= deadline:
                        break
                    continue
                return True
        finally:
            with self._cond:
                self._disk_wait = False
                self._release_if_drained()
        self._wait_expired_monotonic = time.monotonic()
        with self._cond:
            self.counters.disk_full_timeouts += 1
        log.error(
            "capture disk in %s still failing after %g s: forwarding goes on, capture data is"
            " dropped and the loss recorded", self.out_dir, self.disk_full_wait,
        )
        return False

    def _note_success(self) -> None:
        self._failing = False
        self._waited = False
        log.warning("capture writes succeed again in %s", self.out_dir)

    def _write_loss_records(self) -> None:
        """Capture-loss blocks for payload this writer dropped since it last wrote them, ahead
        of the records that follow the loss; kept for later if they cannot be written."""
        with self._cond:
            self._loss_tried_monotonic = time.monotonic()
            if not self._unrecorded_loss:
                return
            lost, self._unrecorded_loss = self._unrecorded_loss, {}
        records = []
        for (flow, reason), tally in lost.items():
            block = pcapng.capture_loss_block(loss_detail(flow, reason, tally))
            records.append(CaptureRecord((block,), len(block), flow=flow, loss=tally,
                                         loss_reason=reason))
        try:
            self._writev_all(records)
        except OSError:
            with self._cond:
                for (flow, reason), tally in lost.items():
                    self._tally((flow, reason), tally.size, tally.records, tally.first_ts_ns,
                                tally.last_ts_ns)
            return
        with self._cond:
            self.counters.loss_records += len(records)
            self.counters.bytes_loss_recorded += sum(tally.size for tally in lost.values())

    def _salvage(self, chunk: list[CaptureRecord]) -> None:
        """After a failed write keep what still fits, record by record; once one fails, only
        records without payload (handshake, FIN, RST, markers) are still tried, so every
        connection keeps its shape and lost payload shows as a sequence gap."""
        full = False
        for record in chunk:
            if full and record.payload:
                self._count_dropped_locked([record])
                continue
            try:
                self._writev_all([record])
            except OSError:
                full = True
                self._count_dropped_locked([record])
            else:
                self._count_written([record])

    def _count_written(self, chunk: list[CaptureRecord]) -> None:
        with self._cond:
            self.counters.records_written += len(chunk)
            self.counters.bytes_captured += sum(record.payload for record in chunk)
            self.counters.bytes_loss_recorded += sum(
                record.loss.size for record in chunk if record.loss is not None
            )

    def _count_dropped_locked(self, chunk: list[CaptureRecord]) -> None:
        with self._cond:
            self._count_dropped(chunk)

    def _writev_all(self, chunk: list[CaptureRecord]) -> None:
        """Append whole blocks or nothing: a failed or short write (the disk filled up) is
        cut back so the file stays a sequence of whole blocks."""
        f = self._file or self._open_file()
        expected = sum(record.size for record in chunk)
        try:
            written = os.writev(f.fd, [part for record in chunk for part in record.parts])
            if written != expected:
                raise OSError(errno.ENOSPC, f"short write ({written} of {expected} bytes)")
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(f.fd, f.size)
                os.lseek(f.fd, f.size, os.SEEK_SET)
            raise
        if start_writeback is not None:
            start_writeback(f.fd, f.size, expected)
        f.size += expected
        f.records += len(chunk)
        if not self._unsynced:
            self._unsynced = True
            self._synced_monotonic = time.monotonic()
        self.counters.file_bytes += expected

    def _note_failure(self, exc: OSError) -> None:
        with self._cond:
            self.counters.write_errors += 1
        if not self._failing:
            self._failing = True
            log.error("capture write failed in %s, dropping capture data: %s", self.out_dir, exc)

    def _open_file(self) -> _OpenFile:
        now = time.time_ns()
        self._file_seq += 1
        final = self.out_dir / capture_file_name(self.prefix, now, self._file_seq)
        partial = final.with_name(final.name + PARTIAL_SUFFIX)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        fd = os.open(partial, flags, self.file_mode)
        try:
            os.fchmod(fd, self.file_mode)
            header = _file_header(self._file_seq)
            if os.write(fd, header) != len(header):
                raise OSError(errno.ENOSPC, "short write of the file header")
        except OSError:
            os.close(fd)
            partial.unlink(missing_ok=True)
            raise
        self._file = _OpenFile(fd, partial, final, time.monotonic(), len(header))
        self.counters.file_bytes += len(header)
        return self._file

    def _finish_file(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            if self._unsynced:
                os.fdatasync(f.fd)
                self._unsynced = False
            os.close(f.fd)
            os.rename(f.partial, f.final)
        except OSError as exc:
            self._note_failure(exc)
            return
        with self._cond:
            self.counters.files_written += 1
        self.files.append(f.final)
