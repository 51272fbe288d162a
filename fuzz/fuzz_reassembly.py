"""Fuzz TCP reassembly and the per-flow pass: any order, overlap, loss, cut or flag of segments.

The input is a list of 6-byte segment records on one 4-tuple (direction and flags, stream
position, length, bytes cut by the snapshot length, time step); payloads are taken from real
STOMP streams at that position, so retransmissions mostly repeat bytes and sometimes (a flag)
change them. Checked for every input: nothing raises; per connection and direction, Data and Gap
events tile the stream from offset 0 with no hole or overlap; the out-of-order buffer, the
retransmission history and the known holes stay within their bounds; the flow runner's rows
convert to the tables' Arrow schemas with every passcode masked; and stopping after any packet,
carrying a connection still open as pickled state and resuming gives the rows one pass gives.
"""

from __future__ import annotations

import atexit
import os
import struct
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from functools import cache

from hypothesis import strategies as st

from fuzz import harness
from fuzz.offline import assert_passcodes_masked
from fuzz.seeds import PASSCODE, stomp_streams
from pipeline.ingest.records import ACK, FIN, RST, SYN, TcpPacket
from pipeline.reassembly import Closed, Conflict, ConnectionTracker, Data, Gap, Opened, Segment
from pipeline.session.rows import TableRow
from pipeline.spark.arrow_rows import row_batch
from pipeline.spark.flows import STATE_KIND, FlowPassConfig, FlowRunner
from pipeline.spark.pieces import PieceBuilder
from tests.support.flow_rows import SunkRows

RECORD = struct.Struct("!BHBBB")
CLIENT = ("127.0.0.1", 40001)
SERVER = ("127.0.0.1", 61613)
ISN = {True: 0xFFFFFF00, False: 1000}  # the client's sequence numbers wrap
T0 = 1_700_000_000_000_000_000
MAX_PENDING = 512
HISTORY = 128
MAX_LEN = RECORD.size * 200


@cache
def _pools() -> tuple[bytes, bytes]:
    """A client stream and a server stream to cut payloads from."""
    streams = stomp_streams()
    client = b"".join(s for s in streams if s.startswith((b"CONNECT", b"STOMP")))
    server = b"".join(s for s in streams if s.startswith(b"CONNECTED"))
    login = b"CONNECT\naccept-version:1.2\nlogin:a\npasscode:" + PASSCODE.encode() + b"\n\n\x00"
    return login + client, server


@cache
def _scratch() -> str:
    handle, path = tempfile.mkstemp(prefix="fuzz-reassembly-", suffix=".bin")
    os.close(handle)
    atexit.register(os.unlink, path)
    return path


def packets(data: bytes) -> tuple[list[TcpPacket], bytes]:
    """The segments an input describes, and the file holding their payloads."""
    pools = _pools()
    out: list[TcpPacket] = []
    blob = bytearray()
    ts = T0
    for at in range(0, len(data) - RECORD.size + 1, RECORD.size):
        bits, position, size, cut, step = RECORD.unpack_from(data, at)
        from_client = bool(bits & 1)
        flags = (bits >> 1) & (SYN | FIN | RST) | (ACK if bits & 0x10 else 0)
        pool = pools[0 if from_client else 1]
        payload = pool[position : position + size]
        if bits & 0x20:
            payload = bytes(b ^ 0xFF for b in payload)
        wire = len(payload) + (cut if bits & 0x40 else 0)
        seq = (ISN[from_client] + position + (1 << 30 if bits & 0x80 else 0)) & 0xFFFFFFFF
        src, dst = (CLIENT, SERVER) if from_client else (SERVER, CLIENT)
        ts += step * 1_000_000
        out.append(
            TcpPacket(
                ts, src[0], src[1], dst[0], dst[1], seq, 0, flags, 65535,
                len(blob), len(payload), wire, at,
            )
        )  # fmt: skip
        blob += payload
    return out, bytes(blob)


def check_tracker(items: list[TcpPacket], blob: bytes) -> None:
    tracker = ConnectionTracker(
        broker_ports=(61613,), max_pending_bytes=MAX_PENDING, history_bytes=HISTORY
    )
    reached: dict[tuple[int, bool], int] = {}  # (connection number, from client) -> offset
    events = []
    for packet in items:
        payload = blob[packet.payload_offset : packet.payload_offset + packet.payload_len]
        events += tracker.add(packet, payload)
        for from_client in (True, False):
            stream = tracker.stream(from_client)
            if stream is None:
                continue
            assert stream.pending_bytes <= MAX_PENDING
            assert len(stream._history) <= 2 * HISTORY + 255  # noqa: SLF001 - bounds are the point
            assert stream._history.held <= 4 * HISTORY + 255  # noqa: SLF001
            assert len(stream._holes) <= len(items)  # noqa: SLF001
    events += tracker.flush()
    opened = closed = 0
    ids: set[str] = set()
    for event in events:
        if type(event) is Opened:
            opened += 1
            ids.add(event.connection.connection_id)
        elif type(event) is Closed:
            closed += 1
        else:
            # A connection's segments come before its Closed.
            assert type(event) is Segment, event
            key = (closed, event.from_client)
            inner = event.event
            if type(inner) is Conflict:
                assert inner.offset >= 0 and inner.size > 0, inner
                continue
            assert reached.get(key, 0) == inner.offset, (reached.get(key), inner)
            if type(inner) is Data:
                assert inner.data, inner
                reached[key] = inner.offset + len(inner.data)
            else:
                assert type(inner) is Gap and inner.size > 0, inner
                reached[key] = inner.offset + inner.size
    assert opened == closed
    assert len(ids) == opened, "two connections of the 4-tuple share an id"


def run_flows(
    items: list[TcpPacket],
    path: str,
    close_open: bool,
    carried: Sequence[dict] = (),
    convert: bool = True,
) -> tuple[dict, list[dict]]:
    """Table rows (by table) and state rows of the flow runner over carried states, then the
    packets as one flow piece; ``convert``: the rows are converted to Arrow as the pass's
    writer converts them (rows found equal to converted ones need not be)."""
    held = SunkRows()
    runner = FlowRunner(FlowPassConfig((path,), close_open=close_open), held)
    for row in carried:  # a row at a time, as the state rows come through Spark
        for chunk in row["state"].chunks():
            runner.resume(row["flow_key"], chunk)
    builder = PieceBuilder(0)
    for packet in items:
        builder.add(packet)
    for piece in builder.pieces():
        runner.feed_piece(piece)
    runner.close()
    tables: dict[str, list[TableRow]] = {}
    states: list[dict] = []
    for kind, produced, keys in held.items():
        if kind == STATE_KIND:
            states += [
                {"record_type": "state", "flow_key": k, "state": r["state"]}
                for r, k in zip(produced, keys, strict=True)
            ]
        else:
            if convert:
                row_batch(kind, produced)  # raises where the pass's Parquet writer would
            tables.setdefault(kind, []).extend(produced)
    return tables, states


def same_rows(one: dict, other: dict) -> bool:
    """Whether two runs gave the same rows of every table, in any order (compared as they
    are first: the order is mostly the same)."""
    if one == other:
        return True
    return _canonical(one) == _canonical(other)


def _canonical(tables: dict) -> Counter:
    return Counter(
        (table, repr(sorted(row.items()))) for table, rows in tables.items() for row in rows
    )


def check(data: bytes) -> None:
    items, blob = packets(data)
    check_tracker(items, blob)
    path = _scratch()
    with open(path, "wb") as handle:
        handle.write(blob)
    whole, states = run_flows(items, path, close_open=True)
    assert not states
    assert_passcodes_masked(whole)
    if not items:
        return
    cut = data[-1] % (len(items) + 1)
    first, states = run_flows(items[:cut], path, close_open=False, convert=False)
    if not states:  # closed at the cut: finished there (later packets start a new connection)
        for table, produced in first.items():
            row_batch(table, produced)
        return
    second, left = run_flows(items[cut:], path, close_open=True, carried=states, convert=False)
    assert not left
    for table, produced in first.items():
        second.setdefault(table, []).extend(produced)
    assert same_rows(second, whole), "carrying state changed the rows"


def seeds() -> list[bytes]:
    """An orderly exchange, then the same with loss, reordering, duplicates and cuts."""
    client, server = _pools()
    syn, syn_ack, fin, ack = 0x04, 0x04 | 0x10, 0x02 | 0x10, 0x10  # flag bits of a record
    orderly = bytearray(RECORD.pack(syn | 1, 0, 0, 0, 1) + RECORD.pack(syn_ack, 0, 0, 0, 1))
    position = {True: 1, False: 1}
    for turn in range(40):
        from_client = turn % 2 == 0
        pool = client if from_client else server
        size = min(200, max(0, len(pool) - position[from_client]))
        orderly += RECORD.pack(ack | from_client, position[from_client], size, 0, 1)
        position[from_client] += size
    orderly += RECORD.pack(fin | 1, position[True], 0, 0, 1)
    orderly += RECORD.pack(fin, position[False], 0, 0, 1)
    seeds = [bytes(orderly)]
    records = [orderly[i : i + RECORD.size] for i in range(0, len(orderly), RECORD.size)]
    seeds.append(b"".join(records[::-1]))  # reversed
    seeds.append(b"".join(r for n, r in enumerate(records) if n % 7 != 3))  # losses
    seeds.append(b"".join(records + records[5:15]))  # retransmissions
    seeds.append(b"".join(bytes([r[0] | 0x40]) + r[1:4] + b"\x40" + r[5:] for r in records))
    seeds.append(b"".join(records[2:-2]))  # mid-stream, never closed
    return seeds


def strategy() -> st.SearchStrategy[bytes]:
    record = st.tuples(
        st.integers(0, 255), st.integers(0, 4000), st.integers(0, 255),
        st.integers(0, 255), st.integers(0, 255),
    ).map(lambda fields: RECORD.pack(*fields))  # fmt: skip
    return st.one_of(harness.mutated(seeds()), st.lists(record, max_size=60).map(b"".join))


if __name__ == "__main__":
    sys.exit(harness.main(sys.modules[__name__]))
