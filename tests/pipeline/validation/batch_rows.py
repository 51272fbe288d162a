"""A small, consistent batch of every table: one finished session with a CONNECT, SUBSCRIBE,
SEND, MESSAGE, ACK, RECEIPT, heart-beats and a transaction, as the pipeline would emit it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import schemas

T0_NS = 1_763_700_000_000_000_000  # 2025-11-21T04:40:00Z
MS = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SESSION = "10.0.0.1:40000-10.0.0.2:61613-1"


def at(offset_ms: float) -> tuple[datetime, int]:
    ns = T0_NS + int(offset_ms * MS)
    return EPOCH + timedelta(microseconds=ns // 1000), ns


def _row(table: str, batch_id: str, values: dict[str, Any]) -> dict[str, Any]:
    row = dict.fromkeys(schemas.load(table).column_names)
    row.update(values)
    row["batch_id"] = batch_id
    return row


def _frame(index: int, direction: str, command: str, ms: float, **extra: Any) -> dict[str, Any]:
    ts, ns = at(ms)
    body_length = extra.pop("body_length", 0)
    return {
        "session_id": SESSION,
        "direction": direction,
        "frame_index": index,
        "ts": ts,
        "ts_ns": ns,
        "ts_end": ts,
        "ts_end_ns": ns,
        "command": command,
        "headers": {},
        "header_list": [],
        "body_length": body_length,
        "stream_offset": index * 100,
        "tcp_offset": index * 100,
        "frame_length": len(command) + 3 + body_length,
        "date": ts.date(),
        **extra,
    }


def good_batch(batch_id: str) -> dict[str, list[dict[str, Any]]]:
    frames = [
        _frame(0, "c2s", "CONNECT", 0),
        _frame(1, "s2c", "CONNECTED", 2),
        _frame(2, "c2s", "SUBSCRIBE", 3),
        _frame(3, "c2s", "BEGIN", 4),
        _frame(4, "c2s", "SEND", 5, body_length=5, content_length=5),
        _frame(5, "c2s", "COMMIT", 6),
        _frame(6, "s2c", "MESSAGE", 10, body_length=5, content_length=5),
        _frame(7, "c2s", "ACK", 15),
        _frame(8, "c2s", "FROB", 16, violation="unknown_command"),
        _frame(9, "c2s", "DISCONNECT", 20, headers={"receipt": "r-1"}),
        _frame(10, "s2c", "RECEIPT", 21),
    ]
    start, start_ns = at(0)
    end, end_ns = at(30)
    sessions = [
        {
            "session_id": SESSION,
            "client_ip": "10.0.0.1",
            "client_port": 40000,
            "server_ip": "10.0.0.2",
            "server_port": 61613,
            "started_at": start,
            "started_at_ns": start_ns,
            "ended_at": end,
            "ended_at_ns": end_ns,
            "duration_ms": 30.0,
            "transport": "tcp",
            "connect_command": "CONNECT",
            "version": "1.2",
            "heartbeat_c2s_ms": 0,
            "heartbeat_s2c_ms": 10,
            "end_reason": "disconnect_receipt",
            "closed_by": "client",
            "c2s_bytes": 700,
            "s2c_bytes": 400,
            "c2s_frames": 7,
            "s2c_frames": 4,
            "c2s_heartbeats": 0,
            "s2c_heartbeats": 2,
            "gap_bytes": 0,
            "conflict_bytes": 0,
            "violations": 1,
            "messages_sent": 1,
            "messages_delivered": 1,
            "acks": 1,
            "nacks": 0,
            "errors": 0,
            "unacked_messages": 0,
            "receipts_missing": 0,
            "transactions_unfinished": 0,
            "date": start.date(),
        }
    ]
    msg_ts, msg_ns = at(10)
    ack_ts, ack_ns = at(15)
    send_ts, send_ns = at(5)
    messages = [
        {
            "session_id": SESSION,
            "direction": "c2s",
            "frame_index": 4,
            "ts": send_ts,
            "ts_ns": send_ns,
            "command": "SEND",
            "destination": "/queue/a",
            "transaction": "tx-1",
            "transaction_outcome": "committed",
            "content_length": 5,
            "body_length": 5,
            "user_headers": {},
            "date": send_ts.date(),
        },
        {
            "session_id": SESSION,
            "direction": "s2c",
            "frame_index": 6,
            "ts": msg_ts,
            "ts_ns": msg_ns,
            "command": "MESSAGE",
            "destination": "/queue/a",
            "message_id": "m-1",
            "subscription": "0",
            "ack_id": "a-1",
            "content_length": 5,
            "body_length": 5,
            "user_headers": {},
            "ack_mode": "client-individual",
            "ack_outcome": "ACK",
            "acked_at": ack_ts,
            "acked_at_ns": ack_ns,
            "ack_latency_ms": 5.0,
            "ack_frame_index": 7,
            "date": msg_ts.date(),
        },
    ]
    acks = [
        {
            "session_id": SESSION,
            "frame_index": 7,
            "ts": ack_ts,
            "ts_ns": ack_ns,
            "command": "ACK",
            "ack_id": "a-1",
            "message_id": "m-1",
            "subscription": "0",
            "ack_mode": "client-individual",
            "acked_message_count": 1,
            "delivered_at": msg_ts,
            "delivered_at_ns": msg_ns,
            "latency_ms": 5.0,
            "date": ack_ts.date(),
        }
    ]
    heartbeats = []
    for ms, gap in ((12, None), (22, 10.0)):
        ts, ns = at(ms)
        heartbeats.append(
            {
                "session_id": SESSION,
                "direction": "s2c",
                "ts": ts,
                "ts_ns": ns,
                "stream_offset": 1000 + ms,
                "gap_ms": gap,
                "expected_ms": 10,
                "lateness_ms": None if gap is None else gap - 10,
                "late_1x": None if gap is None else False,
                "date": ts.date(),
            }
        )
    req_ts, req_ns = at(20)
    got_ts, got_ns = at(21)
    receipts = [
        {
            "session_id": SESSION,
            "receipt_id": "r-1",
            "request_command": "DISCONNECT",
            "request_frame_index": 9,
            "requested_at": req_ts,
            "requested_at_ns": req_ns,
            "received_at": got_ts,
            "received_at_ns": got_ns,
            "latency_ms": 1.0,
            "outcome": "receipt",
            "date": req_ts.date(),
        }
    ]
    sub_ts, sub_ns = at(3)
    subscriptions = [
        {
            "session_id": SESSION,
            "subscription_id": "0",
            "destination": "/queue/a",
            "ack_mode": "client-individual",
            "headers": {"id": "0", "destination": "/queue/a"},
            "subscribe_frame_index": 2,
            "subscribed_at": sub_ts,
            "subscribed_at_ns": sub_ns,
            "ended_by": "session_end",
            "messages_delivered": 1,
            "messages_acked": 1,
            "messages_nacked": 0,
            "messages_unacked": 0,
            "date": sub_ts.date(),
        }
    ]
    begin_ts, begin_ns = at(4)
    commit_ts, commit_ns = at(6)
    transactions = [
        {
            "session_id": SESSION,
            "transaction_id": "tx-1",
            "begin_frame_index": 3,
            "began_at": begin_ts,
            "began_at_ns": begin_ns,
            "end_frame_index": 5,
            "ended_at": commit_ts,
            "ended_at_ns": commit_ns,
            "duration_ms": 2.0,
            "outcome": "committed",
            "sends": 1,
            "acks": 0,
            "nacks": 0,
            "acked_messages": 0,
            "date": begin_ts.date(),
        }
    ]
    odd_ts, odd_ns = at(16)
    anomalies = [
        {
            "source": "stomp",
            "kind": "unknown_command",
            "session_id": SESSION,
            "direction": "c2s",
            "stream_offset": 800,
            "ts": odd_ts,
            "ts_ns": odd_ns,
            "detail": "'FROB'",
            "date": odd_ts.date(),
        }
    ]
    tables = {
        "sessions": sessions,
        "frames": frames,
        "messages": messages,
        "acks": acks,
        "heartbeats": heartbeats,
        "receipts": receipts,
        "errors": [],
        "subscriptions": subscriptions,
        "transactions": transactions,
        "anomalies": anomalies,
        "websocket_controls": [],
    }
    return {t: [_row(t, batch_id, r) for r in rows] for t, rows in tables.items()}


def to_frames(spark: Any, rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        t: spark.createDataFrame(rows[t], schemas.load(t).spark_schema()).cache()
        for t in schemas.TABLES
    }


def to_files(folder: Path, rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[Path]]:
    """The rows as Parquet, a file per table that has rows (as `local_files` of the gate):
    hive-style ``date=`` folders as the flow pass writes them, the rest in the file."""
    found: dict[str, list[Path]] = {}
    for table in schemas.TABLES:
        found[table] = []
        schema = schemas.load(table).arrow_schema()
        stored = pa.schema([f for f in schema if f.name != "date"])
        by_date: dict[Any, list[dict[str, Any]]] = {}
        for row in rows[table]:
            by_date.setdefault(row.get("date"), []).append(row)
        for index, (day, some) in enumerate(by_date.items()):
            target = folder / table / f"date={day}" / f"part-{index}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(some, schema=stored), target)
            found[table].append(target)
    return found


def counts_of(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The run's counters for these rows, as `stomp-lake run` passes them to the gate: rows per
    table and the capture window (the session's SYN to its last FIN)."""
    return {
        **{t: len(r) for t, r in rows.items()},
        "capture_first_ns": at(0)[1],
        "capture_last_ns": at(30)[1],
    }


def with_duplicate_message_id(rows: dict[str, list[dict[str, Any]]]) -> None:
    """The broker delivers m-1 again without redelivered:true: a wire fact, an anomaly row."""
    again = {**rows["messages"][1], "frame_index": 11}
    rows["messages"].append(again)
    rows["anomalies"].append(
        {
            **rows["anomalies"][0],
            "kind": "duplicate_message_id",
            "direction": "s2c",
            "detail": "MESSAGE 'm-1' delivered again without redelivered:true",
        }
    )


def with_lagging_consumer(rows: dict[str, list[dict[str, Any]]], lagging: int = 30) -> None:
    """A consumer whose acks fell past ``max_pending_messages``: MESSAGEs given up (one
    pending_overflow), and its later ACKs naming them resolved to nothing."""
    ack = rows["acks"][0]
    anomaly = rows["anomalies"][0]
    rows["anomalies"].append({**anomaly, "kind": "pending_overflow", "direction": "s2c"})
    for n in range(lagging):
        ts, ns = at(17 + n / 10)
        rows["acks"].append(
            {
                **ack,
                "frame_index": 100 + n,
                "ts": ts,
                "ts_ns": ns,
                "ack_id": f"given-up-{n}",
                "message_id": None,
                "acked_message_count": 0,
                "delivered_at": None,
                "delivered_at_ns": None,
                "latency_ms": None,
                "date": ts.date(),
            }
        )
        rows["anomalies"].append(
            {
                **anomaly,
                "kind": "ack_unmatched_after_overflow",
                "ts": ts,
                "ts_ns": ns,
                "detail": f"ACK 'given-up-{n}' names no unsettled MESSAGE",
            }
        )


CARRIED = "10.0.0.1:40001-10.0.0.2:61613-9"


def with_connection_carried_from_a_later_capture(rows: dict[str, list[dict[str, Any]]]) -> None:
    """Older captures back-filled with ``--open-connections close`` while a connection of a
    later capture was carried: its times are all after this batch's last packet (``at(30)``)."""
    start, start_ns = at(40)
    end, end_ns = at(50)
    session = rows["sessions"][0]
    rows["sessions"].append(
        {
            **session,
            "session_id": CARRIED,
            "client_port": 40001,
            "started_at": start,
            "started_at_ns": start_ns,
            "ended_at": end,
            "ended_at_ns": end_ns,
            "duration_ms": 10.0,
            "end_reason": "capture_end",
            "date": start.date(),
        }
    )
    ts, ns = at(45)
    rows["frames"].append(
        {
            **rows["frames"][6],
            "session_id": CARRIED,
            "frame_index": 7,
            "ts": ts,
            "ts_ns": ns,
            "ts_end": ts,
            "ts_end_ns": ns,
            "date": ts.date(),
        }
    )


def to_staged(lake: Any, batch_id: str, rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The rows staged under each table's root as a run stages them (``pipeline.lake.staging``):
    table -> StagedBatch. The batch must be begun."""
    from pipeline.lake.staged_tables import table_layout
    from pipeline.lake.staging import stage_files, staging_folder
    from pipeline.lake.table_schema import to_arrow_schema

    staged = {}
    for table in schemas.TABLES:
        folder = staging_folder(lake, table, batch_id)
        written = to_files(folder, {t: rows[t] if t == table else [] for t in rows})[table]
        if written:  # the writers' folder
            (folder / table).rename(folder / "parquet")
        layout = table_layout(table)
        staged[table] = stage_files(
            lake,
            table,
            schema=to_arrow_schema(layout["schema"]),
            partition_by=layout["partition_by"],
            batch_id=batch_id,
            staging_dir=folder,
            written=[p.relative_to(folder / table).as_posix() for p in written],
        )
    return staged
