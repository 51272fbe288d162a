"""TLS towards clients and towards the broker: traffic encrypted, capture in plaintext."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from capture.config import ClientTls, HostPort, ListenerConfig, UpstreamTls
from capture.tls import client_ssl_context, upstream_ssl_context
from tests.capture.harness import (
    proxied,
    read_all,
    reassemble_captures,
    serving,
)


def _server_ssl(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def test_tls_both_sides_is_captured_in_plaintext(
    run: Callable, tmp_path: Path, tls_files: Any
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\0")
        writer.write(b"MESSAGE\n\n" + request)
        await writer.drain()
        writer.close()

    client_ctx = ssl.create_default_context(cafile=str(tls_files.ca))

    async def main() -> tuple[bytes, list[Path]]:
        server_ssl = _server_ssl(tls_files.cert, tls_files.key)
        async with serving(handler, ssl=server_ssl) as upstream, proxied(
            tmp_path,
            upstream,
            client_tls=ClientTls(tls_files.cert, tls_files.key),
            upstream_tls=UpstreamTls(ca=tls_files.ca, server_name="localhost"),
        ) as p:
            reader, writer = await asyncio.open_connection(
                p.host, p.port, ssl=client_ctx, server_hostname="localhost"
            )
            writer.write(b"SEND\npasscode:in the clear\n\nsecret body\0")
            answer = await read_all(reader)
            writer.close()
            await asyncio.sleep(0.1)
            return answer, await p.stop()

    answer, files = run(main())
    assert answer == b"MESSAGE\n\nSEND\npasscode:in the clear\n\nsecret body\0"
    [conn] = reassemble_captures(files)
    assert bytes(conn.sent) == b"SEND\npasscode:in the clear\n\nsecret body\0"
    assert bytes(conn.received) == answer


def test_an_untrusted_broker_certificate_is_refused(
    run: Callable, tmp_path: Path, tls_files: Any
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async def main() -> tuple[bytes | str, int]:
        server_ssl = _server_ssl(tls_files.cert, tls_files.key)
        async with serving(handler, ssl=server_ssl) as upstream, proxied(
            tmp_path, upstream, upstream_tls=UpstreamTls(ca=tls_files.other_ca)
        ) as p:
            reader, writer = await asyncio.open_connection(p.host, p.port)
            writer.write(b"CONNECT\n\n\0")
            try:
                result: bytes | str = await reader.read()
            except ConnectionResetError:
                result = "reset"
            writer.close()
            return result, p.proxy.counters.upstream_failures

    assert run(main()) == ("reset", 1)


def test_broker_certificates_are_verified_unless_turned_off(tls_files: Any) -> None:
    listen, upstream = HostPort("127.0.0.1", 0), HostPort("broker", 1)
    assert upstream_ssl_context(ListenerConfig(listen, upstream)) is None
    strict = upstream_ssl_context(ListenerConfig(listen, upstream, upstream_tls=UpstreamTls()))
    assert strict is not None
    assert strict.verify_mode == ssl.CERT_REQUIRED and strict.check_hostname
    lax = upstream_ssl_context(
        ListenerConfig(listen, upstream, upstream_tls=UpstreamTls(verify=False))
    )
    assert lax is not None and lax.verify_mode == ssl.CERT_NONE
    server = client_ssl_context(
        ListenerConfig(listen, upstream, client_tls=ClientTls(tls_files.cert, tls_files.key))
    )
    assert server is not None and server.protocol == ssl.PROTOCOL_TLS_SERVER
