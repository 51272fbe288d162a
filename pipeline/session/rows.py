"""Row builders: one function per table row shape, columns exactly as in ``schemas/tables``
(the frames table's rows are held as columns, `pipeline.session.frame_rows`; the messages and
acks tables' as slotted objects, `pipeline.session.message_rows`).

Rows carry ``date`` (UTC date of the table's main timestamp); the lake writer adds
``batch_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.session.clock import elapsed_ms
from pipeline.session.streams import Stamp

Row = dict[str, Any]
NS_SUFFIX = "_ns"  # a timestamp column's exact twin: ts and ts_ns, acked_at and acked_at_ns
DATE_COLUMN = "date"  # the UTC date of the row's ``ts``
TableRow = Mapping[str, Any]  # a Row, or a row held otherwise and read by column name
Body = tuple[int, str | None, str | None, bytes | None]


def heartbeat_row(
    session_id: str,
    direction: str,
    at: Stamp,
    stream_offset: int,
    gap_ms: float | None,
    expected_ms: int | None,
    thresholds: tuple[float, ...],
) -> Row:
    lateness: float | None = None
    late: list[bool | None] = [None, None, None]
    if expected_ms and gap_ms is not None:
        lateness = gap_ms - expected_ms
        for i, factor in enumerate(thresholds[:3]):
            late[i] = gap_ms > expected_ms * factor
    return {
        "session_id": session_id,
        "direction": direction,
        "ts": at.ts,
        "ts_ns": at.ts_ns,
        "stream_offset": stream_offset,
        "gap_ms": gap_ms,
        "expected_ms": expected_ms,
        "lateness_ms": lateness,
        "late_1x": late[0],
        "late_1_5x": late[1],
        "late_2x": late[2],
        "date": at.date,
    }


def receipt_row(
    session_id: str,
    receipt_id: str,
    request_command: str | None,
    request_frame_index: int | None,
    requested: Stamp | None,
    received: Stamp | None,
    outcome: str,
) -> Row:
    main = requested if requested is not None else received
    assert main is not None
    return {
        "session_id": session_id,
        "receipt_id": receipt_id,
        "request_command": request_command,
        "request_frame_index": request_frame_index,
        "requested_at": requested.ts if requested else None,
        "requested_at_ns": requested.ts_ns if requested else None,
        "received_at": received.ts if received else None,
        "received_at_ns": received.ts_ns if received else None,
        "latency_ms": elapsed_ms(requested.ts_ns, received.ts_ns)
        if requested and received
        else None,
        "outcome": outcome,
        "date": main.date,
    }


def error_row(
    session_id: str,
    frame_index: int,
    headers: dict[str, str],
    body_length: int,
    body_sha256: str | None,
    body_preview: str | None,
    at: Stamp,
) -> Row:
    return {
        "session_id": session_id,
        "frame_index": frame_index,
        "ts": at.ts,
        "ts_ns": at.ts_ns,
        "message": headers.get("message"),
        "receipt_id": headers.get("receipt-id"),
        "content_type": headers.get("content-type"),
        "body_length": body_length,
        "body_sha256": body_sha256,
        "body_preview": body_preview,
        "connection_closed": None,
        "date": at.date,
    }


def websocket_control_row(
    session_id: str,
    direction: str,
    side: str,
    kind: str,
    at: Stamp,
    tcp_offset: int,
    payload_length: int,
    rtt_ms: float | None,
    close_code: int | None,
    close_reason: str | None,
) -> Row:
    return {
        "session_id": session_id,
        "direction": direction,
        "side": side,
        "kind": kind,
        "ts": at.ts,
        "ts_ns": at.ts_ns,
        "tcp_offset": tcp_offset,
        "payload_length": payload_length,
        "rtt_ms": rtt_ms,
        "close_code": close_code,
        "close_reason": close_reason,
        "date": at.date,
    }


def anomaly_row(
    source: str,
    kind: str,
    session_id: str | None,
    direction: str | None,
    at: Stamp | None,
    stream_offset: int | None,
    detail: str,
) -> Row:
    file = getattr(at, "file", None)  # a chunk has one, a stamp not
    file_offset = getattr(at, "file_offset", None)
    return {
        "source": source,
        "kind": kind,
        "session_id": session_id,
        "direction": direction,
        "file": file,
        "file_offset": file_offset,
        "stream_offset": stream_offset,
        "ts": at.ts if at else None,
        "ts_ns": at.ts_ns if at else None,
        "detail": detail,
        "date": at.date if at else None,
    }
