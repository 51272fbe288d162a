"""The saved audit queries: their files, their parameters, and their answers on the sample lake
against the counts of the samples' client-side records (samples/*.expected.json)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pipeline.audit.registry import (
    AuditQuery,
    BadParameter,
    UnknownQuery,
    all_queries,
    get_query,
    parse_assignments,
    parse_query,
)
from pipeline.audit.views import register_views
from tests.pipeline.audit.sample_lake import connections, shared_sample_lake

ISSUE_QUERIES = {
    "logins",
    "failed_logins",
    "destinations",
    "message_rates",
    "ack_latency",
    "delivery_issues",
    "slow_consumers",
    "late_heartbeats",
    "abnormal_endings",
    "violations",
    "largest_messages",
    "end_to_end_latency",
}


# ---- the files -------------------------------------------------------------------------------


def test_every_query_of_the_issue_ships_with_a_one_line_description() -> None:
    queries = {q.name: q for q in all_queries()}
    assert set(queries) >= ISSUE_QUERIES
    for query in queries.values():
        assert query.description and "\n" not in query.description
        assert query.sql.lstrip().startswith("--")
        assert not query.sql.rstrip().endswith(";")


def test_parameters_are_typed_by_their_default() -> None:
    query = parse_query(
        "q",
        "-- About q.\n-- param bucket_seconds = 60: bucket width\n"
        "-- param ratio = 1.5: a ratio\n-- param who = 'admin': a login\nSELECT :who",
    )
    assert [(p.name, p.default) for p in query.params] == [
        ("bucket_seconds", 60),
        ("ratio", 1.5),
        ("who", "admin"),
    ]
    assert query.params[0].doc == "bucket width"
    assert parse_assignments(query, ["ratio=2", "who=guest"]) == {"ratio": 2.0, "who": "guest"}
    assert query.bind({"ratio": 3.0}) == {"bucket_seconds": 60, "ratio": 3.0, "who": "admin"}


def test_bad_parameters_and_names_are_refused_with_what_is_known() -> None:
    rates = get_query("message_rates")
    with pytest.raises(BadParameter, match="takes bucket_seconds"):
        parse_assignments(rates, ["bucket=5"])
    with pytest.raises(BadParameter, match="integer"):
        parse_assignments(rates, ["bucket_seconds=soon"])
    with pytest.raises(BadParameter, match="NAME=VALUE"):
        parse_assignments(rates, ["bucket_seconds"])
    with pytest.raises(BadParameter, match="takes none"):
        get_query("logins").bind({"x": 1})
    with pytest.raises(UnknownQuery, match="known: .*logins"):
        get_query("no_such_query")
    with pytest.raises(ValueError, match="description"):
        parse_query("q", "SELECT 1")


# ---- on the sample lake ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def views(spark, tmp_path_factory):
    """A session of its own: other modules register views with other windows."""
    session = spark.newSession()
    register_views(session, shared_sample_lake(tmp_path_factory))
    return session


def _run(views, name: str, **params: Any) -> list[dict[str, Any]]:
    query: AuditQuery = get_query(name)
    return [row.asDict() for row in query.run(views, params).collect()]


@pytest.fixture(scope="module")
def port_of(views) -> dict[str, int]:
    return {r.session_id: r.client_port for r in views.table("sessions").collect()}


def _received(conn: dict) -> list[dict]:
    return conn["messages_received"]


def _settled_destinations(conn: dict) -> set[str]:
    """Destinations the client acknowledged on (it named one of their messages in ACK/NACK)."""
    named = set(conn["ack_ids_sent"]) | set(conn["nack_ids_sent"])
    return {m["destination"] for m in _received(conn) if {m["message_id"], m["ack"]} & named}


def _nacked(conn: dict) -> set[str]:
    named = set(conn["nack_ids_sent"])
    return {m["message_id"] for m in _received(conn) if {m["message_id"], m["ack"]} & named}


def _refused(conn: dict) -> bool:
    return not conn["connected"] and bool(conn["errors_received"])


@pytest.mark.spark
def test_logins_per_user_and_address(views) -> None:
    rows = _run(views, "logins")
    # The samples ran over loopback: every client address is 127.0.0.1.
    assert {r["client_ip"] for r in rows} == {"127.0.0.1"}
    by_login = {r["login"]: r for r in rows}
    expected = Counter(c["login"] for c in connections())
    assert {login: r["connections"] for login, r in by_login.items()} == expected
    accepted = Counter(c["login"] for c in connections() if c["connected"])
    assert {login: r["accepted"] for login, r in by_login.items()} == accepted
    refused = Counter(c["login"] for c in connections() if _refused(c))
    assert {login: r["refused"] for login, r in by_login.items() if r["refused"]} == refused


@pytest.mark.spark
def test_failed_logins_are_the_connections_refused_by_error(views) -> None:
    rows = _run(views, "failed_logins")
    expected = {
        c["client_port"]: (c["login"], c["errors_received"][0]["message"])
        for c in connections()
        if _refused(c)
    }
    assert len(expected) == 2
    assert {r["client_port"]: (r["login"], r["error_message"]) for r in rows} == expected
    assert all(r["closed_after_error"] and r["error_after_ms"] >= 0 for r in rows)


@pytest.mark.spark
def test_producers_and_consumers_per_destination(views, port_of) -> None:
    rows = {r["destination"]: r for r in _run(views, "destinations")}
    delivered = Counter(m["destination"] for c in connections() for m in _received(c))
    assert {d: r["messages_delivered"] for d, r in rows.items()} == delivered
    consumers: dict[str, set[int]] = {}
    for conn in connections():
        for message in _received(conn):
            consumers.setdefault(message["destination"], set()).add(conn["client_port"])
    assert {d: r["consumers"] for d, r in rows.items()} == {
        d: len(ports) for d, ports in consumers.items()
    }
    # Each producer sent one SEND without destination, which the broker answered with ERROR.
    sends = sum(c["frames_sent"].get("SEND", 0) for c in connections())
    no_destination = sum(
        1 for c in connections() for e in c["errors_received"] if "estination" in e["message"]
    )
    assert sum(r["messages_sent"] for r in rows.values()) == sends - no_destination
    # ... and the producers of every delivered message were captured with it.
    assert all(rows[d]["producers"] >= 1 for d in delivered)


@pytest.mark.spark
def test_message_rates_add_up_to_the_messages_per_destination(views) -> None:
    hourly = _run(views, "message_rates", bucket_seconds=3600)
    delivered = Counter(m["destination"] for c in connections() for m in _received(c))
    per_destination: Counter[str] = Counter()
    for row in hourly:
        per_destination[row["destination"]] += row["delivered"]
        assert row["delivered_per_s"] == pytest.approx(row["delivered"] / 3600, abs=1e-3)
    assert +per_destination == delivered
    per_second = _run(views, "message_rates", bucket_seconds=1)
    assert len({r["bucket_start"] for r in per_second}) > len({r["bucket_start"] for r in hourly})
    assert sum(r["delivered"] for r in per_second) == sum(delivered.values())
    assert all(r["bucket_start"].microsecond == 0 for r in per_second)


@pytest.mark.spark
def test_ack_latency_per_consumer_and_subscription(views) -> None:
    rows = _run(views, "ack_latency")
    by_port: dict[int, list[dict]] = {}
    for row in rows:
        by_port.setdefault(row["client_port"], []).append(row)
    expected = {
        c["client_port"]: c for c in connections() if c["ack_ids_sent"] or c["nack_ids_sent"]
    }
    assert set(by_port) == set(expected)
    for port, conn in expected.items():
        destinations = _settled_destinations(conn)
        settled = sum(1 for m in _received(conn) if m["destination"] in destinations)
        assert sum(r["settled"] for r in by_port[port]) == settled
        assert sum(r["nacked"] for r in by_port[port]) == len(conn["nack_ids_sent"])
        for row in by_port[port]:
            assert row["acked"] + row["nacked"] == row["settled"] == row["needing_ack"]
            assert row["unacked"] == 0
            assert 0 <= row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] <= row["max_ms"]


@pytest.mark.spark
def test_delivery_issues_are_the_nacked_messages(views) -> None:
    rows = _run(views, "delivery_issues")
    expected = {(c["client_port"], mid) for c in connections() for mid in _nacked(c)}
    assert len(expected) == sum(len(c["nack_ids_sent"]) for c in connections()) == 3
    assert {(r["client_port"], r["message_id"]) for r in rows} == expected
    assert {r["issue"] for r in rows} == {"nacked"}
    # Nothing was received twice, so nothing was redelivered.
    for conn in connections():
        ids = [m["message_id"] for m in _received(conn)]
        assert len(ids) == len(set(ids))


@pytest.mark.spark
def test_slow_consumers_follow_the_threshold(views) -> None:
    consumers = {(r["consumer_session"], r["subscription"]) for r in _run(views, "ack_latency")}
    everyone = _run(views, "slow_consumers", slow_ms=0)
    assert {(r["consumer_session"], r["subscription"]) for r in everyone} == consumers
    assert all(r["why"].startswith("p95 above 0") for r in everyone)
    default = _run(views, "slow_consumers")
    assert all(r["p95_ms"] > 1000 for r in default)
    slowest = max(r["p95_ms"] for r in everyone)
    assert len(_run(views, "slow_consumers", slow_ms=slowest - 0.01)) >= 1


@pytest.mark.spark
def test_late_heartbeats_per_session_and_direction(views, port_of) -> None:
    rows = _run(views, "late_heartbeats")
    beats = [h.asDict() for h in views.table("heartbeats").collect()]
    late: Counter[tuple[str, str]] = Counter(
        (h["session_id"], h["direction"])
        for h in beats
        if h["expected_ms"] and h["gap_ms"] > 1.5 * h["expected_ms"]
    )
    assert {(r["session_id"], r["direction"]): r["late_1_5x"] for r in rows} == late
    assert rows, "the samples hold beats later than 1.5x"
    record = {c["client_port"]: c for c in connections()}
    for row in rows:
        conn = record[row["client_port"]]
        effective = conn["heart_beat_effective"]
        if row["direction"] == "c2s":
            assert row["expected_ms"] == effective["client_to_server_ms"]
            assert row["beats"] == conn["heart_beats_sent"]
        else:
            assert row["expected_ms"] == effective["server_to_client_ms"]
            assert row["beats"] == conn["heart_beats_received"]
        assert row["late_2x"] <= row["late_1_5x"] <= row["beats"]
        assert row["worst_ratio"] > 1.5


@pytest.mark.spark
def test_abnormal_endings_are_the_connections_the_broker_closed_after_error(views) -> None:
    rows = _run(views, "abnormal_endings")
    expected = {
        c["client_port"]: c["errors_received"][-1]["message"]
        for c in connections()
        if c["ending"] == "server-close"
    }
    assert {r["client_port"]: r["last_error"] for r in rows} == expected
    assert {r["end_reason"] for r in rows} == {"error"}


@pytest.mark.spark
def test_violations_by_client(views) -> None:
    rows = _run(views, "violations")
    expected = Counter(
        c["login"]
        for c in connections()
        for e in c["errors_received"]
        if "estination" in e["message"]
    )
    assert {r["login"]: r["occurrences"] for r in rows} == expected
    assert {r["kind"] for r in rows} == {"missing_header"}


@pytest.mark.spark
def test_largest_messages(views) -> None:
    top = _run(views, "largest_messages")
    assert len(top) == 20
    lengths = [r["body_length"] for r in top]
    assert lengths == sorted(lengths, reverse=True)
    everything = _run(views, "largest_messages", limit=10_000)
    sends = sum(c["frames_sent"].get("SEND", 0) for c in connections())
    delivered = [m for c in connections() for m in _received(c)]
    assert len(everything) == sends + len(delivered)
    largest_delivered = max(r["body_length"] for r in everything if r["command"] == "MESSAGE")
    assert largest_delivered == max(m["body_length"] for m in delivered)


@pytest.mark.spark
def test_end_to_end_latency_pairs_every_delivery_with_its_send(views, port_of) -> None:
    rows = _run(views, "end_to_end_latency")
    # In every sample the producers of the delivered messages were captured too.
    expected = Counter(
        (c["client_port"], m["message_id"]) for c in connections() for m in _received(c)
    )
    got = Counter((port_of[r["consumer_session"]], r["message_id"]) for r in rows)
    assert got == expected
    assert all(r["latency_ms"] >= 0 for r in rows)
    producers = {c["login"] for c in connections() if c["frames_sent"].get("SEND")}
    assert {r["producer_login"] for r in rows} <= producers
