"""Key derivation: TLS 1.2's PRF and key block (RFC 5246 5, 6.3), TLS 1.3's HKDF-Expand-Label
and traffic keys (RFC 8446 7.1-7.3)."""

from __future__ import annotations

import hashlib
import hmac
import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from pipeline.tls.suites import CipherSuite

_HASHES = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}


def prf12(secret: bytes, label: bytes, seed: bytes, length: int, hash_name: str) -> bytes:
    """TLS 1.2's PRF: P_hash(secret, label + seed) cut to `length` bytes."""
    seed = label + seed
    out = bytearray()
    a = seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_name).digest()
        out += hmac.new(secret, a + seed, hash_name).digest()
    return bytes(out[:length])


def key_block12(
    suite: CipherSuite, master_secret: bytes, client_random: bytes, server_random: bytes
) -> tuple[tuple[bytes, bytes, bytes], tuple[bytes, bytes, bytes]]:
    """((mac key, key, iv) of the client, (the same) of the server) from the master secret."""
    mac, key, iv = suite.mac_length, suite.key_length, suite.iv_length
    block = prf12(
        master_secret,
        b"key expansion",
        server_random + client_random,
        2 * (mac + key + iv),
        suite.hash_name,
    )
    parts = []
    offset = 0
    for size in (mac, mac, key, key, iv, iv):
        parts.append(block[offset : offset + size])
        offset += size
    return (parts[0], parts[2], parts[4]), (parts[1], parts[3], parts[5])


def hkdf_expand_label(
    secret: bytes, label: bytes, context: bytes, length: int, hash_name: str
) -> bytes:
    full = b"tls13 " + label
    info = struct.pack("!HB", length, len(full)) + full + struct.pack("!B", len(context)) + context
    return HKDFExpand(_HASHES[hash_name](), length, info).derive(secret)


def traffic_keys13(suite: CipherSuite, secret: bytes) -> tuple[bytes, bytes]:
    """(key, iv) of a TLS 1.3 traffic secret."""
    key = hkdf_expand_label(secret, b"key", b"", suite.key_length, suite.hash_name)
    iv = hkdf_expand_label(secret, b"iv", b"", suite.iv_length, suite.hash_name)
    return key, iv


def next_secret13(suite: CipherSuite, secret: bytes) -> bytes:
    """The traffic secret after a KeyUpdate."""
    size = hashlib.new(suite.hash_name).digest_size
    return hkdf_expand_label(secret, b"traffic upd", b"", size, suite.hash_name)
