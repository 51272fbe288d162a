"""pipeline/tls/keys.py: key derivation against published answers: the TLS 1.2 PRF's test vectors
(SHA-256 and SHA-384), RFC 8448's TLS 1.3 key schedule, OpenSSL's own KeyUpdate secrets, and the
keys of real TLS 1.2 and 1.3 captures, which must open the records those peers sent."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.net import Direction
from pipeline.reassembly import Data, Segment
from pipeline.tls.cipher import RecordCipher
from pipeline.tls.keys import (
    hkdf_expand_label,
    key_block12,
    next_secret13,
    prf12,
    traffic_keys13,
)
from pipeline.tls.records import Record, RecordReader
from pipeline.tls.suites import SUITES
from tests.support.local_reassembly import LocalReassembly
from tests.support.paths import DATA
from tests.support.tls_pair import converse

TLS_CAPTURES = DATA / "tls"


def unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# ---- TLS 1.2's PRF (RFC 5246 5) ----------------------------------------------------------

# The PRF test vectors published on the IETF TLS list (mail-archive/web/tls/current/msg03416)
PRF_VECTORS = [
    pytest.param(
        "sha256",
        "9b be 43 6b a9 40 f0 17 b1 76 52 84 9a 71 db 35",
        "a0 ba 9f 93 6c da 31 18 27 a6 f7 96 ff d5 19 8c",
        "e3 f2 29 ba 72 7b e1 7b 8d 12 26 20 55 7c d4 53 c2 aa b2 1d 07 c3 d4 95 32 9b 52 d4 e6 1e"
        "db 5a 6b 30 17 91 e9 0d 35 c9 c9 a4 6b 4e 14 ba f9 af 0f a0 22 f7 07 7d ef 17 ab fd 37 97"
        "c0 56 4b ab 4f bc 91 66 6e 9d ef 9b 97 fc e3 4f 79 67 89 ba a4 80 82 d1 22 ee 42 c5 a7 2e"
        "5a 51 10 ff f7 01 87 34 7b 66",
        id="sha256-100-bytes",
    ),
    pytest.param(
        "sha384",
        "b8 0b 73 3d 6c ee fc dc 71 56 6e a4 8e 55 67 df",
        "cd 66 5c f6 a8 44 7d d6 ff 8b 27 55 5e db 74 65",
        "7b 0c 18 e9 ce d4 10 ed 18 04 f2 cf a3 4a 33 6a 1c 14 df fb 49 00 bb 5f d7 94 21 07 e8 1c"
        "83 cd e9 ca 0f aa 60 be 9f e3 4f 82 b1 23 3c 91 46 a0 e5 34 cb 40 0f ed 27 00 88 4f 9d c2"
        "36 f8 0e dd 8b fa 96 11 44 c9 e8 d7 92 ec a7 22 a7 b3 2f c3 d4 16 d4 73 eb c2 c5 fd 4a bf"
        "da d0 5d 91 84 25 9b 5b f8 cd 4d 90 fa 0d 31 e2 de c4 79 e4 f1 a2 60 66 f2 ee a9 a6 92 36"
        "a3 e5 26 55 c9 e9 ae e6 91 c8 f3 a2 68 54 30 8d 5e aa 3b e8 5e 09 90 70 3d 73 e5 6f",
        id="sha384-148-bytes",
    ),
]


@pytest.mark.parametrize(("hash_name", "secret", "seed", "output"), PRF_VECTORS)
def test_the_prf_gives_the_published_test_vectors(
    hash_name: str, secret: str, seed: str, output: str
) -> None:
    expected = unhex(output)
    derived = prf12(unhex(secret), b"test label", unhex(seed), len(expected), hash_name)
    assert derived == expected


def test_a_shorter_prf_output_is_a_prefix_of_a_longer_one() -> None:
    """P_hash is a stream: what the key block cuts off its end changes nothing before it."""
    secret, seed = b"\x0b" * 48, b"\x5e" * 64
    longest = prf12(secret, b"key expansion", seed, 200, "sha384")
    for length in (0, 1, 47, 48, 49, 104, 199):
        assert prf12(secret, b"key expansion", seed, length, "sha384") == longest[:length]


def test_the_prf_label_and_seed_are_one_string() -> None:
    """RFC 5246 5: PRF(secret, label, seed) = P_hash(secret, label + seed)."""
    secret = b"s" * 48
    assert prf12(secret, b"key expansion", b"ab", 40, "sha256") == prf12(
        secret, b"key", b" expansionab", 40, "sha256"
    )
    assert prf12(secret, b"key expansion", b"ab", 40, "sha256") != prf12(
        secret, b"key expansion", b"ba", 40, "sha256"
    )


@pytest.mark.parametrize(
    ("code", "sizes"),
    [
        (0xC030, (0, 32, 4)),  # AES-256-GCM: no MAC key, a 4-byte salt (RFC 5288 3)
        (0xCCA8, (0, 32, 12)),  # ChaCha20-Poly1305: a 12-byte IV (RFC 7905 2)
        (0xC013, (20, 16, 16)),  # AES-128-CBC with HMAC-SHA1
        (0xC028, (48, 32, 16)),  # AES-256-CBC with HMAC-SHA384, the PRF on SHA-384
    ],
)
def test_the_key_block_is_cut_in_the_order_of_rfc_5246(
    code: int, sizes: tuple[int, int, int]
) -> None:
    """RFC 5246 6.3: key_block = PRF(master_secret, "key expansion", server_random +
    client_random), cut into the client's and the server's MAC keys, then keys, then IVs."""
    suite = SUITES[code]
    master, client_random, server_random = b"\x4d" * 48, b"\xc1" * 32, b"\x5e" * 32
    client, server = key_block12(suite, master, client_random, server_random)
    mac, key, iv = sizes
    block = prf12(
        master, b"key expansion", server_random + client_random, 2 * sum(sizes), suite.hash_name
    )
    cut, at = [], 0
    for size in (mac, mac, key, key, iv, iv):
        cut.append(block[at : at + size])
        at += size
    assert client == (cut[0], cut[2], cut[4]) and server == (cut[1], cut[3], cut[5])
    assert [len(part) for part in client] == list(sizes)


# ---- TLS 1.3's key schedule (RFC 8446 7.1-7.3), RFC 8448 3 --------------------------------

EARLY_SECRET = "33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a"
HANDSHAKE_SECRET = "1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac"
MASTER_SECRET = "18df06843d13a08bf2a449844c5f8a478001bc4d4c627984d5a41da8d0402919"
HELLO_HASH = "860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8"  # CH..SH
SERVER_FINISHED_HASH = "9608102a0f1ccc6db6250b7b7e417b1a000eaada3daae4777a7686c9ff83df13"  # CH..SF
EMPTY_HASH = hashlib.sha256(b"").hexdigest()
CLIENT_HANDSHAKE = "b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21"
SERVER_HANDSHAKE = "b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38"
CLIENT_APPLICATION = "9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5"
SERVER_APPLICATION = "a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643"


# and what RFC 8448 derives from them
DERIVED_FROM_EARLY = "6f2615a108c702c5678f54fc9dbab69716c076189c48250cebeac3576c3611ba"
DERIVED_FROM_HANDSHAKE = "43de77e0c77713859a944db9db2590b53190a65b3ee2e4f12dd7a0bb7ce254b4"
EXPORTER_MASTER = "fe22f881176eda18eb8f44529e6792c50c9a3f89452f68d8ae311b4309d3cf50"
SERVER_FINISHED_KEY = "008d3b66f816ea559f96b537e885c31fc068bf492c652f01f288a1d8cdc19fc8"


@pytest.mark.parametrize(
    ("secret", "label", "context", "expected"),
    [
        pytest.param(EARLY_SECRET, b"derived", EMPTY_HASH, DERIVED_FROM_EARLY, id="derived-1"),
        pytest.param(HANDSHAKE_SECRET, b"c hs traffic", HELLO_HASH, CLIENT_HANDSHAKE, id="c-hs"),
        pytest.param(HANDSHAKE_SECRET, b"s hs traffic", HELLO_HASH, SERVER_HANDSHAKE, id="s-hs"),
        pytest.param(
            HANDSHAKE_SECRET, b"derived", EMPTY_HASH, DERIVED_FROM_HANDSHAKE, id="derived-2"
        ),
        pytest.param(
            MASTER_SECRET, b"c ap traffic", SERVER_FINISHED_HASH, CLIENT_APPLICATION, id="c-ap"
        ),
        pytest.param(
            MASTER_SECRET, b"s ap traffic", SERVER_FINISHED_HASH, SERVER_APPLICATION, id="s-ap"
        ),
        pytest.param(
            MASTER_SECRET, b"exp master", SERVER_FINISHED_HASH, EXPORTER_MASTER, id="exp-master"
        ),
        pytest.param(SERVER_HANDSHAKE, b"finished", "", SERVER_FINISHED_KEY, id="finished-key"),
    ],
)
def test_hkdf_expand_label_gives_the_rfc_8448_secrets(
    secret: str, label: bytes, context: str, expected: str
) -> None:
    derived = hkdf_expand_label(unhex(secret), label, unhex(context), 32, "sha256")
    assert derived.hex() == expected


@pytest.mark.parametrize(
    ("secret", "key", "iv"),
    [
        (SERVER_HANDSHAKE, "3fce516009c21727d0f2e4e86ee403bc", "5d313eb2671276ee13000b30"),
        (CLIENT_HANDSHAKE, "dbfaa693d1762c5b666af5d950258d01", "5bd3c71b836e0b76bb73265f"),
        (SERVER_APPLICATION, "9f02283b6c9c07efc26bb9f2ac92e356", "cf782b88dd83549aadf1e984"),
        (CLIENT_APPLICATION, "17422dda596ed5d9acd890e3c63f5051", "5b78923dee08579033e523d9"),
    ],
    ids=["server-handshake", "client-handshake", "server-application", "client-application"],
)
def test_traffic_keys_are_the_rfc_8448_keys(secret: str, key: str, iv: str) -> None:
    assert traffic_keys13(SUITES[0x1301], unhex(secret)) == (unhex(key), unhex(iv))


@pytest.mark.parametrize(
    ("code", "sizes"), [(0x1301, (16, 12)), (0x1302, (32, 12)), (0x1303, (32, 12))]
)
def test_traffic_keys_have_the_suites_sizes(code: int, sizes: tuple[int, int]) -> None:
    suite = SUITES[code]
    secret = b"\x42" * hashlib.new(suite.hash_name).digest_size
    key, iv = traffic_keys13(suite, secret)
    assert (len(key), len(iv)) == sizes
    assert len(next_secret13(suite, secret)) == len(secret)


def test_hkdf_expand_label_refuses_more_than_rfc_5869_allows() -> None:
    """RFC 5869 2.3: L <= 255 * HashLen."""
    secret = unhex(SERVER_HANDSHAKE)
    assert len(hkdf_expand_label(secret, b"key", b"", 255 * 32, "sha256")) == 255 * 32
    with pytest.raises(ValueError):
        hkdf_expand_label(secret, b"key", b"", 255 * 32 + 1, "sha256")


# ---- real peers --------------------------------------------------------------------------


def keylog_lines(name: str) -> dict[str, tuple[bytes, bytes]]:
    """(client random, secret) by label, read straight from the capture's NSS key log."""
    lines = (TLS_CAPTURES / f"{name}.keys").read_text().splitlines()
    found = {}
    for line in lines:
        if line and not line.startswith("#"):
            label, client_random, secret = line.split()
            found[label] = (bytes.fromhex(client_random), bytes.fromhex(secret))
    return found


@pytest.mark.parametrize("direction", ["CLIENT", "SERVER"])
def test_the_next_secret_is_openssls_after_a_key_update(direction: str) -> None:
    """The TLS 1.3 capture's key log holds OpenSSL's secrets after the KeyUpdate each side sent
    (``*_TRAFFIC_SECRET_N``): "traffic upd" over SHA-384 must give them (RFC 8446 7.2)."""
    secrets = keylog_lines("rabbitmq-stomp-tls13")
    _, first = secrets[f"{direction}_TRAFFIC_SECRET_0"]
    _, after_update = secrets[f"{direction}_TRAFFIC_SECRET_N"]
    assert next_secret13(SUITES[0x1302], first) == after_update


def records_of(capture: Path) -> dict[Direction, list[Record]]:
    """The records of each direction of a capture's one connection."""
    streams = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
    for event in LocalReassembly([str(capture)]):
        if type(event) is Segment and type(event.event) is Data:
            streams[Direction.C2S if event.from_client else Direction.S2C] += event.event.data
    return {direction: RecordReader().feed(bytes(data)) for direction, data in streams.items()}


def after_change_cipher_spec(records: list[Record]) -> list[Record]:
    kinds = [record.content_type for record in records]
    return records[kinds.index(20) + 1 :]


@pytest.mark.parametrize(
    ("name", "code"),
    [("rabbitmq-stomp-tls12-chacha", 0xCCA8), ("activemq-stomp-ssl-tls12-gcm", 0xC030)],
)
def test_the_key_block_of_a_real_tls12_connection_opens_all_its_records(
    name: str, code: int
) -> None:
    """RabbitMQ (Erlang) and ActiveMQ (Java) on one side, OpenSSL on the other: the key block
    from the key log's master secret and the two hellos' randoms opens every protected record
    both ways, from each Finished to each close_notify."""
    records = records_of(TLS_CAPTURES / f"{name}.pcap")
    # the randoms sit right after the hellos' headers and versions (RFC 5246 7.4.1.2-3)
    client_random = records[Direction.C2S][0].fragment[6:38]
    server_random = records[Direction.S2C][0].fragment[6:38]
    logged_random, master_secret = keylog_lines(name)["CLIENT_RANDOM"]
    assert client_random == logged_random
    suite = SUITES[code]
    client, server = key_block12(suite, master_secret, client_random, server_random)
    for direction, (mac_key, key, iv) in ((Direction.C2S, client), (Direction.S2C, server)):
        cipher = RecordCipher(suite, key, iv, mac_key)
        opened = [cipher.decrypt(record) for record in after_change_cipher_spec(records[direction])]
        finished_type, finished = opened[0]
        assert finished_type == 22 and finished[:4] == b"\x14\x00\x00\x0c"  # 12 bytes verify_data
        first_frame = b"STOMP\n" if direction is Direction.C2S else b"CONNECTED\n"
        assert opened[1][0] == 23 and opened[1][1].startswith(first_frame)
        assert opened[-1] == (21, b"\x01\x00")  # close_notify, a warning


def test_the_traffic_keys_of_a_real_tls13_connection_open_its_records() -> None:
    """RabbitMQ's TLS 1.3 with TLS_AES_256_GCM_SHA384: the keys of the handshake secrets open
    the server's protected flight and the client's Finished (48 bytes of verify_data: SHA-384),
    those of the first application secrets the first frames."""
    records = records_of(TLS_CAPTURES / "rabbitmq-stomp-tls13.pcap")
    secrets = {label: secret for label, (_, secret) in keylog_lines("rabbitmq-stomp-tls13").items()}
    suite = SUITES[0x1302]

    def cipher(label: str) -> RecordCipher:
        key, iv = traffic_keys13(suite, secrets[label])
        return RecordCipher(suite, key, iv)

    server_records = after_change_cipher_spec(records[Direction.S2C])
    server = cipher("SERVER_HANDSHAKE_TRAFFIC_SECRET")
    flight = [server.decrypt(record) for record in server_records[:4]]
    # EncryptedExtensions (empty), Certificate, CertificateVerify, Finished
    assert [(kind, plain[0]) for kind, plain in flight] == [(22, 8), (22, 11), (22, 15), (22, 20)]
    assert flight[0][1] == b"\x08\x00\x00\x02\x00\x00" and len(flight[3][1]) == 4 + 48
    server = cipher("SERVER_TRAFFIC_SECRET_0")
    kind, plain = server.decrypt(server_records[4])
    assert kind == 23 and plain.startswith(b"CONNECTED\nserver:RabbitMQ")

    client_records = after_change_cipher_spec(records[Direction.C2S])
    kind, plain = cipher("CLIENT_HANDSHAKE_TRAFFIC_SECRET").decrypt(client_records[0])
    assert kind == 22 and plain[:4] == b"\x14\x00\x00\x30"
    kind, plain = cipher("CLIENT_TRAFFIC_SECRET_0").decrypt(client_records[1])
    assert kind == 23 and plain.startswith(b"STOMP\naccept-version:1.2\n")


@pytest.fixture(scope="module")
def certificate_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder, so that both conversations use one certificate (made once: `converse`)."""
    return tmp_path_factory.mktemp("broker")


@pytest.mark.parametrize("encrypt_then_mac", [True, False])
def test_the_key_block_of_an_openssl_cbc_connection_opens_its_finished(
    certificate_folder: Path, encrypt_then_mac: bool
) -> None:
    """AES-256-CBC with HMAC-SHA384 and the PRF on SHA-384, between two OpenSSLs in memory: the
    MAC keys at the head of the key block authenticate each side's Finished."""
    talk = converse(
        certificate_folder,
        tls12_cipher="ECDHE-RSA-AES256-SHA384",
        encrypt_then_mac=encrypt_then_mac,
    )
    records = {
        direction: RecordReader().feed(talk.stream(direction))
        for direction in (Direction.C2S, Direction.S2C)
    }
    client_random = records[Direction.C2S][0].fragment[6:38]
    server_random = records[Direction.S2C][0].fragment[6:38]
    [line] = [line for line in talk.keylog.splitlines() if line.startswith("CLIENT_RANDOM")]
    assert line.split()[1] == client_random.hex()
    suite = SUITES[0xC028]
    keys = key_block12(suite, bytes.fromhex(line.split()[2]), client_random, server_random)
    for direction, (mac_key, key, iv) in zip((Direction.C2S, Direction.S2C), keys, strict=True):
        cipher = RecordCipher(suite, key, iv, mac_key, encrypt_then_mac=encrypt_then_mac)
        kind, finished = cipher.decrypt(after_change_cipher_spec(records[direction])[0])
        assert kind == 22 and finished[:4] == b"\x14\x00\x00\x0c"
