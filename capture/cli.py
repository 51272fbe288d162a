"""``stomp-capture``: run the capture proxy from the command line or a config file."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import resource
import signal
import socket
import ssl
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from capture.config import (
    ClientTls,
    ConfigError,
    HostPort,
    ListenerConfig,
    ProxyConfig,
    UpstreamTls,
    parse_capture_mode,
    parse_disk_full_wait,
    parse_flush_seconds,
    parse_host_port,
    parse_max_connections,
    parse_mode,
    parse_size,
    settings_from_toml,
)
from capture.proxy import CaptureProxy
from capture.recorder import ChunkFilter
from capture.recovery import recover_partial_files
from capture.stats import StatsSnapshot
from capture.tls import client_ssl_context, upstream_ssl_context
from capture.writer import CaptureWriter, RotationPolicy, ensure_writable_dir

log = logging.getLogger("stomp-capture")
T = TypeVar("T")

EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_LOSS_UNRECORDED = 3
SWITCH_INTERVAL_S = 0.001

DESCRIPTION = """\
TCP proxy between STOMP clients and a broker. Every byte is forwarded untouched; every chunk
read is also written, with the nanosecond time it was read, to pcapng capture files that look
like an ordinary capture of the client <-> broker conversation (synthetic Ethernet/IP/TCP
headers, handshake, FIN/RST), readable by Wireshark, tshark and stomp-lake.

Chunks go through a buffer to a writer thread. When the disk cannot keep up, the default
--capture-mode lossless stops reading from the sockets until the buffer has drained (traffic
slows to the disk's pace, nothing is lost); --capture-mode drop never slows traffic and drops
the chunk from the capture instead (never from the traffic): its bytes are skipped in the TCP
sequence numbers, a capture-loss block in the file says which connection and direction lost
how many bytes, and the loss is counted.

When capture writes fail (a full disk), lossless mode holds traffic for up to
--disk-full-wait seconds while it retries; if the disk has not recovered by then, forwarding
goes on and capture data is dropped (drop mode drops at once). Bytes lost at the disk are
recorded in capture-loss blocks as soon as the disk takes writes again, or at exit; what
cannot be written even then is logged with its bytes and time range, and the exit code is 3.

Each connection holds two descriptors (client and broker). At start the proxy raises its soft
open files limit to the hard one and logs how many connections that leaves room for;
--max-connections sets a lower ceiling. With that many open, new clients wait in the listen
backlog until some close (counted as accept_limit_waits), rather than being reset.

Files being written end in .pcapng.partial. On start, .partial files left in the output
directory by a proxy that was killed are cut back to their last whole block and renamed (each
one logged). Written data is synced to disk every --flush-seconds.
"""

EPILOG = """\
examples:
  stomp-capture --listen 0.0.0.0:61613 --upstream broker:61613 --out /var/lib/stomp-capture
  stomp-capture --listen '[::]:61614' --upstream broker:61614 --upstream-tls \\
      --tls-cert proxy.pem --tls-key proxy.key --out caps --rotate-size 256M
  stomp-capture --config proxy.toml      (several listeners; see capture/config.py)

SIGTERM or SIGINT stops accepting, marks connections still open in the capture, closes the
capture files and exits (after --drain seconds of waiting for connections to finish; a
second signal ends the wait). Exit codes: 0 done, 1 runtime failure, 2 bad configuration,
3 done but capture loss could not be recorded in any capture file (told in the log and in the
summary line's bytes_loss_unrecorded).
"""


def _option(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An option's parser whose ConfigError argparse shows as it is."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return convert


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stomp-capture",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--config", type=Path, metavar="FILE",
        help="TOML file with settings and [[listener]] tables; command-line options override")
    add("--listen", action="append", default=[], metavar="HOST:PORT",
        help="address to accept clients on ([::1]:PORT for IPv6; port 0 picks a free one);"
        " repeat with --upstream for several listeners")
    add("--upstream", action="append", default=[], metavar="HOST:PORT",
        help="broker the matching --listen forwards to")
    add("--out", type=Path, metavar="DIR",
        help="directory for capture files (created if missing)")
    add("--no-capture", action="store_true",
        help="forward only, write no capture files")
    add("--rotate-size", type=_option(parse_size), metavar="SIZE",
        help="start a new file when this size would be passed (e.g. 512M, 2G)")
    add("--rotate-seconds", type=float, metavar="SECONDS",
        help="start a new file when the open one is this old")
    add("--buffer", type=_option(parse_size), metavar="SIZE",
        help="capture buffer between forwarding and the disk; when full, reading waits"
        " (lossless) or capture data is dropped and counted (drop) (default 64M)")
    add("--capture-mode", type=_option(parse_capture_mode), dest="lossless", metavar="MODE",
        help="when the disk is behind: lossless slows traffic until the buffer drains"
        " (default), drop loses capture data, records the loss in the file and counts it")
    add("--flush-seconds", type=_option(parse_flush_seconds), metavar="SECONDS",
        help="capture data reaches the file and is synced at most this long after it is"
        " read (default 1); what a crash of the machine can lose")
    add("--disk-full-wait", type=_option(parse_disk_full_wait), metavar="SECONDS",
        help="lossless mode: when capture writes fail (disk full), hold traffic this long"
        " while retrying, then forward on and drop capture data, recording the loss"
        " (default 5; 0 drops at once)")
    add("--file-mode", type=_option(parse_mode), metavar="OCTAL",
        help="permissions of capture files, owner and group only (default 0640)")
    add("--prefix", metavar="NAME", help="capture file name prefix (default stomp)")
    add("--mask-passcode", action="store_true", default=None,
        help="replace the passcode header value of CONNECT/STOMP frames in capture files with"
        " same-length filler (traffic is not changed)")
    add("--tls-cert", type=Path, metavar="FILE",
        help="terminate TLS from clients (stomp+ssl) with this certificate chain (PEM)")
    add("--tls-key", type=Path, metavar="FILE", help="private key for --tls-cert")
    add("--upstream-tls", action="store_true", help="speak TLS to the broker")
    add("--upstream-ca", type=Path, metavar="FILE",
        help="CA bundle to verify the broker's certificate (default: system store)")
    add("--upstream-insecure", action="store_true",
        help="do not verify the broker's certificate (verification is on by default)")
    add("--upstream-server-name", metavar="NAME",
        help="name expected in the broker's certificate (default: the upstream host)")
    add("--upstream-cert", type=Path, metavar="FILE",
        help="client certificate to present to the broker")
    add("--upstream-key", type=Path, metavar="FILE", help="private key for --upstream-cert")
    add("--stats-interval", type=float, metavar="SECONDS",
        help="seconds between stats lines on stderr, 0 for none (default 60)")
    add("--drain", type=float, metavar="SECONDS",
        help="on SIGTERM/SIGINT wait up to this long for open connections to end (default 0)")
    add("--max-connections", type=_option(parse_max_connections), metavar="N",
        help="most client connections open at once; more wait in the listen backlog"
        " (default: as many as the open files limit allows, two descriptors each)")
    add("--connect-timeout", type=float, metavar="SECONDS",
        help="give up connecting to the broker after this long (default 10)")
    add("--no-upstream-check", action="store_true",
        help="start even if an upstream broker does not accept connections yet")
    add("--no-uvloop", action="store_true", help="use the standard asyncio event loop")
    add("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)")
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", dest="log_level", action="store_const",
                          const="WARNING", help="log warnings and errors only")
    loudness.add_argument("-v", "--verbose", dest="log_level", action="store_const",
                          const="DEBUG", help="log everything (--log-level DEBUG)")
    add("--version", action="version", version=f"stomp-capture {_version()}")
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("stomp-lake")
    except metadata.PackageNotFoundError:
        return "unknown"


def _cli_listeners(args: argparse.Namespace) -> tuple[ListenerConfig, ...]:
    if len(args.listen) != len(args.upstream):
        raise ConfigError("give one --upstream for every --listen")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    client_tls = ClientTls(args.tls_cert, args.tls_key) if args.tls_cert else None
    upstream_tls = None
    if args.upstream_tls or args.upstream_ca or args.upstream_insecure:
        upstream_tls = UpstreamTls(
            ca=args.upstream_ca,
            verify=not args.upstream_insecure,
            server_name=args.upstream_server_name,
            cert=args.upstream_cert,
            key=args.upstream_key,
        )
    return tuple(
        ListenerConfig(
            parse_host_port(listen, allow_zero=True),
            parse_host_port(upstream),
            client_tls,
            upstream_tls,
        )
        for listen, upstream in zip(args.listen, args.upstream, strict=True)
    )


def config_from_args(args: argparse.Namespace) -> ProxyConfig:
    settings: dict[str, Any] = settings_from_toml(args.config) if args.config else {}
    listeners = settings.pop("listeners", ()) + _cli_listeners(args)
    if not listeners:
        raise ConfigError("nothing to do: give --listen and --upstream, or --config")
    overrides = {
        "out_dir": args.out,
        "rotate_bytes": args.rotate_size,
        "rotate_seconds": args.rotate_seconds,
        "buffer_bytes": args.buffer,
        "file_mode": args.file_mode,
        "prefix": args.prefix,
        "mask_passcode": args.mask_passcode,
        "stats_interval": args.stats_interval,
        "drain_seconds": args.drain,
        "connect_timeout": args.connect_timeout,
        "lossless": args.lossless,
        "flush_seconds": args.flush_seconds,
        "disk_full_wait": args.disk_full_wait,
        "max_connections": args.max_connections,
    }
    settings.update({key: value for key, value in overrides.items() if value is not None})
    if args.no_upstream_check:
        settings["check_upstream"] = False
    config = ProxyConfig(listeners=listeners, **{"out_dir": None, **settings})
    if args.no_capture:
        config = replace(config, out_dir=None)
    elif config.out_dir is None:
        raise ConfigError("give --out DIR for the capture files (or --no-capture)")
    return config


def check_tls(config: ProxyConfig) -> None:
    for listener in config.listeners:
        try:
            client_ssl_context(listener)
            upstream_ssl_context(listener)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"TLS setup for {listener.listen} failed: {exc}") from exc


def check_upstreams(config: ProxyConfig) -> None:
    for listener in config.listeners:
        target: HostPort = listener.upstream
        try:
            with socket.create_connection((target.host, target.port), config.connect_timeout):
                pass
        except OSError as exc:
            raise ConfigError(
                f"upstream {target} is unreachable: {exc.strerror or exc}"
                " (use --no-upstream-check to start anyway)"
            ) from exc


def raise_open_file_limit() -> int:
    """Lift the soft limit on open files to the hard one and return the soft limit before:
    each client costs two descriptors, so the usual 1024 would stop the proxy near 500."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError) as exc:  # e.g. an unlimited hard limit above fs.nr_open
            log.warning("cannot raise the open files limit from %d: %s", soft, exc)
    return soft


def passcode_masker_factory() -> Callable[[], ChunkFilter]:
    from capture.masking import PasscodeMasker

    return PasscodeMasker


async def run(config: ProxyConfig) -> int:
    # the writer thread needs the GIL only briefly between writes, but with the default 5 ms
    # switch interval it can wait that long for it after each write while forwarding keeps
    # the loop thread busy; 1 ms let it write ~40% more under bulk traffic in measurements
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    soft_before = raise_open_file_limit()
    loop = asyncio.get_running_loop()
    writer: CaptureWriter | None = None
    if config.out_dir is not None:
        recover_partial_files(config.out_dir)
        writer = CaptureWriter(
            config.out_dir,
            RotationPolicy(config.rotate_bytes, config.rotate_seconds),
            buffer_bytes=config.buffer_bytes,
            prefix=config.prefix,
            file_mode=config.file_mode,
            lossless=config.lossless,
            flush_seconds=config.flush_seconds,
            disk_full_wait=config.disk_full_wait,
        )
        writer.start()
    masker = passcode_masker_factory() if config.mask_passcode else None
    proxy = CaptureProxy(config, writer, masker)
    stop, hurry = asyncio.Event(), asyncio.Event()

    def on_signal() -> None:
        (hurry if stop.is_set() else stop).set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    try:
        bound = await proxy.start()
    except OSError as exc:
        log.error("cannot listen: %s", exc)
        if writer is not None:
            writer.close()
        return EXIT_USAGE
    for listener in bound:
        for host, port in listener.addresses:
            shown = HostPort(host, port)
            log.info("listening on %s -> upstream %s", shown, listener.config.upstream)
    log.info("capture to %s", config.out_dir or "(nowhere: --no-capture)")
    raised = (
        f" (raised from {soft_before})" if proxy.open_files_limit != soft_before else ""
    )
    log.info(
        "open files limit %d%s: up to %d connections at once",
        proxy.open_files_limit, raised, proxy.capacity,
    )
    if writer is not None:
        log.info(
            "capture mode %s, buffer %d bytes, flushed every %g s%s",
            "lossless" if config.lossless else "drop", config.buffer_bytes, config.flush_seconds,
            f", a failing disk holds traffic up to {config.disk_full_wait:g} s"
            if config.lossless else "",
        )

    def snapshot() -> StatsSnapshot:
        return StatsSnapshot.take(
            proxy.counters, writer.counters if writer else None, proxy.accept_counters
        )

    stats_task = asyncio.ensure_future(_stats_loop(config.stats_interval, snapshot))
    await stop.wait()
    log.info("stopping: no new connections; %d open", proxy.counters.connections_open)
    stats_task.cancel()
    await proxy.stop(config.drain_seconds, hurry)
    if writer is not None:
        await loop.run_in_executor(None, writer.close)
    summary = snapshot()
    log.info("%s", summary.line("summary"))
    if writer is not None:
        for path in writer.files:
            log.info("wrote %s", path)
    if summary.bytes_loss_unrecorded:
        log.error(
            "%d bytes of capture loss are recorded in no capture file (see above)",
            summary.bytes_loss_unrecorded,
        )
        return EXIT_LOSS_UNRECORDED
    return 0


async def _stats_loop(interval: float, snapshot: Callable[[], StatsSnapshot]) -> None:
    if interval <= 0:
        return
    while True:
        await asyncio.sleep(interval)
        log.info("%s", snapshot().line())


def _event_loop_runner(no_uvloop: bool) -> Callable[[Any], int]:
    if not no_uvloop:
        with contextlib.suppress(ImportError):
            import uvloop

            return uvloop.run
    return asyncio.run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s stomp-capture %(levelname)s %(message)s",
    )
    try:
        config = config_from_args(args)
        check_tls(config)
        if config.out_dir is not None:
            try:
                ensure_writable_dir(config.out_dir)
            except OSError as exc:
                raise ConfigError(
                    f"output directory {config.out_dir} is not writable: {exc.strerror or exc}"
                ) from exc
        if config.check_upstream:
            check_upstreams(config)
    except ConfigError as exc:
        parser.exit(EXIT_USAGE, f"stomp-capture: error: {exc}\n")
    try:
        return _event_loop_runner(args.no_uvloop)(run(config))
    except Exception:
        log.exception("stomp-capture failed")
        return EXIT_FAILURE


def run_cli() -> NoReturn:
    """The `stomp-capture` program (and ``python -m capture``): ``main()`` through
    `pipeline.process.run_main`, so that output to a reader that left ends quietly."""
    from pipeline.process import run_main

    run_main(main)


if __name__ == "__main__":
    run_cli()
