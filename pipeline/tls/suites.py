"""The cipher suites the record layer decrypts: TLS 1.3's three, and TLS 1.2's AEAD and AES-CBC
suites with HMAC, by their IANA numbers."""

from __future__ import annotations

from dataclasses import dataclass

GCM = "gcm"
CHACHA = "chacha20-poly1305"
CBC = "cbc"


@dataclass(frozen=True, slots=True)
class CipherSuite:
    code: int
    name: str
    tls13: bool
    cipher: str  # GCM, CHACHA or CBC
    key_length: int
    iv_length: int  # fixed IV of the key block (TLS 1.2 GCM: 4; CHACHA and TLS 1.3: 12)
    hash_name: str  # the PRF's or the HKDF's hash
    mac_name: str | None = None  # CBC's HMAC
    mac_length: int = 0


def _suites() -> dict[int, CipherSuite]:
    table = [
        CipherSuite(0x1301, "TLS_AES_128_GCM_SHA256", True, GCM, 16, 12, "sha256"),
        CipherSuite(0x1302, "TLS_AES_256_GCM_SHA384", True, GCM, 32, 12, "sha384"),
        CipherSuite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", True, CHACHA, 32, 12, "sha256"),
    ]
    for code, name, key, hash_name in (
        (0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 16, "sha256"),
        (0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 32, "sha384"),
        (0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 16, "sha256"),
        (0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", 32, "sha384"),
        (0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", 16, "sha256"),
        (0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", 32, "sha384"),
        (0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", 16, "sha256"),
        (0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", 32, "sha384"),
    ):
        table.append(CipherSuite(code, name, False, GCM, key, 4, hash_name))
    for code, name in (
        (0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
        (0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
        (0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
    ):
        table.append(CipherSuite(code, name, False, CHACHA, 32, 12, "sha256"))
    for code, name, key, mac in (
        (0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 16, "sha1"),
        (0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 32, "sha1"),
        (0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 16, "sha1"),
        (0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", 32, "sha1"),
        (0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 16, "sha256"),
        (0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", 32, "sha384"),
        (0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 16, "sha256"),
        (0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", 32, "sha384"),
        (0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", 16, "sha1"),
        (0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", 32, "sha1"),
        (0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", 16, "sha256"),
        (0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", 32, "sha256"),
        (0x0033, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", 16, "sha1"),
        (0x0039, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", 32, "sha1"),
        (0x0067, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", 16, "sha256"),
        (0x006B, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", 32, "sha256"),
    ):
        prf = "sha384" if mac == "sha384" else "sha256"
        length = {"sha1": 20, "sha256": 32, "sha384": 48}[mac]
        table.append(CipherSuite(code, name, False, CBC, key, 16, prf, mac, length))
    return {suite.code: suite for suite in table}


SUITES: dict[int, CipherSuite] = _suites()


def suite_name(code: int) -> str:
    """The IANA name of a suite this layer knows, else its number."""
    known = SUITES.get(code)
    return known.name if known is not None else f"0x{code:04X}"
