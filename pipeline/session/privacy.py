r"""Privacy rules: passcodes never leave the model, logins may be keyed-hashed, bodies are
reduced to length + sha256 unless a preview or the full body was asked for.

Which header names count as a passcode: any name a broker could read as ``passcode``, erring on
the side of masking. The STOMP texts differ (the early text strips spaces and compares names
without case; 1.1/1.2 forbid trimming but undo ``\c``-style escapes, except in CONNECT in 1.2),
and brokers differ again, so a name is a passcode when its letters, once escapes are dropped and
case folded, spell ``passcode``: ``passcode ``, `` passcode``, ``PASSCODE``, ``pass\ccode``,
``pass:code`` and ``pass code`` all do. This does not depend on which frame or connection state
the header was seen in.

Text that is stored (anomaly details, ERROR frames, the WebSocket upgrade's request target and
other fields, close reasons, a command made of a broken header line) goes through `scrub`, which
masks two shapes of spelled-out secret, the rest of the text unchanged:

* the passcode as a header would name it, ``passcode:`` / ``pass\ccode=`` / ``PASS CODE :``;
* a parameter whose name spells a credential (`SECRET_PARAMETERS`: its letters, once
  %-escapes are decoded, ``+`` read as a space, and case folded): ``password=``, ``Token:``,
  ``access_token=``, ``pass%77ord=`` in a URL query, a fragment or free text. With ``=`` the
  value ends at ``&`` or ``#`` as well (a query's next parameter stays readable); an empty value
  and a name without a value are left as they are.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import unquote_plus

from pipeline.session.digest import sha256_hex_function
from pipeline.session.options import ModelOptions

REDACTED = "***"
SECRET_HEADERS: frozenset[str] = frozenset({"passcode"})
LOGIN_HEADERS: frozenset[str] = frozenset({"login", "username"})  # username: pre-1.0 clients

# "passcode" (with the separators a name may carry, see is_secret_header) then ':' or '=':
# the value up to the next space, comma or semicolon (after '=', also '&' or '#') is masked.
_NAME_IN_TEXT = r"pass(?:\\.|[^a-z0-9\n\\])*code[ \t]*"
_SECRET_IN_TEXT = re.compile(
    rf"(?i)({_NAME_IN_TEXT}(?:\\c|:)[ \t]*)[^\s,;]+|({_NAME_IN_TEXT}=[ \t]*)[^\s,;&#]+"
)
# Parameter names (letters only) taken for a credential in a URL query or in text.
SECRET_PARAMETERS: frozenset[str] = frozenset(
    {"passcode", "password", "pass", "passwd", "token", "accesstoken"}
)
# A name (letters, digits, ``_.+-`` and %-escapes, not inside a longer name) then ':' or '=';
# which names count is decided on the decoded name (`_mask_parameters`).
_PARAMETER_NAME = re.compile(
    r"(?i)(?<![a-z0-9_.+%\\-])((?:[a-z0-9_.+\-]|%[0-9a-f]{2}){1,256})[ \t]*([:=])[ \t]*"
)
_PARAMETER_VALUE = {":": re.compile(r"[^\s,;]*"), "=": re.compile(r"[^\s,;&#]*")}
_MIN_SECRET_LEN = 4  # shorter known secrets would blank out ordinary text
_ESCAPE = re.compile(r"\\.")
_NOT_LETTER = re.compile(r"[^a-z]")


def _mask_passcode(match: re.Match[str]) -> str:
    return (match[1] or match[2]) + REDACTED


def _mask_parameters(text: str) -> str:
    """``text`` with the value of every parameter whose name spells a credential masked."""
    pieces: list[str] = []
    kept = pos = 0
    while (name := _PARAMETER_NAME.search(text, pos)) is not None:
        pos = name.end()
        if _NOT_LETTER.sub("", unquote_plus(name[1]).lower()) not in SECRET_PARAMETERS:
            continue
        end = _PARAMETER_VALUE[name[2]].match(text, pos).end()  # type: ignore[union-attr]
        if end > pos and text[pos:end] != REDACTED:
            pieces += (text[kept:pos], REDACTED)
            kept = pos = end
    return "".join(pieces) + text[kept:] if pieces else text


def _may_hold_secret(lowered: str) -> bool:
    return "code" in lowered or "pass" in lowered or "tok" in lowered or "%" in lowered


@lru_cache(maxsize=4096)  # per header of every frame; names repeat, hostile ones are evicted
def is_secret_header(name: str) -> bool:
    """Whether a broker could take a header of this name for the passcode (see module doc)."""
    lowered = name.lower()
    if lowered in SECRET_HEADERS:
        return True
    if len(lowered) < 8 or "p" not in lowered or "d" not in lowered:
        return False
    return _NOT_LETTER.sub("", _ESCAPE.sub("", lowered)) in SECRET_HEADERS


# Header names met and found not secret, up to a bound (hostile names fall back to the cache
# above): set lookups per frame instead of a call per header, 0.1 against 0.5 us a frame.
_PLAIN_NAMES: set[str] = set()
_PLAIN_NAMES_MAX = 4096


def has_secret_header(names: Iterable[str]) -> bool:
    """Whether any of ``names`` is taken for a passcode (`is_secret_header`)."""
    for name in names:  # not issuperset, which copies a dict of names into a set first
        if name not in _PLAIN_NAMES:
            break
    else:
        return False
    found = False
    for name in names:
        if is_secret_header(name):
            found = True
        elif len(_PLAIN_NAMES) < _PLAIN_NAMES_MAX:
            _PLAIN_NAMES.add(name)
    return found


def hash_login(login: str, key: bytes) -> str:
    return hmac.new(key, login.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def protect_headers(
    header_list: list[tuple[str, str]], login_key: bytes | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """Headers with secrets masked and, given a key, logins hashed; plus the secrets found."""
    protected: list[tuple[str, str]] = []
    secrets: list[str] = []
    for name, value in header_list:
        if is_secret_header(name):
            secrets.append(value)
            value = REDACTED
        elif login_key is not None and name.lower() in LOGIN_HEADERS:
            value = hash_login(value, login_key)
        protected.append((name, value))
    return protected, secrets


def first_values(header_list: list[tuple[str, str]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in header_list:
        headers.setdefault(name, value)
    return headers


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Text safe to store: ``passcode:xxx`` spelled out and any known passcode value masked."""
    lowered = text.lower()
    if "code" in lowered:
        text = _SECRET_IN_TEXT.sub(_mask_passcode, text)
    if _may_hold_secret(lowered):
        text = _mask_parameters(text)
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_LEN and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub_optional(text: str | None, secrets: tuple[str, ...] = ()) -> str | None:
    return None if text is None else scrub(text, secrets)


def scrub_bytes(raw: bytes) -> bytes:
    """`scrub` for bytes (read as Latin-1, so any byte goes through unchanged but a secret)."""
    return scrub(raw.decode("latin-1")).encode("latin-1")


def scrub_structure(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """``value`` (rows, maps, lists, text, bytes, nested) with every passcode masked: values of
    secret header names (map keys or ``[name, value]`` pairs) and passcodes spelled out in text.
    For whatever leaves the tables in another form: sample rows, reports, messages."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, bytes | bytearray):
        return scrub_bytes(bytes(value))
    if isinstance(value, dict):
        return {
            key: REDACTED
            if isinstance(key, str) and is_secret_header(key) and value[key] is not None
            else scrub_structure(value[key], secrets)
            for key in value
        }
    if isinstance(value, list | tuple):  # tuple subclasses (Spark's Row) come back as tuples
        if len(value) == 2 and isinstance(value[0], str) and is_secret_header(value[0]):
            items = [value[0], REDACTED]
        else:
            items = [scrub_structure(item, secrets) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


# chosen as the module is imported, as the pure-Python twin chooses the reference
_sha256_hex = sha256_hex_function()


def body_fields(
    body: bytes, options: ModelOptions
) -> tuple[int, str | None, str | None, bytes | None]:
    """(body_length, body_sha256, body_preview, body) as stored under ``options.body_mode``."""
    if not body:
        return 0, None, None, None
    digest = _sha256_hex(body)
    mode = options.body_mode
    if mode == "hash":
        return len(body), digest, None, None
    if mode == "preview":
        return len(body), digest, preview(body, options.preview_bytes), None
    return len(body), digest, None, bytes(body)


def preview(body: bytes, limit: int | None) -> str:
    return bytes(body[:limit] if limit is not None else body).decode("utf-8", "replace")


def scrub_body(
    body: tuple[int, str | None, str | None, bytes | None], secrets: tuple[str, ...]
) -> tuple[int, str | None, str | None, bytes | None]:
    """Stored body fields with known passcodes masked (length and sha256 stay the original's)."""
    length, digest, text, raw = body
    if text is not None:
        text = scrub(text, secrets)
    if raw is not None:
        raw = scrub_bytes(raw)
        for secret in secrets:
            if len(secret) >= _MIN_SECRET_LEN:
                raw = raw.replace(secret.encode("utf-8", "surrogatepass"), REDACTED.encode())
    return length, digest, text, raw
