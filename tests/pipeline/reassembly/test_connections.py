from __future__ import annotations

import hashlib
import pickle
from dataclasses import replace

from pipeline.ingest.records import ACK, FIN, PSH, RST, SYN, TcpPacket
from pipeline.reassembly.connections import (
    Closed,
    Connection,
    ConnectionEvent,
    ConnectionTracker,
    Opened,
    Segment,
    canonical_key,
    connection_id,
)
from pipeline.reassembly.stream import Data, Gap, continues

CLIENT = ("10.0.0.5", 40100)
SERVER = ("10.0.0.9", 61613)


def packet(
    ts: int,
    src: tuple[str, int],
    dst: tuple[str, int],
    seq: int,
    flags: int,
    payload: bytes = b"",
    ack: int = 0,
) -> tuple[TcpPacket, bytes]:
    p = TcpPacket(
        ts, src[0], src[1], dst[0], dst[1], seq, ack, flags, 65535, 0, len(payload), len(payload), 0
    )
    return p, payload


def run(tracker: ConnectionTracker, packets: list[tuple[TcpPacket, bytes]]) -> list:
    events: list[ConnectionEvent] = []
    for p, payload in packets:
        events += tracker.add(p, payload)
    return events + tracker.flush()


def streams(events: list[ConnectionEvent]) -> dict[tuple[str, bool], bytes]:
    out: dict[tuple[str, bool], bytes] = {}
    for e in events:
        if isinstance(e, Segment) and isinstance(e.event, Data):
            key = (e.connection_id, e.from_client)
            out[key] = out.get(key, b"") + e.event.data
    return out


def session(ts: int, client_isn: int, server_isn: int, close: str = "fin") -> list:
    c, s = CLIENT, SERVER
    packets = [
        packet(ts, c, s, client_isn, SYN),
        packet(ts + 1, s, c, server_isn, SYN | ACK, ack=client_isn + 1),
        packet(ts + 2, c, s, client_isn + 1, ACK),
        packet(ts + 3, c, s, client_isn + 1, PSH | ACK, b"CONNECT\n\n\0"),
        packet(ts + 4, s, c, server_isn + 1, PSH | ACK, b"CONNECTED\n\n\0"),
    ]
    if close == "fin":
        packets += [
            packet(ts + 5, c, s, client_isn + 11, FIN | ACK),
            packet(ts + 6, s, c, server_isn + 13, FIN | ACK),
            packet(ts + 7, c, s, client_isn + 12, ACK),
        ]
    elif close == "rst":
        packets.append(packet(ts + 5, s, c, server_isn + 13, RST))
    return packets


def test_handshake_sets_roles_ends_and_both_streams() -> None:
    events = run(ConnectionTracker(), session(100, 1000, 9000))
    opened = [e for e in events if isinstance(e, Opened)]
    closed = [e for e in events if isinstance(e, Closed)]
    assert len(opened) == len(closed) == 1
    conn = closed[0].connection
    assert (conn.client, conn.server, conn.role_source) == (CLIENT, SERVER, "syn")
    assert (conn.client_isn, conn.server_isn) == (1000, 9000)
    assert (conn.client_end, conn.server_end) == ("fin", "fin")
    assert (conn.first_ts_ns, conn.last_ts_ns) == (100, 107)
    cid = conn.connection_id
    assert streams(events) == {(cid, True): b"CONNECT\n\n\0", (cid, False): b"CONNECTED\n\n\0"}
    assert isinstance(events[-1], Closed)


def test_connection_id_is_documented_sha1_and_role_independent() -> None:
    expected = hashlib.sha1(b"10.0.0.5|40100|10.0.0.9|61613|100|1000|0").hexdigest()[:16]
    assert connection_id(*CLIENT, *SERVER, 100, 1000, 0) == expected
    assert connection_id(*SERVER, *CLIENT, 100, 1000, 0) == expected
    events = run(ConnectionTracker(), session(100, 1000, 9000))
    assert events[0].connection.connection_id == expected


def data_without_conflicts(events: list[ConnectionEvent]) -> bool:
    return all(isinstance(e.event, Data) for e in events if isinstance(e, Segment))


def opened_ids(events: list[ConnectionEvent]) -> list[str]:
    return [e.connection.connection_id for e in events if isinstance(e, Opened)]


def test_port_reuse_with_the_same_isn_after_fin_is_a_new_connection() -> None:
    # A proxy that gives every connection the same ISNs, a client binding the same port twice.
    events = run(ConnectionTracker(), session(100, 1000, 9000) + session(200, 1000, 9000))
    ids = opened_ids(events)
    assert len(set(ids)) == 2
    assert data_without_conflicts(events)
    assert streams(events) == {
        (cid, from_client): b"CONNECT\n\n\0" if from_client else b"CONNECTED\n\n\0"
        for cid in ids
        for from_client in (True, False)
    }


def test_port_reuse_with_the_same_isn_after_rst_is_a_new_connection() -> None:
    events = run(ConnectionTracker(), session(100, 1000, 9000, "rst") + session(200, 1000, 9000))
    assert len(set(opened_ids(events))) == 2
    assert data_without_conflicts(events)
    assert len(streams(events)) == 4


def test_port_reuse_after_a_one_way_fin_is_a_new_connection() -> None:
    first = session(100, 1000, 9000, close="none")
    first.append(packet(106, CLIENT, SERVER, 1011, FIN | ACK))
    events = run(ConnectionTracker(), first + session(200, 1000, 9000))
    assert len(set(opened_ids(events))) == 2
    assert data_without_conflicts(events)


def test_syn_ack_alone_with_the_same_isn_after_close_is_a_new_connection() -> None:
    second = session(200, 1000, 9000)[1:]  # the second SYN was not captured
    events = run(ConnectionTracker(), session(100, 1000, 9000) + second)
    assert len(set(opened_ids(events))) == 2
    assert data_without_conflicts(events)
    assert len(streams(events)) == 4


def test_same_syn_after_a_long_idle_gap_is_a_new_connection() -> None:
    idle = 10**9
    first = session(100, 1000, 9000, close="none")  # ended silently (NAT timeout, crash)
    later = session(100 + 2 * idle, 1000, 9000)
    events = run(ConnectionTracker(reuse_after_idle_ns=idle), first + later)
    assert len(set(opened_ids(events))) == 2
    assert data_without_conflicts(events)
    events = run(
        ConnectionTracker(reuse_after_idle_ns=idle), first + session(100 + idle // 2, 1000, 9000)
    )
    assert len(opened_ids(events)) == 1  # within the setting: a retransmitted SYN


def test_default_idle_setting_outlasts_syn_retransmission_backoff() -> None:
    syns = [packet(t * 10**9, CLIENT, SERVER, 1000, SYN) for t in (0, 1, 3, 7, 15, 31, 63, 127)]
    events = run(ConnectionTracker(), syns)
    assert len(opened_ids(events)) == 1


def test_connections_starting_in_the_same_nanosecond_get_distinct_ids() -> None:
    packets = [
        packet(100, CLIENT, SERVER, 1000, SYN),
        packet(100, CLIENT, SERVER, 5000, SYN),  # another ISN: supersedes the first
        packet(100, SERVER, CLIENT, 0, RST | ACK, ack=5001),
        packet(100, CLIENT, SERVER, 5000, SYN),  # same ISN again, after the RST
    ]
    events = run(ConnectionTracker(), packets)
    ids = opened_ids(events)
    assert len(ids) == 3 and len(set(ids)) == 3


def test_ids_continue_across_a_pickled_tracker() -> None:
    tracker = ConnectionTracker()
    events = []
    for p, payload in session(100, 1000, 9000):
        events += tracker.add(p, payload)
    tracker = pickle.loads(pickle.dumps(tracker))
    events += run(tracker, session(100, 1000, 9000))
    assert len(set(opened_ids(events))) == 2


def test_tracker_pickled_before_the_reuse_slots_existed_loads_with_defaults() -> None:
    tracker = ConnectionTracker()
    state = tracker.__getstate__()
    assert isinstance(state, tuple)
    slots = {
        k: v for k, v in state[1].items() if k not in ("connections_opened", "reuse_after_idle_ns")
    }
    old = ConnectionTracker.__new__(ConnectionTracker)
    old.__setstate__((None, slots))
    assert old.connections_opened == 0 and old.reuse_after_idle_ns == 120 * 10**9


def test_new_syn_after_fin_on_the_same_tuple_starts_a_new_connection() -> None:
    events = run(ConnectionTracker(), session(100, 1000, 9000) + session(200, 5000, 7000))
    kinds = [type(e).__name__ for e in events if not isinstance(e, Segment)]
    assert kinds == ["Opened", "Closed", "Opened", "Closed"]
    ids = [e.connection.connection_id for e in events if isinstance(e, Opened)]
    assert len(set(ids)) == 2
    assert len(streams(events)) == 4


def test_connections_opened_at_one_capture_time_with_one_isn_have_their_own_ids() -> None:
    # a capture proxy that gives every connection the same ISNs; both within one clock tick
    one = [(replace(p, ts_ns=100), payload) for p, payload in session(100, 1000, 9000)]
    events = run(ConnectionTracker(), one + one)
    ids = [e.connection.connection_id for e in events if isinstance(e, Opened)]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_new_syn_after_rst_starts_a_new_connection() -> None:
    events = run(ConnectionTracker(), session(100, 1000, 9000, "rst") + session(200, 5, 7))
    closed = [e.connection for e in events if isinstance(e, Closed)]
    assert [(c.client_end, c.server_end) for c in closed] == [("none", "rst"), ("fin", "fin")]


def test_retransmitted_syn_stays_in_the_same_connection() -> None:
    packets = session(100, 1000, 9000)
    packets.insert(1, packet(100, CLIENT, SERVER, 1000, SYN))
    events = run(ConnectionTracker(), packets)
    assert sum(isinstance(e, Opened) for e in events) == 1


def test_syn_with_another_isn_supersedes_an_open_connection() -> None:
    first = session(100, 1000, 9000, close="none")
    events = run(ConnectionTracker(), first + session(200, 77, 88))
    closed = [e.connection for e in events if isinstance(e, Closed)]
    assert len(closed) == 2
    assert (closed[0].client_end, closed[0].server_end) == ("none", "none")


def test_mid_stream_capture_uses_broker_ports_for_roles() -> None:
    packets = [
        packet(10, SERVER, CLIENT, 500, PSH | ACK, b"MESSAGE\n\n\0"),
        packet(11, CLIENT, SERVER, 300, PSH | ACK, b"ACK\n\n\0"),
    ]
    events = run(ConnectionTracker(broker_ports={61613}), packets)
    assert isinstance(events[0], Opened)
    conn = events[0].connection
    assert (conn.client, conn.server, conn.role_source) == (CLIENT, SERVER, "broker_port")
    cid = conn.connection_id
    assert streams(events) == {(cid, False): b"MESSAGE\n\n\0", (cid, True): b"ACK\n\n\0"}


def test_mid_stream_without_ports_is_unknown_and_roles_can_be_swapped() -> None:
    tracker = ConnectionTracker()
    events = tracker.add(*packet(10, SERVER, CLIENT, 500, PSH | ACK, b"MESSAGE\n\n\0"))
    assert isinstance(events[0], Opened) and isinstance(events[1], Segment)
    conn = events[0].connection
    assert conn.role_source == "unknown" and conn.client == SERVER  # provisional
    assert events[1].from_client is True
    cid = conn.connection_id
    tracker.swap_roles()  # the caller saw a MESSAGE frame: that side is the server
    assert conn.client == CLIENT and conn.server == SERVER and conn.connection_id == cid
    later = tracker.add(*packet(11, SERVER, CLIENT, 510, PSH | ACK, b"MESSAGE\n\n\0"))
    assert isinstance(later[0], Segment) and later[0].from_client is False
    ack = tracker.add(*packet(12, CLIENT, SERVER, 1, PSH | ACK, b"ACK"))[0]
    assert isinstance(ack, Segment) and ack.from_client is True


def test_syn_ack_without_syn_gives_roles_and_the_client_isn() -> None:
    packets = session(100, 1000, 9000)[1:]  # the SYN was not captured
    events = run(ConnectionTracker(), packets)
    conn = events[0].connection
    assert (conn.client, conn.role_source, conn.client_isn) == (CLIENT, "syn_ack", 1000)
    assert streams(events)[(conn.connection_id, True)] == b"CONNECT\n\n\0"


def test_reused_tuple_without_a_captured_handshake_is_split_by_sequence_distance() -> None:
    first = session(100, 1000, 9000)
    reuse = [packet(300, CLIENT, SERVER, 3_000_000_000, PSH | ACK, b"SEND\n\n\0")]
    events = run(ConnectionTracker(), first + reuse)
    assert sum(isinstance(e, Opened) for e in events) == 2


def test_late_retransmission_after_close_stays_in_the_closed_connection() -> None:
    late = [packet(120, CLIENT, SERVER, 1001, PSH | ACK, b"CONNECT\n\n\0")]
    events = run(ConnectionTracker(), session(100, 1000, 9000) + late)
    assert sum(isinstance(e, Opened) for e in events) == 1


def test_capture_losses_surface_as_gaps_in_the_right_direction() -> None:
    packets = session(100, 1000, 9000)
    packets[3] = packet(103, CLIENT, SERVER, 1005, PSH | ACK, b"ECT\n\n\0")  # lost "CONN"
    events = run(ConnectionTracker(), packets)
    gaps = [
        (e.from_client, e.event)
        for e in events
        if isinstance(e, Segment) and isinstance(e.event, Gap)
    ]
    assert gaps == [(True, Gap(0, 4, 103))]  # stamped with the segment after the hole


def test_packets_of_another_tuple_are_ignored_and_counted() -> None:
    tracker = ConnectionTracker()
    tracker.add(*packet(1, CLIENT, SERVER, 1, SYN))
    assert tracker.add(*packet(2, ("10.0.0.99", 1), SERVER, 1, ACK)) == []
    assert tracker.foreign_packets == 1


def test_tracker_state_pickles_between_runs() -> None:
    packets = session(100, 1000, 9000)
    tracker = ConnectionTracker(broker_ports={61613})
    events = []
    for p, payload in packets[:4]:
        events += tracker.add(p, payload)
    tracker = pickle.loads(pickle.dumps(tracker))
    for p, payload in packets[4:]:
        events += tracker.add(p, payload)
    events += tracker.flush()
    assert sorted(streams(events).values()) == [b"CONNECT\n\n\0", b"CONNECTED\n\n\0"]


def test_canonical_key_is_the_same_both_ways() -> None:
    a = packet(1, CLIENT, SERVER, 1, ACK)[0]
    b = packet(1, SERVER, CLIENT, 1, ACK)[0]
    assert canonical_key(a) == canonical_key(b) == ("10.0.0.5", 40100, "10.0.0.9", 61613)


T0 = 1_700_000_000_000_000_000


def test_bare_ack_shortcut_leaves_the_tracker_as_add_does() -> None:
    c, s = CLIENT, SERVER
    packets = session(T0, 1000, 5000, close="none")
    packets += [
        packet(T0 + 10, s, c, 5011, ACK, ack=1011),
        packet(T0 + 11, c, s, 1011, ACK, ack=5011),
        packet(T0 + 12, ("10.9.9.9", 1), s, 7, ACK),  # another tuple: not for the shortcut
        packet(T0 + 13, c, s, 1011, PSH | ACK, b"SEND\n\n\0"),
        packet(T0 + 14, s, c, 5011, ACK, ack=1019),
    ]
    by_add, shortcut = ConnectionTracker(), ConnectionTracker()
    taken = 0
    for p, payload in packets:
        events = by_add.add(p, payload)
        bare = not payload and not p.flags & (SYN | FIN | RST)
        if bare and shortcut.add_bare_ack(p.src_ip, p.src_port, p.ts_ns):
            assert events == []
            taken += 1
        else:
            shortcut.add(p, payload)
    assert taken == 4  # the handshake's ACK and three later ones; not the foreign one
    assert pickle.dumps(shortcut) == pickle.dumps(by_add)
    assert not ConnectionTracker().add_bare_ack(*c, T0)  # no connection yet


def test_add_run_is_add_for_the_packets_that_continue() -> None:
    """Giving each plain data packet that `continues` from its sender's `in_order_position` to
    ``add_run`` (as the flow pass does) gives the same events and connection as ``add`` alone,
    over handshakes, data, closes, a retransmission, out-of-order data and port reuse."""
    c, s = CLIENT, SERVER
    packets = session(100, 1000, 9000)
    packets += [
        packet(120, c, s, 5000, SYN),
        packet(121, s, c, 7000, SYN | ACK, ack=5001),
        packet(122, c, s, 5001, PSH | ACK, b"SEND\n\n\0"),
        packet(123, c, s, 5008, PSH | ACK, b"SEND\n\n\0"),
        packet(124, c, s, 5008, PSH | ACK, b"SEND\n\n\0"),  # retransmitted
        packet(125, s, c, 7011, PSH | ACK, b"later"),  # ahead of a lost segment
        packet(126, s, c, 7001, PSH | ACK, b"RECEIPT\n\n\0"),
        packet(127, s, c, 7016, PSH | ACK, b"more"),
        packet(128, c, s, 5015, FIN | ACK),
        packet(129, s, c, 7020, PSH | ACK, b"after the client's FIN"),
    ]
    plain, fast = ConnectionTracker(), ConnectionTracker()
    plain_events = run(plain, packets)
    fast_events: list[ConnectionEvent] = []
    taken = 0
    for p, payload in packets:
        position = None
        if payload and p.payload_len == p.wire_len and not p.flags & (SYN | FIN | RST):
            position = fast.in_order_position(p.src_ip, p.src_port)
        if position is None or not continues(*position, p.seq, len(payload)):
            fast_events += fast.add(p, payload)
        else:
            size = len(payload)
            sender, offset = fast.add_run(p.src_ip, p.src_port, payload, [size], p.ts_ns, p.ts_ns)
            conn = fast.connection
            assert conn is not None
            fast_events.append(Segment(conn.connection_id, sender, Data(offset, p.ts_ns, payload)))
            taken += 1
    fast_events += fast.flush()
    assert taken >= 4
    assert fast_events == plain_events
    assert pickle.dumps(fast) == pickle.dumps(plain)


def test_a_connection_compares_by_its_fields_and_pickles_as_a_class_with_slots() -> None:
    """Compiled, it is an extension type: carried, it pickles as the source's class with
    ``__slots__`` does, so either twin (or a release before) resumes the other's."""
    conn = Connection("c1", "10.0.0.1", 40000, "10.0.0.2", 61613, "syn", 5, 9, 100, None)
    conn.client_end, conn.client_packets = "fin", 3
    state = conn.__reduce_ex__(2)[2]
    assert state == (None, {name: getattr(conn, name) for name in Connection.__slots__})
    carried = pickle.loads(pickle.dumps(conn))
    assert carried == conn and carried is not conn and repr(carried) == repr(conn)
    assert (carried.client_packets, carried.server_packets, carried.server_end) == (3, 0, "none")
    carried.swap_roles()
    assert carried != conn and carried.client == conn.server
