"""pipeline/tls/suites.py: the suites the record layer decrypts, by their IANA numbers, checked
against the IANA names and against OpenSSL's own table of the same suites."""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping

import pytest

from pipeline.tls.suites import CBC, CHACHA, GCM, SUITES, CipherSuite, suite_name


def test_every_suite_is_filed_under_its_own_code() -> None:
    assert len(SUITES) == 30  # TLS 1.3: 3; TLS 1.2: 8 GCM, 3 ChaCha20, 16 CBC
    assert all(code == suite.code for code, suite in SUITES.items())
    assert len({suite.name for suite in SUITES.values()}) == len(SUITES)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0x1301, ("TLS_AES_128_GCM_SHA256", True, GCM, 16, 12, "sha256", None, 0)),
        (0x1302, ("TLS_AES_256_GCM_SHA384", True, GCM, 32, 12, "sha384", None, 0)),
        (0x1303, ("TLS_CHACHA20_POLY1305_SHA256", True, CHACHA, 32, 12, "sha256", None, 0)),
        (0xC02F, ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", False, GCM, 16, 4, "sha256", None, 0)),
        (0xC030, ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", False, GCM, 32, 4, "sha384", None, 0)),
        (0x009D, ("TLS_RSA_WITH_AES_256_GCM_SHA384", False, GCM, 32, 4, "sha384", None, 0)),
        (
            0xCCA8,
            (
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                False,
                CHACHA,
                32,
                12,
                "sha256",
                None,
                0,
            ),
        ),
        # TLS 1.2 runs its PRF on SHA-256 for suites whose MAC is SHA-1 (RFC 5246 5)
        (0xC013, ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", False, CBC, 16, 16, "sha256", "sha1", 20)),
        (0x0035, ("TLS_RSA_WITH_AES_256_CBC_SHA", False, CBC, 32, 16, "sha256", "sha1", 20)),
        (0x003D, ("TLS_RSA_WITH_AES_256_CBC_SHA256", False, CBC, 32, 16, "sha256", "sha256", 32)),
        (
            0xC028,
            ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", False, CBC, 32, 16, "sha384", "sha384", 48),
        ),
    ],
)
def test_a_known_suite_has_the_parameters_of_its_rfc(
    code: int, expected: tuple[object, ...]
) -> None:
    suite = SUITES[code]
    name, tls13, cipher, key, iv, hash_name, mac, mac_length = expected
    assert (suite.name, suite.tls13, suite.cipher) == (name, tls13, cipher)
    assert (suite.key_length, suite.iv_length, suite.hash_name) == (key, iv, hash_name)
    assert (suite.mac_name, suite.mac_length) == (mac, mac_length)


@pytest.mark.parametrize("suite", list(SUITES.values()), ids=lambda suite: suite.name)
def test_the_parameters_follow_from_the_iana_name(suite: CipherSuite) -> None:
    """An IANA name spells out the version, the cipher, the key size and the hash: a row of the
    table that disagrees with its own name is a typo."""
    name = suite.name
    assert suite.tls13 == ("_WITH_" not in name) == (suite.code >> 8 == 0x13)
    assert suite.key_length == (16 if "AES_128" in name else 32)
    if "_GCM_" in name:
        assert suite.cipher == GCM and suite.iv_length == (12 if suite.tls13 else 4)
    elif "CHACHA20_POLY1305" in name:
        assert suite.cipher == CHACHA and suite.iv_length == 12
    else:
        assert suite.cipher == CBC and "_CBC_" in name and suite.iv_length == 16
    assert suite.hash_name == ("sha384" if name.endswith("_SHA384") else "sha256")
    if suite.cipher == CBC:
        mac = {"SHA": ("sha1", 20), "SHA256": ("sha256", 32), "SHA384": ("sha384", 48)}
        assert (suite.mac_name, suite.mac_length) == mac[name.rpartition("_")[2]]
    else:
        assert (suite.mac_name, suite.mac_length) == (None, 0)


def openssl_suites() -> dict[int, Mapping[str, object]]:
    """OpenSSL's description of every suite it knows, by IANA number (its ids are 0x0300xxxx)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.set_ciphers("ALL:@SECLEVEL=0")
    return {entry["id"] & 0xFFFF: entry for entry in context.get_ciphers()}


def test_openssl_describes_each_suite_alike() -> None:
    """OpenSSL's table is independent of this one: the same number must mean the same cipher,
    key size, MAC, key exchange and version there."""
    theirs = openssl_suites()
    compared = 0
    for code, suite in SUITES.items():
        entry = theirs.get(code)
        if entry is None:  # a build of OpenSSL without it: nothing to compare
            continue
        compared += 1
        kind = {GCM: "gcm", CHACHA: "poly1305", CBC: "cbc"}[suite.cipher]
        assert str(entry["symmetric"]).endswith(kind), suite.name
        assert entry["alg_bits"] == 8 * suite.key_length, suite.name
        assert entry["aead"] == (suite.cipher != CBC), suite.name
        assert entry["digest"] == suite.mac_name, suite.name
        assert (entry["protocol"] == "TLSv1.3") == suite.tls13, suite.name
        if not suite.tls13:
            exchange = suite.name.removeprefix("TLS_").partition("_WITH_")[0]
            kea, _, auth = exchange.partition("_")
            assert entry["kea"] == f"kx-{kea.lower()}", suite.name
            assert entry["auth"] == f"auth-{(auth or kea).lower()}", suite.name
    assert compared >= 20


@pytest.mark.parametrize("code", sorted(SUITES))
def test_a_known_suite_is_named_by_iana(code: int) -> None:
    assert suite_name(code) == SUITES[code].name


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        (0x00FF, "0x00FF"),  # TLS_EMPTY_RENEGOTIATION_INFO_SCSV, offered by every OpenSSL client
        (0x1304, "0x1304"),  # TLS_AES_128_CCM_SHA256: TLS 1.3, but not decrypted here
        (0x0A0A, "0x0A0A"),  # a GREASE value (RFC 8701)
        (0xC0AC, "0xC0AC"),  # TLS_ECDHE_ECDSA_WITH_AES_128_CCM
        (0x0000, "0x0000"),  # TLS_NULL_WITH_NULL_NULL
        (0xFFFF, "0xFFFF"),
    ],
)
def test_an_unknown_suite_is_shown_as_its_number(code: int, shown: str) -> None:
    assert code not in SUITES
    assert suite_name(code) == shown


def test_the_shared_table_cannot_be_altered_through_a_suite() -> None:
    suite = SUITES[0x1301]
    with pytest.raises(dataclasses.FrozenInstanceError):
        suite.key_length = 32  # type: ignore[misc]
    assert SUITES[0x1301].key_length == 16
