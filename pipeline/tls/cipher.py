"""One direction's record protection undone: AES-GCM and ChaCha20-Poly1305 (TLS 1.2 and 1.3),
AES-CBC with HMAC (TLS 1.2, MAC-then-encrypt or encrypt-then-MAC), by OpenSSL through the
`cryptography` package (RFC 5246 6.2.3, RFC 7905, RFC 7366, RFC 8446 5.2-5.3)."""

from __future__ import annotations

import hmac
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from pipeline.tls.records import Record
from pipeline.tls.suites import CBC, CHACHA, GCM, SUITES, CipherSuite

TAG_LENGTH = 16
EXPLICIT_NONCE = 8  # TLS 1.2 GCM
BLOCK = 16


class BadRecord(ValueError):
    """A record that does not authenticate under the keys held (wrong keys, damaged bytes)."""


class RecordCipher:
    """Decrypts one direction's records in order, counting their sequence numbers."""

    __slots__ = (
        "suite", "tls13", "_aead", "_key", "_iv", "_iv_number", "_mac_key", "_etm", "_blocks",
        "seq", "bulk",
    )  # fmt: skip

    def __init__(
        self,
        suite: CipherSuite,
        key: bytes,
        iv: bytes,
        mac_key: bytes = b"",
        *,
        encrypt_then_mac: bool = False,
    ) -> None:
        self.suite = suite
        self.tls13 = suite.tls13
        self._key = key
        self._iv = iv
        self._iv_number = int.from_bytes(iv, "big")
        self._mac_key = mac_key
        self._etm = encrypt_then_mac
        self._aead: AESGCM | ChaCha20Poly1305 | None = None
        # CBC by hand over one ECB decryptor: a Cipher object a record costs more than the record
        self._blocks = (
            Cipher(algorithms.AES(key), modes.ECB()).decryptor() if suite.cipher == CBC else None
        )
        if suite.cipher == GCM:
            self._aead = AESGCM(key)
        elif suite.cipher == CHACHA:
            self._aead = ChaCha20Poly1305(key)
        self.seq = 0
        self.bulk: object = None  # what `pipeline.tls._bulk` keyed, kept for the next run

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled as its keys and sequence number (a connection carried to the next batch);
        OpenSSL's cipher objects are made again from them."""
        return (
            _restore,
            (self.suite.code, self._key, self._iv, self._mac_key, self._etm, self.seq),
        )

    def decrypt(self, record: Record) -> tuple[int, bytes]:
        """(content type, plaintext) of the next record; `BadRecord` when it does not
        authenticate (the sequence number then stays where it was)."""
        if self.tls13:
            out = self._open13(record)
        elif self.suite.cipher == CBC:
            out = self._open_cbc(record)
        else:
            out = self._open12_aead(record)
        self.seq += 1
        return out

    def _xor_nonce(self) -> bytes:
        return (self._iv_number ^ self.seq).to_bytes(len(self._iv), "big")

    def _aead_open(self, nonce: bytes, sealed: bytes, aad: bytes) -> bytes:
        assert self._aead is not None
        try:
            return self._aead.decrypt(nonce, sealed, aad)
        except (InvalidTag, ValueError) as error:
            raise BadRecord("authentication failed") from error

    def _open13(self, record: Record) -> tuple[int, bytes]:
        if len(record.fragment) < TAG_LENGTH + 1:
            raise BadRecord("record shorter than its tag")
        plain = self._aead_open(self._xor_nonce(), record.fragment, record.header).rstrip(b"\0")
        if not plain:
            raise BadRecord("no content type inside")
        return plain[-1], plain[:-1]

    def _aad12(self, record: Record, length: int) -> bytes:
        return struct.pack("!QBHH", self.seq, record.content_type, record.version, length)

    def _open12_aead(self, record: Record) -> tuple[int, bytes]:
        fragment = record.fragment
        if self.suite.cipher == GCM:
            if len(fragment) < EXPLICIT_NONCE + TAG_LENGTH:
                raise BadRecord("record shorter than its nonce and tag")
            nonce = self._iv + fragment[:EXPLICIT_NONCE]
            sealed = fragment[EXPLICIT_NONCE:]
        else:
            if len(fragment) < TAG_LENGTH:
                raise BadRecord("record shorter than its tag")
            nonce = self._xor_nonce()
            sealed = fragment
        aad = self._aad12(record, len(sealed) - TAG_LENGTH)
        return record.content_type, self._aead_open(nonce, sealed, aad)

    def _open_cbc(self, record: Record) -> tuple[int, bytes]:
        fragment = record.fragment
        mac_length = self.suite.mac_length
        if self._etm:
            if len(fragment) < mac_length + 2 * BLOCK:
                raise BadRecord("record shorter than its IV, a block and its MAC")
            sealed, mac = fragment[:-mac_length], fragment[-mac_length:]
            expected = self._mac(self._aad12(record, len(sealed)) + sealed)
            if not hmac.compare_digest(mac, expected):
                raise BadRecord("MAC mismatch")
            return record.content_type, self._unpad(self._cbc(sealed))
        if len(fragment) < 2 * BLOCK or len(fragment) % BLOCK:
            raise BadRecord("not a whole number of blocks")
        content = self._unpad(self._cbc(fragment))
        if len(content) < mac_length:
            raise BadRecord("record shorter than its MAC")
        data, mac = content[: len(content) - mac_length], content[len(content) - mac_length :]
        if not hmac.compare_digest(mac, self._mac(self._aad12(record, len(data)) + data)):
            raise BadRecord("MAC mismatch")
        return record.content_type, data

    def _cbc(self, sealed: bytes) -> bytes:
        """CBC decryption of IV + blocks: each block's ECB decryption XOR the block before."""
        if len(sealed) < 2 * BLOCK or len(sealed) % BLOCK:
            raise BadRecord("not a whole number of blocks")
        assert self._blocks is not None
        decrypted = self._blocks.update(sealed[BLOCK:])
        chained = int.from_bytes(decrypted, "big") ^ int.from_bytes(sealed[:-BLOCK], "big")
        return chained.to_bytes(len(decrypted), "big")

    @staticmethod
    def _unpad(plain: bytes) -> bytes:
        pad = plain[-1]
        if pad + 1 > len(plain) or any(b != pad for b in plain[len(plain) - pad - 1 :]):
            raise BadRecord("bad padding")
        return plain[: len(plain) - pad - 1]

    def _mac(self, data: bytes) -> bytes:
        assert self.suite.mac_name is not None
        return hmac.digest(self._mac_key, data, self.suite.mac_name)


def _restore(
    code: int, key: bytes, iv: bytes, mac_key: bytes, encrypt_then_mac: bool, seq: int
) -> RecordCipher:
    cipher = RecordCipher(SUITES[code], key, iv, mac_key, encrypt_then_mac=encrypt_then_mac)
    cipher.seq = seq
    return cipher
