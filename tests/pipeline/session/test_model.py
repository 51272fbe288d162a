from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime

import pytest
import stomp
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.compiled import PURE_PYTHON_VARIABLE
from pipeline.session import ModelOptions, SessionModel
from pipeline.session.frame_rows import TableRows
from pipeline.session.rows import TableRow
from pipeline.session.streams import DirectionStream
from pipeline.stomp import encode_frame
from schemas import TABLES, load
from tests.pipeline.session.conversation import (
    CLIENT,
    MS,
    SERVER,
    T0,
    Conversation,
    RecordingRelay,
    model_of,
    only,
    replay,
)
from tests.support.brokers import Broker, activemq, rabbitmq  # noqa: F401 - fixtures
from tests.support.scripts import REPO

# ---- frames: timing and indexing -------------------------------------------------------------


def test_frame_times_come_from_the_chunks_holding_first_byte_and_nul() -> None:
    talk = Conversation()
    talk.handshake()
    frame = encode_frame("SEND", [("destination", "/q")], b"x" * 100)
    talk.data("c2s", 10, frame[:30])
    talk.data("c2s", 12, frame[30:80])
    talk.data("c2s", 15, frame[80:])
    rows = talk.finish(20)
    send = only(rows["frames"], command="SEND")[0]
    assert send["ts_ns"] == T0 + 10 * MS and send["ts_end_ns"] == T0 + 15 * MS
    assert send["ts"] == datetime(2023, 11, 14, 22, 13, 20, 10000, tzinfo=UTC)
    assert send["date"] == date(2023, 11, 14)
    assert send["frame_length"] == len(frame) and send["body_length"] == 100
    assert send["content_length"] == 100
    connect = only(rows["frames"], command="CONNECT")[0]
    assert send["stream_offset"] == connect["frame_length"]
    assert [f["frame_index"] for f in rows["frames"]] == [0, 1, 2]
    assert [f["direction"] for f in rows["frames"]] == ["c2s", "s2c", "c2s"]


def test_frames_keep_repeated_headers_in_wire_order_and_first_value_in_map() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(2, "0")
    talk.message(5, "0", "m1", extra=[("color", "red"), ("color", "blue"), ("x-app", "7")])
    rows = talk.finish(10)
    frame = only(rows["frames"], command="MESSAGE")[0]
    assert frame["headers"]["color"] == "red"
    assert [v for n, v in frame["header_list"] if n == "color"] == ["red", "blue"]
    message = rows["messages"][0]
    assert message["user_headers"] == {"color": "red", "x-app": "7"}


# ---- heart-beats ------------------------------------------------------------------------------


def test_eol_after_nul_in_same_chunk_is_not_a_heartbeat_but_a_later_one_is() -> None:
    talk = Conversation()
    talk.handshake(client_hb="0,1000", server_hb="1000,0")  # s2c beats every 1000 ms
    talk.server(100, "RECEIPT", [("receipt-id", "x")], trailer=b"\n")  # trailer, same chunk
    talk.server(200, "RECEIPT", [("receipt-id", "y")], trailer=b"")
    talk.data("s2c", 700, b"\n")  # follows the NUL, but in a later packet: a beat
    talk.data("s2c", 1900, b"\n")
    talk.data("s2c", 1900.5, b"\r\n")
    rows = talk.finish(2000)
    beats = rows["heartbeats"]
    assert [b["ts_ns"] for b in beats] == [T0 + 700 * MS, T0 + 1900 * MS, T0 + int(1900.5 * MS)]
    assert [b["gap_ms"] for b in beats] == [500.0, 1200.0, 0.5]
    assert all(b["expected_ms"] == 1000 for b in beats)
    assert beats[1]["lateness_ms"] == 200.0
    assert (beats[1]["late_1x"], beats[1]["late_1_5x"], beats[1]["late_2x"]) == (
        True,
        False,
        False,
    )
    assert beats[0]["late_1x"] is False
    assert rows["sessions"][0]["s2c_heartbeats"] == 3
    assert rows["sessions"][0]["c2s_heartbeats"] == 0


def test_trailing_eol_in_a_later_segment_is_no_heartbeat_without_heart_beating() -> None:
    # Flow control: the broker's NUL ends one segment, its LF starts the next, 300 ms later.
    talk = Conversation()
    talk.handshake(client_hb="0,0", server_hb="0,0")
    receipt = encode_frame("RECEIPT", [("receipt-id", "x")], b"")
    talk.data("s2c", 100, receipt)
    talk.data("s2c", 400, b"\n" + encode_frame("RECEIPT", [("receipt-id", "y")], b""))
    talk.data("s2c", 900, b"\n")
    talk.data("s2c", 1500, b"\r\n\n")  # any number of EOLs may follow a NUL
    rows = talk.finish(2000)
    assert rows["heartbeats"] == []
    assert rows["sessions"][0]["s2c_heartbeats"] == 0
    assert [f["command"] for f in only(rows["frames"], direction="s2c")] == [
        "CONNECTED",
        "RECEIPT",
        "RECEIPT",
    ]


def test_trailing_eol_with_heart_beating_is_told_from_a_beat_by_its_delay() -> None:
    talk = Conversation()
    talk.handshake(client_hb="0,1000", server_hb="1000,0")  # s2c beats every 1000 ms
    talk.server(100, "RECEIPT", [("receipt-id", "x")], trailer=b"")
    talk.data("s2c", 150, b"\n")  # 50 ms after the NUL: its trailing EOL, delayed
    talk.data("s2c", 160, b"\n")  # still directly after the NUL, 10 ms later: trailing too
    talk.data("s2c", 900, b"\n")  # 740 ms of silence: a beat (sent at half the interval or more)
    talk.server(1000, "RECEIPT", [("receipt-id", "y")], trailer=b"")
    talk.data("s2c", 1499, b"\n")  # 499 ms: under half the interval, trails the frame
    talk.data("s2c", 2100, b"\n")  # 601 ms after the previous byte: a beat
    rows = talk.finish(2200)
    beats = rows["heartbeats"]
    assert [b["ts_ns"] for b in beats] == [T0 + 900 * MS, T0 + 2100 * MS]
    assert [b["gap_ms"] for b in beats] == [740.0, 601.0]
    assert rows["sessions"][0]["s2c_heartbeats"] == 2


@pytest.mark.parametrize("split", range(1, 12))
def test_segmentation_never_turns_a_trailing_eol_into_a_beat(split: int) -> None:
    """The same bytes cut at every point, each piece 200 ms after the previous one."""
    frames = b"".join(
        encode_frame("MESSAGE", [("subscription", "0"), ("message-id", f"m{n}")], b"x") + b"\n"
        for n in range(3)
    )
    talk = Conversation()
    talk.handshake(client_hb="0,0", server_hb="0,0")
    talk.subscribe(1, "0")
    pieces = [frames[i : i + split] for i in range(0, len(frames), split)]
    for n, piece in enumerate(pieces):
        talk.data("s2c", 10 + 200 * n, piece)
    rows = talk.finish(10 + 200 * len(pieces))
    assert rows["heartbeats"] == []
    assert len(only(rows["frames"], command="MESSAGE")) == 3


def test_heartbeat_lateness_thresholds_on_synthetic_timing() -> None:
    talk = Conversation(ModelOptions(late_thresholds=(1.0, 1.5, 2.0)))
    talk.handshake(client_hb="2000,0", server_hb="0,2000")  # c2s every 2000 ms
    now = 0.0  # the CONNECT: the last client byte before the first beat
    expected = []
    for gap in (1900, 2100, 3100, 4100):
        now += gap
        talk.data("c2s", now, b"\n")
        expected.append((gap > 2000, gap > 3000, gap > 4000))
    rows = talk.finish(now + 1)
    beats = rows["heartbeats"]
    assert [b["gap_ms"] for b in beats] == [1900.0, 2100.0, 3100.0, 4100.0]
    assert [(b["late_1x"], b["late_1_5x"], b["late_2x"]) for b in beats] == expected
    assert [b["lateness_ms"] for b in beats] == [-100.0, 100.0, 1100.0, 2100.0]


def test_beats_without_negotiated_interval_are_recorded_without_lateness() -> None:
    talk = Conversation()
    talk.data("c2s", 10, b"\n")  # EOLs before any frame: nothing for them to trail
    talk.data("c2s", 50, b"\n")
    talk.handshake(60)
    beat = talk.finish(70)["heartbeats"][1]
    assert beat["expected_ms"] is None and beat["lateness_ms"] is None
    assert beat["late_1x"] is None and beat["gap_ms"] == 40.0


def test_without_heart_beating_an_eol_after_a_nul_trails_the_frame_however_late() -> None:
    talk = Conversation()
    talk.handshake()  # no heart-beat headers: no beats either way
    talk.data("c2s", 50, b"\n")
    assert talk.finish(60)["heartbeats"] == []


# ---- bad input becomes anomalies ---------------------------------------------------------------


def test_gaps_conflicts_and_framing_problems_are_recorded_and_decoding_goes_on() -> None:
    talk = Conversation()
    talk.handshake()
    frame = encode_frame("SEND", [("destination", "/q")], b"abcdef")
    talk.data("c2s", 10, frame[:20], ("cap.pcap", 1000))
    talk.gap("c2s", 11, 5)  # the rest of that frame is lost
    talk.data("c2s", 12, frame[25:] + encode_frame("SEND", [("destination", "/r")], b"ok"))
    talk.conflict("c2s", 13, 3, 4)
    talk.data("s2c", 14, b"\x00\x00", ("cap.pcap", 2000))  # stray NULs
    rows = talk.finish(20)
    anomalies = {a["kind"]: a for a in rows["anomalies"]}
    assert anomalies["gap"]["source"] == "tcp" and anomalies["gap"]["detail"]
    assert anomalies["conflict"]["stream_offset"] == 3
    assert anomalies["frame_cut_by_gap"]["source"] == "stomp"
    assert anomalies["frame_cut_by_gap"]["file"] == "cap.pcap"
    assert anomalies["frame_cut_by_gap"]["file_offset"] == 1000
    assert anomalies["stray_nul"]["file_offset"] == 2000
    assert anomalies["stray_nul"]["direction"] == "s2c"
    sends = only(rows["messages"], command="SEND")
    assert [s["destination"] for s in sends] == ["/r"]  # resynced after the gap
    session = rows["sessions"][0]
    assert session["gap_bytes"] == 5 and session["conflict_bytes"] == 4
    assert session["violations"] == sum(a["source"] == "stomp" for a in rows["anomalies"])
    assert all(a["session_id"] == "s1" and a["ts"] is not None for a in rows["anomalies"])


def test_unannounced_holes_and_repeated_bytes_are_handled() -> None:
    model = SessionModel("s1", CLIENT, SERVER)
    one = encode_frame("SEND", [("destination", "/a")], b"1")
    two = encode_frame("SEND", [("destination", "/b")], b"2")
    model.on_data("c2s", T0, 0, one)
    model.on_data("c2s", T0 + MS, 0, one + two)  # the first frame again, then new bytes
    model.on_data("c2s", T0 + 2 * MS, len(one + two) + 10, two)  # 10 bytes never seen
    model.finish(T0 + 3 * MS)
    rows = model.drain()
    assert [m["destination"] for m in rows["messages"]] == ["/a", "/b", "/b"]
    assert sorted(a["kind"] for a in rows["anomalies"]) == ["gap", "overlap"]
    assert rows["sessions"][0]["gap_bytes"] == 10


def test_truncated_frame_at_close_is_reported() -> None:
    talk = Conversation()
    talk.handshake()
    talk.data("c2s", 5, b"SEND\ndestination:/q\n\nhal")
    talk.close("c2s", 6)
    rows = talk.finish(7)
    assert [a["kind"] for a in rows["anomalies"]] == ["truncated_frame"]
    assert rows["sessions"][0]["end_reason"] == "fin"


def test_data_after_finish_is_ignored_and_reported() -> None:
    model = SessionModel("s1", CLIENT, SERVER)
    model.finish(T0)
    model.on_data("c2s", T0 + MS, 0, b"SEND\n\n\x00")
    rows = model.drain()
    assert len(rows["sessions"]) == 1 and rows["frames"] == []
    assert [a["kind"] for a in rows["anomalies"]] == ["data_after_finish"]
    model.finish(T0 + 2 * MS)
    assert model.drain()["sessions"] == []


# ---- a rich session: every table, schema conformance, resume after pickling ----------------


def _rich_session(options: ModelOptions | None = None) -> Conversation:
    talk = Conversation(options or ModelOptions("preview", 8, b"k"))
    talk.handshake(client_hb="1000,1000", server_hb="1000,1000")
    talk.subscribe(5, "0", "client")
    talk.subscribe(6, "1", "client-individual", dest="/queue/b")
    for n in range(6):
        talk.message(10 + n, "0", f"m{n}", ack=f"a{n}", body=b"body %d" % n)
        talk.message(10.5 + n, "1", f"b{n}", ack=f"b{n}", dest="/queue/b")
    talk.data("c2s", 900, b"\n")
    talk.data("s2c", 950, b"\n")
    split = encode_frame("SEND", [("destination", "/split"), ("x-k", "v")], b"s" * 50)
    for n, piece in enumerate((split[:7], split[7:40], split[40:])):
        talk.data("c2s", 960 + n, piece, ("cap.pcap", 5000 + n * 100))
    talk.client(1000, "ACK", [("id", "a2")])
    talk.client(1001, "NACK", [("id", "b1")])
    talk.client(1002, "BEGIN", [("transaction", "t1")])
    talk.client(1003, "ACK", [("id", "a4"), ("transaction", "t1")])
    talk.client(1004, "SEND", [("destination", "/out"), ("transaction", "t1")], b"reply")
    talk.client(1005, "COMMIT", [("transaction", "t1"), ("receipt", "c1")])
    talk.server(1006, "RECEIPT", [("receipt-id", "c1")])
    talk.client(1007, "BEGIN", [("transaction", "t2")])
    talk.client(1008, "ACK", [("id", "b2"), ("transaction", "t2")])
    talk.client(1009, "ABORT", [("transaction", "t2")])
    talk.client(1010, "UNSUBSCRIBE", [("id", "1")])
    talk.client(1011, "SEND", [("receipt", "lost")], b"no destination")
    talk.server(1012, "ERROR", [("message", "no destination")], b"long error body")
    talk.gap("s2c", 1013, 7)
    talk.conflict("c2s", 1014, 0, 3)
    talk.data("c2s", 1015, b"\x00")
    talk.client(1016, "DISCONNECT", [("receipt", "bye")])
    talk.server(1017, "RECEIPT", [("receipt-id", "bye")])
    talk.close("s2c", 1018)
    talk.close("c2s", 1019)
    talk.finish(1020)
    return talk


def test_rich_session_fills_every_table_with_schema_conformant_rows() -> None:
    rows = _rich_session().rows
    for table in TABLES:
        if table == "websocket_controls":  # WebSocket only: tests/pipeline/websocket
            assert rows[table] == []
            continue
        assert rows[table], f"no {table} rows"
        schema = load(table)
        with_batch = [{**row, "batch_id": "b-1"} for row in rows[table]]
        arrow = schema.arrow_table(with_batch)  # exact keys, types and nullability
        assert arrow.num_rows == len(rows[table])
    session = rows["sessions"][0]
    assert session["end_reason"] == "disconnect_receipt"
    assert session["c2s_frames"] + session["s2c_frames"] == len(rows["frames"])
    assert session["messages_delivered"] == 12
    assert len(only(rows["messages"], command="MESSAGE")) == 12


@pytest.mark.parametrize("every", [1, 2, 5])
def test_pickling_mid_session_and_resuming_gives_the_same_rows(every: int) -> None:
    talk = _rich_session()
    fresh = SessionModel("s1", CLIENT, SERVER, talk.model.options)
    _, resumed = replay(talk.script, fresh, pickle_every=every)
    assert resumed == talk.rows


# The first half of `_rich_session` in a run of its own, the model carried out as a pickle.
_FIRST_HALF = """
import pickle, sys
from tests.pipeline.session.conversation import CLIENT, SERVER, replay
from tests.pipeline.session.test_model import _rich_session
from pipeline.session import SessionModel
talk = _rich_session()
fresh = SessionModel("s1", CLIENT, SERVER, talk.model.options)
sys.stdout.buffer.write(pickle.dumps(replay(talk.script[: len(talk.script) // 2], fresh)))
"""


@pytest.mark.parametrize("carried_by", ["pure_python", "compiled"])
def test_a_model_carried_by_either_implementation_resumes_in_this_one(carried_by: str) -> None:
    """A connection carried by a pure-Python run resumes in a compiled one and the other way
    round: the model pickles alike in both, and its streams are this run's own classes (the
    compiled model reads them typed)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(PURE_PYTHON_VARIABLE, None)
    if carried_by == "pure_python":
        env[PURE_PYTHON_VARIABLE] = "1"
    child = [sys.executable, "-c", _FIRST_HALF]
    done = subprocess.run(child, cwd=REPO, env=env, capture_output=True, check=True)
    saved, first_rows = pickle.loads(done.stdout)
    talk = _rich_session()
    resumed, rest = replay(talk.script[len(talk.script) // 2 :], saved)
    assert {type(s) for s in resumed._streams.values()} == {DirectionStream}
    assert {name: first_rows[name] + rest[name] for name in TABLES} == talk.rows


def test_pickled_model_carries_undecoded_tail_and_unacked_deliveries() -> None:
    talk = Conversation()
    talk.handshake()
    talk.subscribe(5, "0", "client")
    talk.message(10, "0", "m1", ack="a1")
    frame = encode_frame("ACK", [("id", "a1")])
    talk.data("c2s", 20, frame[:5])  # half an ACK at the end of a run
    model = pickle.loads(pickle.dumps(talk.model))
    model.on_data("c2s", T0 + 30 * MS, talk.offsets["c2s"], frame[5:])
    model.finish(T0 + 40 * MS)
    rows = model.drain()
    ack = rows["acks"][0]
    assert ack["ts_ns"] == T0 + 20 * MS  # first byte came in the earlier run
    assert ack["acked_message_count"] == 1
    assert rows["messages"][0]["ack_latency_ms"] == 10.0


# ---- properties: chunking does not matter, bad input never crashes ---------------------------

_PLAIN = _rich_session()


def _without_beats(rows: Mapping[str, TableRows]) -> dict[str, TableRows]:
    kept = {name: table for name, table in rows.items() if name != "heartbeats"}
    ignored = ("c2s_heartbeats", "s2c_heartbeats")
    kept["sessions"] = [{k: v for k, v in r.items() if k not in ignored} for r in rows["sessions"]]
    return kept


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_any_split_of_the_same_packets_gives_the_same_rows(data: st.DataObject) -> None:
    model = SessionModel("s1", CLIENT, SERVER, _PLAIN.model.options)
    for method, args in _PLAIN.script:
        if method != "on_data" or len(args[3]) < 2:
            getattr(model, method)(*args)
            continue
        direction, ts_ns, offset, payload, source = args
        cuts = data.draw(st.sets(st.integers(1, len(payload) - 1), max_size=3))
        bounds = [0, *sorted(cuts), len(payload)]
        for start, end in zip(bounds, bounds[1:], strict=False):
            model.on_data(direction, ts_ns, offset + start, payload[start:end], source)
    # an EOL split from its NUL becomes a heart-beat, so beats may differ; nothing else may
    assert _without_beats(model.drain()) == _without_beats(_PLAIN.rows)


_PIECES = [
    encode_frame("CONNECT", [("accept-version", "1.2"), ("passcode", "pw-123456")]),
    b"CONNECTED\nversion:1.2\nheart-beat:10,10\n\n\x00\n",
    encode_frame("SUBSCRIBE", [("id", "0"), ("destination", "/q"), ("ack", "client")]),
    encode_frame("MESSAGE", [("subscription", "0"), ("message-id", "m"), ("ack", "a")], b"b"),
    encode_frame("ACK", [("id", "a"), ("transaction", "t")]),
    encode_frame("BEGIN", [("transaction", "t")]),
    encode_frame("COMMIT", [("transaction", "t"), ("receipt", "r")]),
    encode_frame("RECEIPT", [("receipt-id", "r")]),
    encode_frame("ERROR", [("message", "m"), ("receipt-id", "zz")], b"trace"),
    encode_frame("DISCONNECT", [("receipt", "r")]),
    b"\n",
    b"\r\n",
    b"\x00",
    b"SEND\ncontent-length:99\n\nshort\x00",
]
_STEP = st.tuples(
    st.sampled_from(["c2s", "s2c"]),
    st.sampled_from(["data", "data", "data", "gap", "conflict", "close"]),
    st.one_of(st.sampled_from(_PIECES), st.binary(max_size=40)),
    st.integers(0, 5),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_STEP, max_size=25), st.booleans())
def test_arbitrary_input_never_crashes_and_rows_fit_the_schemas(
    steps: list[tuple[str, str, bytes, int]], mid_stream: bool
) -> None:
    model = SessionModel("s1", CLIENT, SERVER, ModelOptions("preview", 4), mid_stream=mid_stream)
    offsets = {"c2s": 0, "s2c": 0}
    ts = T0
    for direction, action, payload, cut in steps:
        ts += MS
        if action == "data":
            piece = payload[cut:] if cut < len(payload) else payload
            model.on_data(direction, ts, offsets[direction], piece, ("f.pcap", 0))
            offsets[direction] += len(piece)
        elif action == "gap":
            model.on_gap(direction, ts, offsets[direction], cut + 1)
            offsets[direction] += cut + 1
        elif action == "conflict":
            model.on_conflict(direction, ts, 0, cut)
        else:
            model.on_close(direction, ts, "fin" if cut % 2 else "rst")
    model.finish(ts + MS, "capture_end")
    rows = model.drain()
    assert len(rows["sessions"]) == 1
    for table in TABLES:
        load(table).arrow_table([{**row, "batch_id": "b"} for row in rows[table]])
    assert "pw-123456" not in repr(rows)


# ---- real brokers, real client: traffic recorded by a loopback relay ---------------------------


class _Inbox(stomp.ConnectionListener):
    def __init__(self, expected: int) -> None:
        self.frames: list[stomp.utils.Frame] = []
        self.expected = expected
        self.full = threading.Event()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        self.frames.append(frame)
        if len(self.frames) >= self.expected:
            self.full.set()


def _trailer_offsets(events: list[tuple[str, int, bytes | str]], direction: str) -> set[int]:
    """Stream offsets of LFs that follow a NUL inside the same recorded chunk."""
    offsets: set[int] = set()
    position = 0
    for chunk_direction, _, data in events:
        if chunk_direction != direction or data == "close":
            continue
        offsets.update(position + i + 1 for i in range(len(data) - 1) if data[i : i + 2] == b"\0\n")
        position += len(data)
    return offsets


@pytest.mark.broker
@pytest.mark.parametrize("kind", ["activemq", "rabbitmq"])
def test_real_broker_session(kind: str, request: pytest.FixtureRequest) -> None:
    broker: Broker = request.getfixturevalue(kind)
    relay = RecordingRelay(broker.address)
    inbox = _Inbox(3)
    destination = f"/queue/stomp-lake-session-{uuid.uuid4().hex[:8]}"
    conn = stomp.Connection12(
        [relay.address], heartbeats=(300, 300), vhost=broker.vhost or broker.host
    )
    conn.set_listener("inbox", inbox)
    conn.connect(broker.login, broker.passcode, wait=True)
    conn.subscribe(destination, id="1", ack="client")
    for n in range(3):
        conn.send(destination, f"m{n}")
    assert inbox.full.wait(10), "broker did not deliver"
    conn.ack(inbox.frames[-1].headers["ack"])  # client mode: covers all three
    conn.begin("tx-1")
    conn.send(destination + ".out", "discarded", transaction="tx-1")
    conn.abort("tx-1")
    time.sleep(2.2)  # heart-beats both ways (RabbitMQ asks for 1000 ms at least)
    conn.disconnect(receipt="bye")
    events = relay.wait()
    rows = model_of(events, ModelOptions(login_hash_key=None))

    session = rows["sessions"][0]
    assert session["version"] == "1.2"
    assert session["login"] == broker.login
    assert session["end_reason"] == "disconnect_receipt"
    assert session["violations"] == 0, rows["anomalies"]
    assert session["heartbeat_c2s_ms"] >= 300 and session["heartbeat_s2c_ms"] >= 300
    (connect,) = [f for f in rows["frames"] if f["command"] in ("CONNECT", "STOMP")]
    assert connect["headers"]["passcode"] == "***"
    delivered = only(rows["messages"], command="MESSAGE")
    assert len(delivered) == 3 and all(m["ack_outcome"] == "ACK" for m in delivered)
    (ack,) = rows["acks"]
    assert ack["acked_message_count"] == 3 and ack["ack_mode"] == "client"
    assert {m["acked_at_ns"] for m in delivered} == {ack["ts_ns"]}
    sends = only(rows["messages"], command="SEND")
    assert sorted(str(s["transaction_outcome"]) for s in sends) == ["None"] * 3 + ["aborted"]
    assert [t["outcome"] for t in rows["transactions"]] == ["aborted"]
    beats = rows["heartbeats"]
    assert only(beats, direction="c2s") and only(beats, direction="s2c")
    assert all(b["expected_ms"] for b in beats)
    trailers = _trailer_offsets(events, "s2c")
    assert trailers, "brokers end frames with NUL + LF"
    assert not trailers & {b["stream_offset"] for b in only(beats, direction="s2c")}


def test_a_passcode_line_read_as_a_command_is_masked() -> None:
    # A NUL inside the CONNECT's header block ends that frame early; the passcode line after it
    # is then read as the command line of an unknown frame.
    c = Conversation()
    c.data("c2s", 0, b"CONNECT\naccept-version:1.2\nlogin:alice\n\x00passcode:hunter22\n\n\x00")
    rows = c.finish(5, "capture_end")
    commands = [f["command"] for f in rows["frames"]]
    assert commands == ["CONNECT", "passcode:***"]
    assert not any("hunter22" in a["detail"] for a in rows["anomalies"])
    assert {"unknown_command", "missing_blank_line"} <= {a["kind"] for a in rows["anomalies"]}


def test_gaps_and_conflicts_name_the_packet_that_revealed_them() -> None:
    model = SessionModel("s1", CLIENT, SERVER)
    frame = encode_frame("SEND", [("destination", "/q")], b"x")
    model.on_data("c2s", T0, 0, frame, ("a.pcap", 24))
    model.on_gap("c2s", T0 + MS, len(frame), 10, ("a.pcap", 300))
    model.on_conflict("c2s", T0 + 2 * MS, 0, 2, ("b.pcap", 96))
    model.on_gap("s2c", T0 + 3 * MS, 0, 5)  # from the end of the input: no packet
    model.finish(T0 + 4 * MS)
    rows = model.drain()["anomalies"]
    located = [(r["kind"], r["file"], r["file_offset"]) for r in rows]
    assert located == [
        ("gap", "a.pcap", 300),
        ("conflict", "b.pcap", 96),
        ("gap", None, None),
    ]


def test_a_passcode_header_in_any_case_on_any_frame_is_masked() -> None:
    c = Conversation()
    c.handshake()
    c.client(5, "SEND", [("destination", "/q"), ("Passcode", "leaked-1234")], b"x")
    rows = c.finish(9, "capture_end")
    (send,) = [f for f in rows["frames"] if f["command"] == "SEND"]
    assert ("Passcode", "***") in send["header_list"]
    assert "leaked-1234" not in repr(rows)


def test_real_back_pressure_capture_has_no_beats_on_a_heart_beat_0_0_session() -> None:
    """A consumer with a 2 KiB receive buffer reading slowly (tests/data/captures/
    rabbitmq-back-pressure.pcap, scripts/make_websocket_captures.py --only back-pressure):
    zero windows, broker segments cut anywhere, heart-beat:0,0 both ways: every EOL after a
    NUL trails its frame, so no heart-beat rows at all."""
    import json
    from pathlib import Path

    from pipeline.reassembly import Data, Segment
    from tests.support.local_reassembly import LocalReassembly

    folder = Path(__file__).resolve().parents[2] / "data" / "captures"
    record = json.loads((folder / "rabbitmq-back-pressure.record.json").read_text())
    (consumer,) = record["connections"]
    models: dict[str, SessionModel] = {}
    for event in LocalReassembly([str(folder / "rabbitmq-back-pressure.pcap")]):
        if type(event) is Segment and type(event.event) is Data:
            model = models.setdefault(event.connection_id, SessionModel("s", CLIENT, SERVER))
            data = event.event
            direction = "c2s" if event.from_client else "s2c"
            model.on_data(direction, data.ts_ns, data.offset, data.data)
    sessions = []
    for model in models.values():
        model.finish(T0 * 2)
        sessions.append(model.drain())
    slow = max(sessions, key=lambda rows: len(rows["frames"]))
    delivered = [f for f in slow["frames"] if f["command"] == "MESSAGE"]
    assert len(delivered) == consumer["messages_received"] == 300
    assert slow["sessions"][0]["heartbeat_s2c_ms"] == 0  # heart-beat:0,0 negotiated
    assert slow["heartbeats"] == []
    assert all(rows["heartbeats"] == [] for rows in sessions)


def test_real_capture_with_a_trailing_lf_in_the_segment_after_its_nul() -> None:
    """A consumer with a 2 KiB receive buffer and an 88-byte MSS reading slowly, bodies of 1..97
    bytes (tests/data/captures/rabbitmq-nul-lf-split.pcap, scripts/make_websocket_captures.py
    --only nul-lf-split): under a full window RabbitMQ sends whole MSS multiples, and one of its
    segments ends in a frame's NUL while the LF comes in the next, ms later, once the window
    opens. heart-beat:0,0: that LF trails its frame and is no heart-beat."""
    import json
    from pathlib import Path

    from pipeline.driver import ConnectionDriver, DriverConfig
    from pipeline.ingest.reader import CaptureReader
    from pipeline.ingest.records import TcpPacket
    from pipeline.net import flow_ends
    from pipeline.reassembly import Data, Segment
    from tests.support.local_reassembly import LocalReassembly

    folder = Path(__file__).resolve().parents[2] / "data" / "captures"
    pcap = folder / "rabbitmq-nul-lf-split.pcap"
    record = json.loads((folder / "rabbitmq-nul-lf-split.record.json").read_text())
    (consumer,) = record["connections"]

    # The cut is in the capture itself: broker segments in sequence order, per connection.
    broker_segments: dict[tuple[int, int], tuple[int, bytes]] = {}
    packets: dict[tuple, list[tuple[TcpPacket, bytes]]] = {}
    with CaptureReader(str(pcap)) as reader:
        for item in reader:
            if type(item) is not TcpPacket:
                continue
            payload = bytes(reader.payload(item))
            key = flow_ends(item.src_ip, item.src_port, item.dst_ip, item.dst_port)
            packets.setdefault(key, []).append((item, payload))
            if item.src_port == record["port"] and payload:
                broker_segments.setdefault((item.dst_port, item.seq), (item.ts_ns, payload))
    ordered = [broker_segments[key] for key in sorted(broker_segments)]
    cuts = [
        (nul_ts, lf_ts)
        for (nul_ts, ends), (lf_ts, starts) in zip(ordered, ordered[1:], strict=False)
        if ends.endswith(b"\0") and starts.startswith(b"\n")
    ]
    assert len(cuts) == record["nul_lf_cuts"] >= 1
    assert all(lf_ts > nul_ts for nul_ts, lf_ts in cuts)

    # The reference reassembly into the session model.
    models: dict[str, SessionModel] = {}
    s2c_stream: dict[str, bytearray] = {}
    for event in LocalReassembly([str(pcap)]):
        if type(event) is Segment and type(event.event) is Data:
            model = models.setdefault(event.connection_id, SessionModel("s", CLIENT, SERVER))
            data = event.event
            direction = "c2s" if event.from_client else "s2c"
            model.on_data(direction, data.ts_ns, data.offset, data.data)
            if direction == "s2c":
                s2c_stream.setdefault(event.connection_id, bytearray()).extend(data.data)
    sessions = {}
    for connection_id, model in models.items():
        model.finish(T0 * 2)
        sessions[connection_id] = model.drain()
    slow_id = max(sessions, key=lambda c: len(sessions[c]["frames"]))
    slow = sessions[slow_id]
    s2c = [f for f in slow["frames"] if f["direction"] == "s2c"]
    assert len(s2c) == s2c_stream[slow_id].count(b"\0\n")  # every broker frame ends NUL LF
    delivered = [f for f in s2c if f["command"] == "MESSAGE"]
    assert len(delivered) == consumer["messages_received"] == consumer["messages_sent"] == 450
    assert [f["body_length"] for f in delivered] == [1 + n % 97 for n in range(450)]
    assert slow["sessions"][0]["heartbeat_s2c_ms"] == 0  # heart-beat:0,0 negotiated
    assert all(rows["heartbeats"] == [] for rows in sessions.values())
    assert slow["sessions"][0]["s2c_heartbeats"] == 0

    # The connection driver that `stomp-lake run` uses gives the same.
    driven: dict[str, list[TableRow]] = {"frames": [], "heartbeats": [], "sessions": []}
    for flow in packets.values():
        driver = ConnectionDriver(DriverConfig(close_open=True))
        for item, payload in flow:
            driver.packet(item, payload, (str(pcap), item.record_offset))
        driver.end()
        for table, drained in driver.drain().items():
            driven.setdefault(table, []).extend(drained)
    assert driven["heartbeats"] == []
    assert sum(f["command"] == "MESSAGE" for f in driven["frames"]) == 450
    assert len(driven["frames"]) == sum(len(rows["frames"]) for rows in sessions.values())


def test_session_starts_at_its_earliest_input_whatever_order_it_is_handed_over() -> None:
    """A WebSocket transport that held an upgrade never finished hands its bytes over after
    the close that ended them was seen: the session still starts with its first byte, and
    every frame lies inside its lifetime."""
    talk = Conversation()
    talk.close("c2s", 50)  # seen first, handed over first
    talk.handshake(10)
    talk.client(20, "DISCONNECT")
    rows = talk.finish(60)
    [session] = rows["sessions"]
    assert session["started_at_ns"] == T0 + 10 * MS
    assert session["ended_at_ns"] == T0 + 60 * MS
    frames = rows["frames"]
    assert min(f["ts_ns"] for f in frames) >= session["started_at_ns"]
    assert max(f["ts_end_ns"] for f in frames) <= session["ended_at_ns"]
