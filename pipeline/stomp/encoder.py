"""Writing STOMP frames as exact wire bytes for a given protocol version."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.stomp.commands import VERSIONS
from pipeline.stomp.headers import escapes_apply

_EOLS = (b"\n", b"\r\n")


def escape(text: str, version: str) -> str:
    """Escape a header name or value: ``\\``, LF and ``:`` from 1.1 on, CR in 1.2."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")
    if version == "1.2":
        text = text.replace("\r", "\\r")
    return text


def encode_frame(
    command: str,
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    version: str = "1.2",
    content_length: bool = True,
    eol: bytes = b"\n",
) -> bytes:
    """The frame's wire bytes: command, headers in the given order, blank line, body, NUL.

    With ``content_length`` a ``content-length`` header is appended for a non-empty body unless
    one is given. Raises ValueError for what the version cannot carry (a programming error, not
    bad input): LF in an unescaped header, CR in a 1.1 header, NUL in a body without length.
    """
    if version not in VERSIONS:
        raise ValueError(f"unsupported STOMP version {version!r}")
    if eol not in _EOLS:
        raise ValueError(f"EOL must be LF or CRLF, not {eol!r}")
    use_escapes = escapes_apply(version, command)
    lines = [command.encode()]
    has_length = False
    for name, value in headers:
        has_length = has_length or name == "content-length"
        if use_escapes:
            name, value = escape(name, version), escape(value, version)
        _check_header(name, value, version, use_escapes)
        lines.append(f"{name}:{value}".encode())
    if content_length and body and not has_length:
        lines.append(b"content-length:%d" % len(body))
        has_length = True
    if b"\x00" in body and not has_length:
        raise ValueError("a body containing NUL needs a content-length header")
    lines.append(b"")
    return eol.join(lines) + eol + body + b"\x00"


def encode_heartbeat(eol: bytes = b"\n") -> bytes:
    if eol not in _EOLS:
        raise ValueError(f"EOL must be LF or CRLF, not {eol!r}")
    return eol


def _check_header(name: str, value: str, version: str, escaped: bool) -> None:
    if "\n" in name or "\n" in value:
        raise ValueError(f"header {name!r}: LF cannot be sent unescaped")
    if not escaped and ":" in name:
        raise ValueError(f"header {name!r}: ':' in a name cannot be sent unescaped")
    if "\r" in name or "\r" in value:
        raise ValueError(f"header {name!r}: CR can only be escaped in STOMP 1.2")
