"""pipeline/tls/cipher.py: records opened with the keys given. RFC 8448's protected records under
its own keys; records of every suite protected here per their RFCs (RFC 8446 5.2-5.4, RFC 5246
6.2.3, RFC 5288, RFC 7905, RFC 7366) with `cryptography`'s primitives; and damaged, replayed,
short and random records, which give `BadRecord` and leave the sequence number where it was."""

from __future__ import annotations

import hashlib
import hmac
import pickle
import random
import struct

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from pipeline.tls.cipher import BadRecord, RecordCipher
from pipeline.tls.records import Record, RecordReader
from pipeline.tls.suites import CBC, CHACHA, GCM, SUITES, CipherSuite

# ---- RFC 8448 3 (Simple 1-RTT Handshake, TLS_AES_128_GCM_SHA256) ---------------------------

AES_128_GCM_SHA256 = SUITES[0x1301]
# the write keys and IVs the RFC derives, by whose records they protect
SERVER_HANDSHAKE_KEYS = ("3fce516009c21727d0f2e4e86ee403bc", "5d313eb2671276ee13000b30")
CLIENT_HANDSHAKE_KEYS = ("dbfaa693d1762c5b666af5d950258d01", "5bd3c71b836e0b76bb73265f")
SERVER_APPLICATION_KEYS = ("9f02283b6c9c07efc26bb9f2ac92e356", "cf782b88dd83549aadf1e984")
CLIENT_APPLICATION_KEYS = ("17422dda596ed5d9acd890e3c63f5051", "5b78923dee08579033e523d9")

# "{server} send handshake record": EncryptedExtensions, Certificate, CertificateVerify and
# Finished in one record (679 octets)
SERVER_FLIGHT = bytes.fromhex(
    "17030302a2d1ff334a56f5bff6594a07cc87b580233f500f45e489e7f33af35edf7869fcf40aa40aa2b8ea73"
    "f848a7ca07612ef9f945cb960b4068905123ea78b111b429ba9191cd05d2a389280f526134aadc7fc78c4b72"
    "9df828b5ecf7b13bd9aefb0e57f271585b8ea9bb355c7c79020716cfb9b1183ef3ab20e37d57a6b9d7477609"
    "aee6e122a4cf51427325250c7d0e509289444c9b3a648f1d71035d2ed65b0e3cdd0cbae8bf2d0b227812cbb3"
    "60987255cc744110c453baa4fcd610928d809810e4b7ed1a8fd991f06aa6248204797e36a6a73b70a2559c09"
    "ead686945ba246ab66e5edd8044b4c6de3fcf2a89441ac66272fd8fb330ef8190579b3684596c960bd596eea"
    "520a56a8d650f563aad27409960dca63d3e688611ea5e22f4415cf9538d51a200c27034272968a264ed6540c"
    "84838d89f72c24461aad6d26f59ecaba9acbbb317b66d902f4f292a36ac1b639c637ce343117b65962224531"
    "7b49eeda0c6258f100d7d961ffb138647e92ea330faeea6dfa31c7a84dc3bd7e1b7a6c7178af36879018e3f2"
    "52107f243d243dc7339d5684c8b0378bf30244da8c87c843f5e56eb4c5e8280a2b48052cf93b16499a66db7c"
    "ca71e4599426f7d461e66f99882bd89fc50800becca62d6c74116dbd2972fda1fa80f85df881edbe5a376689"
    "36b335583b599186dc5c6918a396fa48a181d6b6fa4f9d62d513afbb992f2b992f67f8afe67f76913fa388cb"
    "5630c8ca01e0c65d11c66a1e2ac4c85977b7c7a6999bbf10dc35ae69f5515614636c0b9b68c19ed2e31c0b3b"
    "66763038ebba42f3b38edc0399f3a9f23faa63978c317fc9fa66a73f60f0504de93b5b845e275592c12335ee"
    "340bbc4fddd502784016e4b3be7ef04dda49f4b440a30cb5d2af939828fd4ae3794e44f94df5a631ede42c17"
    "19bfdabf0253fe5175be898e750edc53370d2b"
)
# "{client} send handshake record": the client's Finished (58 octets)
CLIENT_FINISHED = bytes.fromhex(
    "170303003575ec4dc238cce60b298044a71e219c56cc77b0517fe9b93c7a4bfc44d87f38f80338ac98fc46de"
    "b384bd1caeacab6867d726c40546"
)
# "{server} send handshake record": a NewSessionTicket (227 octets)
SERVER_TICKET = bytes.fromhex(
    "17030300de3a6b8f90414a97d6959c3487680de5134a2b240e6cffac116e95d41d6af8f6b580dcf3d11d63c7"
    "58db289a015940252f55713e061dc13e078891a38efbcf5753ad8ef170ad3c7353d16d9da773b9ca7f2b9fa1"
    "b6c0d4a3d03f75e09c30ba1e62972ac46f75f7b981be63439b2999ce13064615139891d5e4c5b406f16e3fc1"
    "81a77ca475840025db2f0a77f81b5ab05b94c01346755f69232c86519d86cbeeac87aac347d143f9605d64f6"
    "50db4d023e70e952ca49fe5137121c74bc2697687e248746d6df353005f3bce18696129c8153556b3b6c6779"
    "b37bf15985684f"
)
# "{client}/{server} send application_data record": 50 octets, 00 01 02 .. 31 (72 octets)
CLIENT_DATA = bytes.fromhex(
    "1703030043a23f7054b62c94d0affafe8228ba55cbefacea42f914aa66bcab3f2b9819a8a5b46b395bd54a9a"
    "20441e2b62974e1f5a6292a2977014bd1e3deae63aeebb21694915e4"
)
SERVER_DATA = bytes.fromhex(
    "17030300432e937e11ef4ac740e538ad36005fc4a46932fc3225d05f82aa1b36e30efaf97d90e6dffc602dcb"
    "501a59a8fcc49c4bf2e5f0a21c0047c2abf332540dd032e167c2955d"
)
# "{client}/{server} send alert record": close_notify (24 octets)
CLIENT_CLOSE = bytes.fromhex("1703030013c9872760655666b74d7ff1153efd6db6d0b0e3")
SERVER_CLOSE = bytes.fromhex("1703030013b58fd67166ebf599d24720cfbe7efa7a8864a9")

ENCRYPTED_EXTENSIONS = bytes.fromhex(
    "080000240022000a00140012001d00170018001901000101010201030104001c0002400100000000"
)
CLIENT_VERIFY_DATA = bytes.fromhex(
    "a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61"
)
PAYLOAD = bytes(range(50))
CLOSE_NOTIFY = (21, b"\x01\x00")  # alert level warning, description close_notify


def rfc8448_cipher(keys: tuple[str, str]) -> RecordCipher:
    key, iv = keys
    return RecordCipher(AES_128_GCM_SHA256, bytes.fromhex(key), bytes.fromhex(iv))


def read(wire: bytes) -> Record:
    [record] = RecordReader().feed(wire)
    return record


def test_the_rfc_8448_server_flight_opens_to_its_handshake_messages() -> None:
    cipher = rfc8448_cipher(SERVER_HANDSHAKE_KEYS)
    kind, plain = cipher.decrypt(read(SERVER_FLIGHT))
    assert kind == 22 and len(plain) == 657  # the RFC's payload, without type and padding
    assert plain.startswith(ENCRYPTED_EXTENSIONS)
    assert plain[-36:-32] == b"\x14\x00\x00\x20"  # Finished, 32 bytes of verify_data
    assert cipher.seq == 1


def test_the_rfc_8448_client_finished_opens() -> None:
    cipher = rfc8448_cipher(CLIENT_HANDSHAKE_KEYS)
    assert cipher.decrypt(read(CLIENT_FINISHED)) == (22, b"\x14\x00\x00\x20" + CLIENT_VERIFY_DATA)


def test_the_rfc_8448_server_application_records_open_in_order() -> None:
    cipher = rfc8448_cipher(SERVER_APPLICATION_KEYS)
    kind, ticket = cipher.decrypt(read(SERVER_TICKET))
    assert kind == 22 and ticket[:4] == b"\x04\x00\x00\xc9"  # NewSessionTicket, 201 bytes
    assert cipher.decrypt(read(SERVER_DATA)) == (23, PAYLOAD)
    assert cipher.decrypt(read(SERVER_CLOSE)) == CLOSE_NOTIFY
    assert cipher.seq == 3


def test_the_rfc_8448_client_application_records_open_in_order() -> None:
    cipher = rfc8448_cipher(CLIENT_APPLICATION_KEYS)
    assert cipher.decrypt(read(CLIENT_DATA)) == (23, PAYLOAD)
    assert cipher.decrypt(read(CLIENT_CLOSE)) == CLOSE_NOTIFY
    assert cipher.seq == 2


def test_a_record_out_of_its_turn_does_not_open_and_keeps_the_sequence_number() -> None:
    """Each record's nonce holds its sequence number (RFC 8446 5.3): the second record cannot
    open as the first."""
    cipher = rfc8448_cipher(SERVER_APPLICATION_KEYS)
    with pytest.raises(BadRecord, match="authentication failed"):
        cipher.decrypt(read(SERVER_DATA))
    assert cipher.seq == 0
    cipher.decrypt(read(SERVER_TICKET))
    assert cipher.decrypt(read(SERVER_DATA)) == (23, PAYLOAD) and cipher.seq == 2


def test_any_byte_changed_in_a_tls13_record_or_its_header_is_refused() -> None:
    """The header is the additional data (RFC 8446 5.2): none of the 58 bytes can change."""
    cipher = rfc8448_cipher(CLIENT_HANDSHAKE_KEYS)
    for at in range(len(CLIENT_FINISHED)):
        damaged = bytearray(CLIENT_FINISHED)
        damaged[at] ^= 0x20
        record = Record(
            damaged[0],
            int.from_bytes(damaged[1:3], "big"),
            bytes(damaged[:5]),
            bytes(damaged[5:]),
            0,
        )
        with pytest.raises(BadRecord):
            cipher.decrypt(record)
        assert cipher.seq == 0
    assert cipher.decrypt(read(CLIENT_FINISHED))[0] == 22


@pytest.mark.parametrize("length", [0, 1, 15, 16])
def test_a_tls13_record_too_short_for_its_tag(length: int) -> None:
    cipher = rfc8448_cipher(CLIENT_APPLICATION_KEYS)
    header = b"\x17\x03\x03" + length.to_bytes(2, "big")
    with pytest.raises(BadRecord, match="shorter than its tag"):
        cipher.decrypt(Record(23, 0x0303, header, CLIENT_DATA[5 : 5 + length], 0))
    assert cipher.seq == 0


def test_a_pickled_cipher_goes_on_with_the_next_record() -> None:
    """Carried to the next batch as its keys and sequence number."""
    cipher = rfc8448_cipher(SERVER_APPLICATION_KEYS)
    cipher.decrypt(read(SERVER_TICKET))
    cipher.bulk = object()  # what the bulk opener keyed is made again, not carried
    carried = pickle.loads(pickle.dumps(cipher))
    assert carried.seq == 1 and carried.suite == AES_128_GCM_SHA256 and carried.bulk is None
    assert carried.decrypt(read(SERVER_DATA)) == (23, PAYLOAD)
    assert carried.decrypt(read(SERVER_CLOSE)) == CLOSE_NOTIFY


# ---- records protected here, per the RFCs ------------------------------------------------


def aad12(seq: int, content_type: int, version: int, length: int) -> bytes:
    """RFC 5246 6.2.3.3: seq_num + TLSCompressed.type + .version + .length."""
    return struct.pack("!QBHH", seq, content_type, version, length)


class Peer:
    """One direction's records protected as a TLS peer protects them, with `cryptography`'s
    AEAD and block ciphers and `hmac`."""

    def __init__(self, suite: CipherSuite, *, encrypt_then_mac: bool = False) -> None:
        self.suite = suite
        self.key = bytes(range(1, 1 + suite.key_length))
        self.iv = bytes(range(100, 100 + suite.iv_length))
        self.mac_key = bytes(range(200, 200 + suite.mac_length))
        self.encrypt_then_mac = encrypt_then_mac
        self.seq = 0

    def opener(self) -> RecordCipher:
        return RecordCipher(
            self.suite, self.key, self.iv, self.mac_key, encrypt_then_mac=self.encrypt_then_mac
        )

    def seal(
        self,
        content_type: int,
        data: bytes,
        *,
        zeros: int = 0,
        padding_blocks: int = 0,
        version: int = 0x0303,
    ) -> bytes:
        """The next record's wire bytes. ``zeros``: TLS 1.3 padding; ``padding_blocks``: CBC
        padding beyond the least."""
        seq = self.seq
        self.seq += 1
        suite = self.suite
        if suite.tls13:
            inner = data + bytes([content_type]) + bytes(zeros)
            header = b"\x17\x03\x03" + (len(inner) + 16).to_bytes(2, "big")
            return header + self.aead().encrypt(self.xor_nonce(seq), inner, header)
        aad = aad12(seq, content_type, version, len(data))
        if suite.cipher == GCM:
            explicit = (seq ^ 0x5A5A5A5A5A5A5A5A).to_bytes(8, "big")  # any, sent in the clear
            fragment = explicit + self.aead().encrypt(self.iv + explicit, data, aad)
        elif suite.cipher == CHACHA:
            fragment = self.aead().encrypt(self.xor_nonce(seq), data, aad)
        elif self.encrypt_then_mac:
            sealed = self.cbc(seq, data + self.padding(len(data), padding_blocks))
            fragment = sealed + self.mac(aad12(seq, content_type, version, len(sealed)) + sealed)
        else:
            content = data + self.mac(aad + data)
            fragment = self.cbc(seq, content + self.padding(len(content), padding_blocks))
        return self.wrap(content_type, fragment, version)

    def aead(self) -> AESGCM | ChaCha20Poly1305:
        return AESGCM(self.key) if self.suite.cipher == GCM else ChaCha20Poly1305(self.key)

    def xor_nonce(self, seq: int) -> bytes:
        """RFC 8446 5.3, RFC 7905 2: the IV XOR the sequence number."""
        return (int.from_bytes(self.iv, "big") ^ seq).to_bytes(len(self.iv), "big")

    def mac(self, data: bytes) -> bytes:
        assert self.suite.mac_name is not None
        return hmac.digest(self.mac_key, data, self.suite.mac_name)

    @staticmethod
    def padding(length: int, extra_blocks: int = 0) -> bytes:
        """RFC 5246 6.2.3.2: padding_length + 1 bytes of value padding_length, to whole
        blocks."""
        pad = (-(length + 1)) % 16 + 16 * extra_blocks
        return bytes([pad]) * (pad + 1)

    def cbc(self, seq: int, plain: bytes) -> bytes:
        """The record's own IV, then the blocks (RFC 5246 6.2.3.2)."""
        record_iv = hashlib.sha256(seq.to_bytes(8, "big")).digest()[:16]
        encryptor = Cipher(algorithms.AES(self.key), modes.CBC(record_iv)).encryptor()
        return record_iv + encryptor.update(plain) + encryptor.finalize()

    @staticmethod
    def wrap(content_type: int, fragment: bytes, version: int = 0x0303) -> bytes:
        return (
            bytes([content_type])
            + version.to_bytes(2, "big")
            + len(fragment).to_bytes(2, "big")
            + fragment
        )


def protections() -> list[object]:
    """Every suite, CBC ones both MAC-then-encrypt and encrypt-then-MAC."""
    cases: list[object] = []
    for suite in SUITES.values():
        if suite.cipher == CBC:
            cases.append(pytest.param(suite, False, id=f"{suite.name}-mac-then-encrypt"))
            cases.append(pytest.param(suite, True, id=f"{suite.name}-encrypt-then-mac"))
        else:
            cases.append(pytest.param(suite, False, id=suite.name))
    return cases


@pytest.mark.parametrize(("suite", "encrypt_then_mac"), protections())
def test_every_suite_opens_records_protected_per_its_rfc(
    suite: CipherSuite, encrypt_then_mac: bool
) -> None:
    peer = Peer(suite, encrypt_then_mac=encrypt_then_mac)
    sent = [
        (22, b"\x14\x00\x00\x0c" + bytes(12)),
        (23, b""),
        (23, bytes(range(256)) * 64),
        (21, b"\x01\x00"),
    ]
    wire = b"".join(peer.seal(kind, data) for kind, data in sent)
    cipher = peer.opener()
    assert cipher.tls13 == suite.tls13
    assert [cipher.decrypt(record) for record in RecordReader().feed(wire)] == sent
    assert cipher.seq == len(sent)


TLS12_KINDS = [
    pytest.param(0xC02F, False, id="aes-gcm"),
    pytest.param(0xCCA8, False, id="chacha20-poly1305"),
    pytest.param(0xC013, False, id="cbc-mac-then-encrypt"),
    pytest.param(0xC028, True, id="cbc-encrypt-then-mac"),
]


@pytest.mark.parametrize(("code", "encrypt_then_mac"), TLS12_KINDS)
def test_a_tls12_record_out_of_its_turn_is_refused(code: int, encrypt_then_mac: bool) -> None:
    """TLS 1.2 authenticates the sequence number (RFC 5246 6.2.3.3): even GCM, whose nonce
    travels in the record, refuses a record replayed or skipped."""
    peer = Peer(SUITES[code], encrypt_then_mac=encrypt_then_mac)
    first, second = read(peer.seal(23, b"first")), read(peer.seal(23, b"second"))
    cipher = peer.opener()
    with pytest.raises(BadRecord):
        cipher.decrypt(second)
    assert cipher.seq == 0
    assert cipher.decrypt(first) == (23, b"first")
    with pytest.raises(BadRecord):
        cipher.decrypt(first)  # replayed
    assert cipher.decrypt(second) == (23, b"second") and cipher.seq == 2


@pytest.mark.parametrize(("code", "encrypt_then_mac"), TLS12_KINDS)
def test_a_tls12_record_changed_anywhere_is_refused(code: int, encrypt_then_mac: bool) -> None:
    """Its content type, its version and every byte of its fragment are authenticated."""
    peer = Peer(SUITES[code], encrypt_then_mac=encrypt_then_mac)
    record = read(peer.seal(23, b"SEND\ndestination:/queue/a\n\nhello\x00"))
    cipher = peer.opener()
    changed = [
        Record(22, record.version, record.header, record.fragment, 0),
        Record(record.content_type, 0x0301, record.header, record.fragment, 0),
    ]
    for at in range(len(record.fragment)):
        fragment = bytearray(record.fragment)
        fragment[at] ^= 0x01
        changed.append(Record(23, 0x0303, record.header, bytes(fragment), 0))
    for damaged in changed:
        with pytest.raises(BadRecord):
            cipher.decrypt(damaged)
    assert cipher.seq == 0 and cipher.decrypt(record)[0] == 23


@pytest.mark.parametrize(
    ("code", "encrypt_then_mac", "length", "reason"),
    [
        (0xC02F, False, 0, "shorter than its nonce and tag"),
        (0xC02F, False, 23, "shorter than its nonce and tag"),
        (0xCCA8, False, 0, "shorter than its tag"),
        (0xCCA8, False, 15, "shorter than its tag"),
        (0x1303, False, 16, "shorter than its tag"),
        (0xC013, False, 0, "not a whole number of blocks"),
        (0xC013, False, 16, "not a whole number of blocks"),  # an IV and no block
        (0xC013, False, 47, "not a whole number of blocks"),
        (0xC013, True, 20 + 31, "shorter than its IV, a block and its MAC"),
        (0xC028, True, 48 + 16, "shorter than its IV, a block and its MAC"),
    ],
)
def test_a_record_too_short_for_its_protection(
    code: int, encrypt_then_mac: bool, length: int, reason: str
) -> None:
    cipher = Peer(SUITES[code], encrypt_then_mac=encrypt_then_mac).opener()
    header = b"\x17\x03\x03" + length.to_bytes(2, "big")
    with pytest.raises(BadRecord, match=reason):
        cipher.decrypt(Record(23, 0x0303, header, bytes(length), 0))
    assert cipher.seq == 0


# ---- TLS 1.3's inner plaintext (RFC 8446 5.2, 5.4) ---------------------------------------


@pytest.mark.parametrize(
    ("content_type", "data", "zeros"),
    [
        (23, b"hello", 0),
        (23, b"hello", 200),  # padding: zeros after the type, stripped
        (23, b"ends in zeros\x00\x00", 3),  # the content's own zeros are kept
        (23, b"", 0),
        (21, b"\x01\x00", 10),  # an alert, inside an application_data record
        (22, b"\x18\x00\x00\x01\x00", 0),  # a KeyUpdate
    ],
)
def test_the_inner_content_type_and_content_come_out_without_padding(
    content_type: int, data: bytes, zeros: int
) -> None:
    peer = Peer(SUITES[0x1302])
    record = read(peer.seal(content_type, data, zeros=zeros))
    assert record.content_type == 23
    assert peer.opener().decrypt(record) == (content_type, data)


def test_an_inner_plaintext_of_zeros_alone_has_no_content_type() -> None:
    suite = SUITES[0x1303]
    peer = Peer(suite)
    header = b"\x17\x03\x03\x00\x1a"
    fragment = peer.aead().encrypt(peer.xor_nonce(0), bytes(10), header)
    with pytest.raises(BadRecord, match="no content type inside"):
        peer.opener().decrypt(Record(23, 0x0303, header, fragment, 0))


# ---- CBC's padding and MAC (RFC 5246 6.2.3.2, RFC 7366) -----------------------------------


@pytest.mark.parametrize("encrypt_then_mac", [False, True])
@pytest.mark.parametrize(
    ("data", "padding_blocks"),
    [(b"", 0), (b"", 15), (b"x" * 11, 0), (b"y" * 12, 15), (b"w" * 15, 0), (b"v" * 300, 3)],
)
def test_any_length_of_padding_is_taken_off(
    encrypt_then_mac: bool, data: bytes, padding_blocks: int
) -> None:
    """From none (padding_length 0, with 11 or 15 bytes of data) up to 255 bytes (15 blocks
    beyond the least, with 12 or no bytes of data), whatever the MAC's place."""
    peer = Peer(SUITES[0xC013], encrypt_then_mac=encrypt_then_mac)
    record = read(peer.seal(23, data, padding_blocks=padding_blocks))
    assert peer.opener().decrypt(record) == (23, data)


def mac_then_encrypt(peer: Peer, plain: bytes) -> Record:
    """A record of ``plain`` (content, MAC and padding, or any bytes) encrypted as sequence
    number 0."""
    return read(peer.wrap(23, peer.cbc(0, plain)))


def test_mac_then_encrypt_refuses_padding_not_of_its_own_length() -> None:
    peer = Peer(SUITES[0xC013])
    content = b"hello" + peer.mac(aad12(0, 23, 0x0303, 5) + b"hello")  # 25 bytes: pad 6
    assert peer.opener().decrypt(mac_then_encrypt(peer, content + b"\x06" * 7)) == (23, b"hello")
    for padding in (b"\x05" + b"\x06" * 6, b"\x06" * 6 + b"\x05", b"\x00" * 6 + b"\xff"):
        with pytest.raises(BadRecord, match="bad padding"):
            peer.opener().decrypt(mac_then_encrypt(peer, content + padding))


def test_mac_then_encrypt_refuses_a_wrong_mac_or_none_at_all() -> None:
    peer = Peer(SUITES[0xC013])
    wrong = peer.mac(aad12(1, 23, 0x0303, 5) + b"hello")  # the next record's
    with pytest.raises(BadRecord, match="MAC mismatch"):
        peer.opener().decrypt(mac_then_encrypt(peer, b"hello" + wrong + b"\x06" * 7))
    with pytest.raises(BadRecord, match="shorter than its MAC"):
        peer.opener().decrypt(mac_then_encrypt(peer, b"abc" + b"\x0c" * 13))


def encrypt_then_mac(peer: Peer, plain: bytes, *, extra: bytes = b"") -> Record:
    """A record of ``plain`` encrypted as sequence number 0 (and ``extra`` after the blocks),
    its MAC right."""
    sealed = peer.cbc(0, plain) + extra
    return read(peer.wrap(23, sealed + peer.mac(aad12(0, 23, 0x0303, len(sealed)) + sealed)))


def test_encrypt_then_mac_checks_the_mac_before_anything_else() -> None:
    peer = Peer(SUITES[0xC027], encrypt_then_mac=True)
    assert peer.opener().decrypt(encrypt_then_mac(peer, b"hello" + b"\x0a" * 11)) == (23, b"hello")
    with pytest.raises(BadRecord, match="bad padding"):
        peer.opener().decrypt(encrypt_then_mac(peer, b"hello" + b"\x0a" * 10 + b"\x0b"))
    with pytest.raises(BadRecord, match="not a whole number of blocks"):
        peer.opener().decrypt(encrypt_then_mac(peer, b"hello" + b"\x0a" * 11, extra=b"!"))
    good = encrypt_then_mac(peer, b"hello" + b"\x0a" * 11)
    bad_mac = good.fragment[:-1] + bytes([good.fragment[-1] ^ 1])
    with pytest.raises(BadRecord, match="MAC mismatch"):
        peer.opener().decrypt(Record(23, 0x0303, good.header, bad_mac, 0))


def test_a_pickled_cbc_cipher_keeps_its_mac_key_and_mode() -> None:
    peer = Peer(SUITES[0xC028], encrypt_then_mac=True)
    wire = peer.seal(23, b"one") + peer.seal(23, b"two")
    first, second = RecordReader().feed(wire)
    cipher = peer.opener()
    cipher.decrypt(first)
    assert pickle.loads(pickle.dumps(cipher)).decrypt(second) == (23, b"two")


# ---- hostile bytes -----------------------------------------------------------------------


@pytest.mark.parametrize(("suite", "encrypt_then_mac"), protections())
def test_random_records_give_bad_record_and_nothing_else(
    suite: CipherSuite, encrypt_then_mac: bool
) -> None:
    cipher = Peer(suite, encrypt_then_mac=encrypt_then_mac).opener()
    rng = random.Random(suite.code)
    for length in [*range(0, 100), *(rng.randrange(100, 18432) for _ in range(10))]:
        fragment = rng.randbytes(length)
        content_type = rng.choice((20, 21, 22, 23, 24))
        header = bytes([content_type, 3, 3]) + length.to_bytes(2, "big")
        with pytest.raises(BadRecord):
            cipher.decrypt(Record(content_type, 0x0303, header, fragment, 0))
    assert cipher.seq == 0


def test_bad_record_is_a_value_error() -> None:
    assert issubclass(BadRecord, ValueError)
