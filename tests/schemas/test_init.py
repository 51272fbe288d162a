from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

import schemas
from schemas import TABLES, load

TABLE_DIR = Path(schemas.__file__).parent / "tables"

# Columns other tools and reports rely on (the contract).
CONTRACT = {
    "sessions": "session_id client_ip client_port server_ip server_port started_at ended_at "
    "connect_command accept_version version host login server server_session client_heart_beat "
    "server_heart_beat heartbeat_c2s_ms heartbeat_s2c_ms end_reason c2s_bytes s2c_bytes "
    "c2s_frames s2c_frames gap_bytes violations transport ws_path ws_subprotocol ws_status",
    "frames": "session_id direction frame_index ts ts_end command headers header_list "
    "content_length body_length body_sha256 stream_offset violation",
    "messages": "session_id direction frame_index ts command destination message_id subscription "
    "ack_id transaction content_type body_length body_sha256 receipt user_headers ack_outcome "
    "acked_at ack_latency_ms",
    "acks": "session_id ts command ack_id subscription ack_mode transaction transaction_outcome "
    "acked_message_count delivered_at latency_ms",
    "heartbeats": "session_id direction ts gap_ms expected_ms lateness_ms late_1x late_1_5x "
    "late_2x",
    "receipts": "session_id receipt_id request_command requested_at received_at latency_ms",
    "errors": "session_id ts message receipt_id body_preview connection_closed",
    "subscriptions": "session_id subscription_id destination ack_mode",
    "transactions": "session_id transaction_id outcome",
    "anomalies": "source kind session_id direction file file_offset stream_offset ts detail "
    "batch_id",
    "websocket_controls": "session_id direction side kind ts tcp_offset rtt_ms close_code "
    "close_reason",
}


def test_every_table_has_a_json_file_and_nothing_else_is_there() -> None:
    assert sorted(p.stem for p in TABLE_DIR.glob("*.json")) == sorted(TABLES)


@pytest.mark.parametrize("table", TABLES)
def test_schema_is_complete_and_described(table: str) -> None:
    schema = load(table)
    raw = json.loads((TABLE_DIR / f"{table}.json").read_text())
    assert schema.name == raw["name"] == table
    assert schema.description and schema.partition_by == ("date",)
    names = schema.column_names
    assert len(names) == len(set(names))
    assert set(CONTRACT[table].split()) <= set(names)
    assert {"date", "batch_id"} <= set(names)
    assert schema.column("date").type == "date" and not schema.column("date").nullable
    assert all(column.description.strip() for column in schema.columns)


@pytest.mark.parametrize("table", TABLES)
def test_arrow_and_spark_schemas_agree(table: str) -> None:
    schema = load(table)
    arrow = schema.arrow_schema()
    spark = schema.spark_schema()
    assert arrow.names == list(schema.column_names) == spark.fieldNames()
    for field, spark_field, column in zip(arrow, spark.fields, schema.columns, strict=True):
        assert field.nullable == spark_field.nullable == column.nullable
        assert spark_field.metadata["comment"] == column.description


def test_timestamps_are_utc_microseconds() -> None:
    assert load("frames").arrow_schema().field("ts").type == pa.timestamp("us", tz="UTC")


def test_arrow_table_rejects_missing_extra_and_null_columns() -> None:
    schema = load("heartbeats")
    row = {
        "session_id": "s",
        "direction": "c2s",
        "ts": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "ts_ns": 1,
        "stream_offset": 0,
        "gap_ms": None,
        "expected_ms": None,
        "lateness_ms": None,
        "late_1x": None,
        "late_1_5x": None,
        "late_2x": None,
        "date": dt.date(2024, 1, 1),
        "batch_id": "b",
    }
    assert schema.arrow_table([row]).num_rows == 1
    with pytest.raises(ValueError, match="missing"):
        schema.arrow_table([{k: v for k, v in row.items() if k != "gap_ms"}])
    with pytest.raises(ValueError, match="extra"):
        schema.arrow_table([{**row, "oops": 1}])
    with pytest.raises(ValueError, match="not nullable"):
        schema.arrow_table([{**row, "session_id": None}])


def test_unknown_table_is_an_error() -> None:
    with pytest.raises(KeyError):
        load("nope")
