"""One TLS connection seen passively, decrypted with its secrets (sans-IO).

Fed the two reassembled TCP byte streams of one connection (``receive``, ``receive_gap``, then
``finish``), it reads the hellos in the clear, finds the connection's secrets by the ClientHello's
random, and returns the application data of each direction as `Plaintext` events with their TCP
offsets, and what went wrong as `TlsAnomaly` events. `facts` says what was negotiated, whether the
connection was decrypted and, when it was not, why.

TLS 1.2: records are protected from each side's ChangeCipherSpec on, with keys from the master
secret. TLS 1.3: from the ServerHello on, with the handshake traffic secrets until each side's
Finished, then the application traffic secrets, renewed at each KeyUpdate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.compiled import kernel, set_slot_values, slot_values
from pipeline.net import Direction
from pipeline.tls import bulk
from pipeline.tls.cipher import BadRecord, RecordCipher
from pipeline.tls.handshake import (
    CLIENT_HELLO,
    ENCRYPTED_EXTENSIONS,
    FINISHED,
    KEY_UPDATE,
    SERVER_HELLO,
    TLS12,
    TLS13,
    BadHandshake,
    HandshakeFramer,
    parse_client_hello,
    parse_encrypted_extensions,
    parse_server_hello,
    version_name,
)
from pipeline.tls.keylog import Secrets, task_secrets
from pipeline.tls.keys import key_block12, next_secret13, traffic_keys13
from pipeline.tls.records import (
    ALERT,
    APPLICATION_DATA,
    CHANGE_CIPHER_SPEC,
    HANDSHAKE,
    Record,
    RecordReader,
)
from pipeline.tls.suites import SUITES, CipherSuite, suite_name


def open_bulk() -> Callable[..., tuple[bytes, list[int], int, int]]:
    """`pipeline.tls.bulk.open_records`, compiled where built."""
    compiled = kernel("tls_bulk")
    return bulk.open_records if compiled is None else compiled.open_records


# Why a connection's application data could not be read
NO_KEYS = "no_keys"
UNSUPPORTED_CIPHER = "unsupported_cipher"
BAD_RECORD_MAC = "bad_record_mac"
HANDSHAKE_NOT_SEEN = "handshake_not_seen"

# Anomaly kinds
TLS_BAD_RECORD = "tls_bad_record_mac"
TLS_NOT_TLS = "tls_not_a_record"
TLS_GAP = "tls_gap"
TLS_BAD_HANDSHAKE = "tls_bad_handshake"
TLS_NO_KEYS = "tls_no_keys"  # at the ClientHello: the key logs have no secrets for its random

# Records that fail in a row before a direction gives up: one damaged record is skipped (the
# next is tried under the sequence numbers it may have), wrong keys are not retried forever.
MAX_FAILED_RECORDS = 4


@dataclass(slots=True)  # not frozen: made once a record, and frozen costs 3x to make
class Plaintext:
    """Application data of one record: ``offset`` in the direction's plaintext stream,
    ``tcp_offset`` where the record carrying it starts in the TCP stream."""

    direction: Direction
    ts_ns: int
    offset: int
    tcp_offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class TlsAnomaly:
    direction: Direction
    ts_ns: int
    tcp_offset: int
    kind: str
    detail: str


Event = Plaintext | TlsAnomaly


@dataclass(slots=True)
class TlsFacts:
    version: str | None = None
    cipher_suite: str | None = None
    server_name: str | None = None
    alpn: str | None = None
    decrypted: bool = False
    not_decrypted_reason: str | None = None
    # what crossed the wire, decrypted or not: TCP payload bytes by direction, first and last time
    wire_bytes: dict[str, int] = field(default_factory=lambda: {"c2s": 0, "s2c": 0})
    first_ns: int | None = None
    last_ns: int | None = None

    def saw(self, direction: str, ts_ns: int, size: int) -> None:
        self.wire_bytes[direction] += size
        if self.first_ns is None or ts_ns < self.first_ns:
            self.first_ns = ts_ns
        if self.last_ns is None or ts_ns > self.last_ns:
            self.last_ns = ts_ns


class _Side:
    """One direction: its records, its handshake messages, and its cipher once keyed."""

    __slots__ = (
        "reader", "framer", "cipher", "pending", "secret", "handshake_done", "plain_offset",
        "failed", "stopped", "bulk_bytes", "bulk_last_ns",
    )  # fmt: skip

    def __init__(self) -> None:
        self.reader = RecordReader()
        self.framer = HandshakeFramer()
        self.cipher: RecordCipher | None = None
        self.pending: RecordCipher | None = None  # TLS 1.2: keyed, waiting for ChangeCipherSpec
        self.secret: bytes | None = None  # TLS 1.3: the traffic secret after the handshake's
        self.handshake_done = False
        self.plain_offset = 0
        self.failed = 0
        self.stopped = False
        # What the bulk path saw (`TlsSession.open_run`), added to the facts by `finish`: TCP
        # payload bytes, and the latest capture time (the earliest is the handshake's)
        self.bulk_bytes = 0
        self.bulk_last_ns = 0

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        return slot_values(self)

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        set_slot_values(self, state)


class TlsSession:
    __slots__ = ("facts", "_keys", "_sides", "_random", "_suite", "_etm", "_tls13", "_bulk")

    def __init__(self, keys: Callable[[bytes], Secrets | None] = task_secrets) -> None:
        self.facts = TlsFacts()
        self._keys = keys
        self._sides = {Direction.C2S: _Side(), Direction.S2C: _Side()}
        self._random: bytes | None = None
        self._suite: CipherSuite | None = None
        self._etm = False
        self._tls13 = False
        self._bulk = open_bulk()  # chosen once: a run costs about a microsecond

    def __getstate__(self) -> dict[str, object]:
        """What a connection carried to the next batch keeps: the derived keys of its record
        ciphers (and TLS 1.3's traffic secrets, for a KeyUpdate), never the key log or the
        secrets looked up in it; a carried connection looks its secrets up in the next task's
        key log (`task_secrets`) should its ServerHello still be to come."""
        state = {name: getattr(self, name) for name in self.__slots__ if name != "_bulk"}
        state["_keys"] = task_secrets
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._bulk = open_bulk()

    def receive(
        self, direction: Direction, ts_ns: int, tcp_offset: int, data: bytes
    ) -> list[Event]:
        self.facts.saw(direction, ts_ns, len(data))
        side = self._sides[direction]
        if side.stopped:
            return []
        events: list[Event] = []
        for record in side.reader.feed(data):
            self._record(direction, side, ts_ns, record, events)
            if side.stopped:
                return events
        failure = side.reader.failure
        if failure is not None:
            side.stopped = True
            events.append(
                TlsAnomaly(direction, ts_ns, failure.tcp_offset, TLS_NOT_TLS, failure.reason)
            )
        return events

    def takes_run(self, direction: Direction) -> bool:
        """Whether this direction's next records may be opened in bulk (`open_run`): keyed,
        decrypting, past the handshake, nothing failed."""
        side = self._sides[direction]
        return (
            side.cipher is not None
            and self.facts.decrypted
            and side.failed == 0
            and not side.stopped
            and side.reader.failure is None
            and (side.handshake_done or not self._tls13)
        )

    def open_run(
        self,
        direction: Direction,
        data: bytes,
        sizes: list[int],
        timestamps: list[int],
        plain_starts: list[int],
        tcp_starts: list[int],
    ) -> tuple[int, bytes, list[int], int]:
        """`receive` of a run of packets joined in ``data`` (their ``sizes`` and times), while
        `takes_run`: the application data of the records they complete, opened in bulk
        (`pipeline.tls.bulk`). Returns (the plaintext offset of the first byte, the plaintext,
        its bytes by packet, the packets taken). When not all were taken, the record that stopped
        the run and the rest of its packet (the one after those taken) are held, for
        `receive(direction, ts, offset, b"")` with that packet's time to read them, and the
        packets after it go to `receive`."""
        side = self._sides[direction]
        cipher = side.cipher
        assert cipher is not None
        held, tcp_offset = side.reader.take()
        source = held + data if held else data
        start = side.plain_offset
        plaintext, plain_sizes, taken, consumed = self._bulk(
            cipher, source, len(held), sizes, tcp_offset, start, plain_starts, tcp_starts
        )
        if taken == len(sizes):
            read = len(source)
            last_ns = timestamps[-1]
        else:  # up to the end of the packet holding the record that stopped the run
            read = len(held) + sum(sizes[: taken + 1])
            last_ns = timestamps[taken]
        side.bulk_bytes += read - len(held)
        if last_ns > side.bulk_last_ns:  # packets come in capture order
            side.bulk_last_ns = last_ns
        side.reader.hold(source[consumed:read] if consumed < read else b"", tcp_offset + consumed)
        side.plain_offset += len(plaintext)
        return start, plaintext, plain_sizes, taken

    def receive_gap(
        self, direction: Direction, ts_ns: int, tcp_offset: int, size: int
    ) -> list[Event]:
        """Bytes lost to the capture: the records' boundaries are lost with them, so nothing
        more of this direction is decrypted."""
        side = self._sides[direction]
        if side.stopped:
            return []
        side.stopped = True
        detail = f"{size} bytes missing: the rest of this direction is not decrypted"
        return [TlsAnomaly(direction, ts_ns, tcp_offset, TLS_GAP, detail)]

    def finish(self) -> TlsFacts:
        facts = self.facts
        for direction, side in self._sides.items():
            if side.bulk_bytes:
                facts.saw(direction, side.bulk_last_ns, side.bulk_bytes)
                side.bulk_bytes = 0
        if not facts.decrypted and facts.not_decrypted_reason is None:
            facts.not_decrypted_reason = HANDSHAKE_NOT_SEEN if self._suite is None else NO_KEYS
        if facts.decrypted:
            facts.not_decrypted_reason = None
        return facts

    # ---- records ---------------------------------------------------------------------------

    def _record(
        self, direction: Direction, side: _Side, ts_ns: int, record: Record, events: list[Event]
    ) -> None:
        kind = record.content_type
        if kind == CHANGE_CIPHER_SPEC:
            if not self._tls13 and side.pending is not None:
                side.cipher, side.pending = side.pending, None
            return
        if side.cipher is None:
            if kind == HANDSHAKE:
                self._handshake(direction, side, ts_ns, record, events)
            elif kind == APPLICATION_DATA and self.facts.not_decrypted_reason is None:
                self.facts.not_decrypted_reason = (
                    HANDSHAKE_NOT_SEEN if self._suite is None else NO_KEYS
                )
            return
        if self._tls13 and kind != APPLICATION_DATA:
            return  # a plaintext alert, or the compatibility ChangeCipherSpec
        opened = self._open(direction, side, ts_ns, record, events)
        if opened is None:
            return
        inner, plain = opened
        if inner == APPLICATION_DATA and plain:
            events.append(Plaintext(direction, ts_ns, side.plain_offset, record.tcp_offset, plain))
            side.plain_offset += len(plain)
        elif inner == HANDSHAKE and self._tls13:
            for message in side.framer.feed(plain):
                if message.msg_type == FINISHED and not side.handshake_done:
                    self._rekey13(side, side.secret)
                    side.handshake_done = True
                elif message.msg_type == ENCRYPTED_EXTENSIONS and message.body is not None:
                    with contextlib.suppress(BadHandshake):
                        self.facts.alpn = parse_encrypted_extensions(message.body)
                elif message.msg_type == KEY_UPDATE and side.handshake_done and side.secret:
                    assert self._suite is not None
                    side.secret = next_secret13(self._suite, side.secret)
                    self._rekey13(side, side.secret)
        elif inner == ALERT:
            return

    def _open(
        self, direction: Direction, side: _Side, ts_ns: int, record: Record, events: list[Event]
    ) -> tuple[int, bytes] | None:
        cipher = side.cipher
        assert cipher is not None
        first = cipher.seq
        for seq in range(first, first + side.failed + 1):
            cipher.seq = seq
            try:
                opened = cipher.decrypt(record)
            except BadRecord:
                continue
            side.failed = 0
            self.facts.decrypted = True
            return opened
        cipher.seq = first
        side.failed += 1
        events.append(
            TlsAnomaly(
                direction,
                ts_ns,
                record.tcp_offset,
                TLS_BAD_RECORD,
                f"a {len(record.fragment)}-byte record does not authenticate",
            )  # fmt: skip
        )
        if side.failed >= MAX_FAILED_RECORDS:
            side.stopped = True
            if not self.facts.decrypted:
                self.facts.not_decrypted_reason = BAD_RECORD_MAC
        return None

    # ---- the handshake in the clear --------------------------------------------------------

    def _handshake(
        self, direction: Direction, side: _Side, ts_ns: int, record: Record, events: list[Event]
    ) -> None:
        for message in side.framer.feed(record.fragment):
            if message.body is None:
                continue
            try:
                if message.msg_type == CLIENT_HELLO and direction is Direction.C2S:
                    hello = parse_client_hello(message.body)
                    if self._random is None and self._keys(hello.random) is None:
                        detail = "no secrets for this ClientHello's random in the key logs"
                        events.append(
                            TlsAnomaly(direction, ts_ns, record.tcp_offset, TLS_NO_KEYS, detail)
                        )
                    self._random = hello.random
                    self.facts.server_name = hello.server_name
                elif message.msg_type == SERVER_HELLO and direction is Direction.S2C:
                    self._server_hello(message.body)
            except BadHandshake as error:
                detail = f"handshake message {message.msg_type}: {error}"
                events.append(
                    TlsAnomaly(direction, ts_ns, record.tcp_offset, TLS_BAD_HANDSHAKE, detail)
                )

    def _server_hello(self, body: bytes) -> None:
        hello = parse_server_hello(body)
        if hello.retry:
            return  # a second ClientHello and the real ServerHello follow
        facts = self.facts
        facts.version = version_name(hello.version)
        facts.cipher_suite = suite_name(hello.cipher_suite)
        facts.alpn = hello.alpn
        if self._random is None:
            facts.not_decrypted_reason = HANDSHAKE_NOT_SEEN
            return
        suite = SUITES.get(hello.cipher_suite)
        if (
            suite is None
            or hello.version not in (TLS12, TLS13)
            or suite.tls13 != (hello.version == TLS13)
        ):
            facts.not_decrypted_reason = UNSUPPORTED_CIPHER
            return
        self._suite = suite
        secrets = self._keys(self._random)
        if secrets is None:
            facts.not_decrypted_reason = NO_KEYS
            return
        self._etm = hello.encrypt_then_mac
        if suite.tls13:
            self._start13(suite, secrets)
        else:
            self._start12(suite, secrets, hello.random)

    def _start12(self, suite: CipherSuite, secrets: Secrets, server_random: bytes) -> None:
        if secrets.master_secret is None or self._random is None:
            self.facts.not_decrypted_reason = NO_KEYS
            return
        client, server = key_block12(suite, secrets.master_secret, self._random, server_random)
        for direction, (mac_key, key, iv) in ((Direction.C2S, client), (Direction.S2C, server)):
            self._sides[direction].pending = RecordCipher(
                suite, key, iv, mac_key, encrypt_then_mac=self._etm
            )

    def _start13(self, suite: CipherSuite, secrets: Secrets) -> None:
        self._tls13 = True
        keyed = (
            (Direction.C2S, secrets.client_handshake, secrets.client_traffic),
            (Direction.S2C, secrets.server_handshake, secrets.server_traffic),
        )
        if any(handshake is None or traffic is None for _, handshake, traffic in keyed):
            self.facts.not_decrypted_reason = NO_KEYS
            return
        for direction, handshake, traffic in keyed:
            side = self._sides[direction]
            side.secret = traffic
            self._rekey13(side, handshake)

    def _rekey13(self, side: _Side, secret: bytes | None) -> None:
        assert self._suite is not None and secret is not None
        key, iv = traffic_keys13(self._suite, secret)
        side.cipher = RecordCipher(self._suite, key, iv)
