"""Privacy rules: passcodes never leave the model, logins may be keyed-hashed, bodies are
reduced to length + sha256 unless a preview or the full body was asked for."""

from __future__ import annotations

import hashlib
import hmac
import re

from pipeline.session.options import ModelOptions

REDACTED = "***"
SECRET_HEADERS: frozenset[str] = frozenset({"passcode"})
LOGIN_HEADERS: frozenset[str] = frozenset({"login", "username"})  # username: pre-1.0 clients

_SECRET_IN_TEXT = re.compile(r"(?i)(passcode\s*[:=]\s*)[^\s,;]*")
_MIN_SECRET_LEN = 4  # shorter known secrets would blank out ordinary text


def hash_login(login: str, key: bytes) -> str:
    return hmac.new(key, login.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def protect_headers(
    header_list: list[tuple[str, str]], login_key: bytes | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """Headers with secrets masked and, given a key, logins hashed; plus the secrets found."""
    protected: list[tuple[str, str]] = []
    secrets: list[str] = []
    for name, value in header_list:
        lowered = name.lower()
        if lowered in SECRET_HEADERS:
            secrets.append(value)
            value = REDACTED
        elif login_key is not None and lowered in LOGIN_HEADERS:
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
    if "passcode" in text.lower():
        text = _SECRET_IN_TEXT.sub(r"\g<1>" + REDACTED, text)
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_LEN and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def body_fields(
    body: bytes, options: ModelOptions
) -> tuple[int, str | None, str | None, bytes | None]:
    """(body_length, body_sha256, body_preview, body) as stored under ``options.body_mode``."""
    if not body:
        return 0, None, None, None
    digest = hashlib.sha256(body).hexdigest()
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
        for secret in secrets:
            if len(secret) >= _MIN_SECRET_LEN:
                raw = raw.replace(secret.encode("utf-8", "surrogatepass"), REDACTED.encode())
    return length, digest, text, raw
