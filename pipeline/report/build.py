"""The report from the lake's views (see `pipeline.audit.views.register_views`) to one HTML page."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, overload

from pipeline.audit.registry import get_query
from pipeline.audit.views import TimeWindow
from pipeline.report import data
from pipeline.report.html import Section, Table, render_page
from pipeline.report.svg import (
    PALETTE,
    Bar,
    Group,
    Series,
    bar_chart,
    grouped_histogram,
    number,
    time_lines,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TOP_DESTINATIONS = 6
TABLE_ROWS = 15


@dataclass(frozen=True, slots=True)
class ReportInfo:
    title: str
    source: str  # the lake it was made from
    window: TimeWindow
    generated_at: datetime


def build_report(spark: SparkSession, info: ReportInfo) -> str:
    sessions, messages = spark.table("sessions"), spark.table("messages")
    heartbeats, anomalies = spark.table("heartbeats"), spark.table("anomalies")
    errors, receipts = spark.table("errors"), spark.table("receipts")
    span = _rows(data.traffic_span(messages, sessions))[0]
    first_last = (span["first_us"], span["last_us"])
    sections = [
        overview_section(sessions, messages, anomalies, info.window, first_last),
        rates_section(messages, first_last),
        ack_latency_section(spark, messages),
        delivery_latency_section(messages),
        connect_latency_section(sessions),
        receipt_latency_section(receipts),
        errors_section(errors, sessions),
        heartbeat_section(spark, heartbeats),
        end_reason_section(sessions),
        talkers_section(sessions),
        violations_section(spark, anomalies),
    ]
    meta = (
        f"Lake {info.source}; {describe_window(info.window)}; generated "
        f"{info.generated_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC. "
        "Hover over a mark for its numbers; the tables hold them too."
    )
    return render_page(info.title, meta, sections)


def describe_window(window: TimeWindow) -> str:
    def text(moment: datetime | None) -> str:
        return "…" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"

    if window.is_open:
        return "all traffic in the lake"
    return f"traffic from {text(window.since)} to {text(window.until)}"


def overview_section(
    sessions: DataFrame,
    messages: DataFrame,
    anomalies: DataFrame,
    window: TimeWindow,
    span_us: tuple[int | None, int | None],
) -> Section:
    row = _rows(data.overview(sessions, messages, anomalies))[0]
    first, last = _utc(span_us[0]), _utc(span_us[1])
    items: list[tuple[str, Any]] = [
        ("first traffic", f"{first:%Y-%m-%d %H:%M:%S} UTC" if first else None),
        ("last traffic", f"{last:%Y-%m-%d %H:%M:%S} UTC" if last else None),
        *((name.replace("_", " "), row[name]) for name in row),
    ]
    table = Table(("measure", "value"), items)
    return Section("overview", "Overview", describe_window(window).capitalize() + ".", "", [table])


SENT_COLOR, DELIVERED_COLOR = PALETTE[0], PALETTE[3]


def rates_section(messages: DataFrame, span_us: tuple[int | None, int | None]) -> Section:
    about = (
        "SEND (sent, solid) and MESSAGE (delivered, dashed) frames per second, one small chart "
        "per destination on the same time axis, busiest first; the rest are summed as "
        "'(other)'. Each chart has its own scale: compare shapes, read values in the table."
    )
    first_us, last_us = span_us
    rows = []
    if first_us is not None and last_us is not None:
        width = data.choose_bucket((last_us - first_us) / 1e6)
        rows = _rows(data.rates_by_destination(messages, width))
    if not rows:
        chart = time_lines("Messages per second per destination", [], y_title="messages / s")
        return Section("rates", "Message rate per destination", about, chart)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        totals[r["destination"]][0] += r["sent"]
        totals[r["destination"]][1] += r["delivered"]
    ranked = sorted(totals, key=lambda d: (-sum(totals[d]), d))
    top = ranked[:TOP_DESTINATIONS]
    counts: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        name = r["destination"] if r["destination"] in top else "(other)"
        counts[(name, r["bucket_us"])][0] += r["sent"]
        counts[(name, r["bucket_us"])][1] += r["delivered"]
    names = top + (["(other)"] if len(ranked) > len(top) else [])
    buckets = range(min(b for _, b in counts), max(b for _, b in counts) + 1, width * 1_000_000)
    charts, summary = [], []
    for name in names:
        series: list[Series] = []
        peaks: list[tuple[float, datetime] | None] = []
        for kind, label, color in ((0, "sent", SENT_COLOR), (1, "delivered", DELIVERED_COLOR)):
            values = [counts.get((name, b), [0, 0])[kind] for b in buckets]
            points = tuple((_utc(b), v / width) for b, v in zip(buckets, values, strict=True))
            tips = tuple(
                f"{name}: {v} {label} in the {width} s from {t:%H:%M:%S} ({number(v / width)}/s)"
                for (t, _), v in zip(points, values, strict=True)
            )
            if any(values):
                series.append(Series(label, points, tips, color, dashed=kind == 1))
                peak = max(range(len(values)), key=values.__getitem__)
                peaks.append((values[peak] / width, points[peak][0]))
            else:
                peaks.append(None)
        charts.append(time_lines(name, series, y_title="messages / s", width=360, height=230))
        sent, delivered = totals[name] if name in totals else _sum_other(totals, top)
        summary.append((name, sent, delivered, *(_peak_text(p) for p in peaks)))
    key = (
        '<div class="key"><span class="sent"></span> sent (SEND) '
        '<span class="delivered"></span> delivered (MESSAGE)</div>'
    )
    chart = f'{key}<div class="multiples">{"".join(charts)}</div>'
    table = Table(
        ("destination", "sent", "delivered", "peak sent/s", "peak delivered/s"),
        summary,
        caption=f"Totals and peaks ({width} s buckets)",
    )
    return Section("rates", "Message rate per destination", about, chart, [table])


def _cumulative_bins(
    counts: dict[int, int], labels: list[str], unit: str, by_then: str
) -> tuple[list[Group], list[tuple[str, int, float]]]:
    """Histogram bins from the first to the last non-empty one, each with the cumulative share
    of the count up to it: the chart's groups and the table's rows."""
    groups: list[Group] = []
    rows: list[tuple[str, int, float]] = []
    if counts:
        total = sum(counts.values())
        cumulative = 0
        for i in range(min(counts), max(counts) + 1):
            n = counts.get(i, 0)
            cumulative += n
            share = 100 * cumulative / total
            tip = f"{labels[i]} ms: {n} {unit} ({share:.1f}% {by_then})"
            groups.append(Group(labels[i], (n,), (tip,)))
            rows.append((labels[i], n, round(share, 1)))
    return groups, rows


def ack_latency_section(spark: SparkSession, messages: DataFrame) -> Section:
    about = (
        "Time from a MESSAGE to the ACK or NACK that settled it (a cumulative ACK settles "
        "every earlier message of its subscription). Auto-acknowledged messages have none."
    )
    counts = {r["bin"]: r["messages"] for r in _rows(data.ack_latency_histogram(messages))}
    labels = data.bin_labels(data.ACK_LATENCY_EDGES_MS)
    groups, rows = _cumulative_bins(counts, labels, "messages", "settled by then")
    chart = grouped_histogram(
        "Ack latency distribution",
        groups,
        ["messages"],
        x_title="ack latency (ms)",
        y_title="messages",
    )
    summary = _rows(data.ack_latency_summary(messages))[0]
    stats = Table(
        ("settled", "p50 ms", "p90 ms", "p99 ms", "max ms"),
        [tuple(summary[k] for k in ("settled", "p50", "p90", "p99", "max"))],
        caption="Percentiles",
    )
    consumers = (
        get_query("ack_latency")
        .run(spark)
        .select(
            "login",
            "client_ip",
            "subscription",
            "destination",
            "settled",
            "p50_ms",
            "p99_ms",
            "max_ms",
        )
    )
    slowest = Table(
        ("login", "client", "subscription", "destination", "settled", "p50 ms", "p99 ms", "max ms"),
        [tuple(r.values()) for r in _rows(consumers.limit(TABLE_ROWS))],
        caption="Consumers, slowest p99 first",
    )
    histogram = Table(("latency ms", "messages", "cumulative %"), rows, caption="Distribution")
    return Section("ack-latency", "Ack latency", about, chart, [stats, histogram, slowest])


def latency_parts(
    frame: DataFrame, column: str, label: str, unit_of_count: str
) -> tuple[str, list[Table]]:
    """A latency histogram (with cumulative share per bin) and its percentiles."""
    counts = {
        r["bin"]: r["n"]
        for r in _rows(data.latency_histogram(frame, column, data.LATENCY_EDGES_MS))
    }
    labels = data.bin_labels(data.LATENCY_EDGES_MS)
    groups, rows = _cumulative_bins(counts, labels, unit_of_count, "by then")
    chart = grouped_histogram(
        f"{label} distribution", groups, [unit_of_count], x_title=f"{label.lower()} (ms)",
        y_title=unit_of_count,
    )  # fmt: skip
    summary = _rows(data.latency_summary(frame, column))[0]
    stats = Table(
        (unit_of_count, "p50 ms", "p90 ms", "p99 ms", "max ms"),
        [tuple(summary[k] for k in ("n", "p50", "p90", "p99", "max"))],
        caption="Percentiles",
    )
    histogram = Table(("latency ms", unit_of_count, "cumulative %"), rows, caption="Distribution")
    return chart, [stats, histogram]


def _by(frame: DataFrame, group: str, column: str, title: str, caption: str) -> Table:
    rows = _rows(data.latency_by(frame, group, column, TABLE_ROWS))
    return Table(
        (title, "n", "p50 ms", "p99 ms", "max ms"),
        [(r[group], r["n"], r["p50"], r["p99"], r["max"]) for r in rows],
        caption=caption,
    )


def delivery_latency_section(messages: DataFrame) -> Section:
    about = (
        "End to end: from a SEND to the MESSAGE that delivered it, across sessions (same "
        "destination, body length and body sha256; the latest such SEND before the MESSAGE). "
        "Messages whose SEND was not captured are left out."
    )
    latencies = data.delivery_latencies(messages)
    chart, tables = latency_parts(latencies, "latency_ms", "Delivery latency", "messages")
    tables.append(
        _by(latencies, "destination", "latency_ms", "destination", "By destination, slowest")
    )
    return Section("delivery-latency", "Delivery latency (SEND → MESSAGE)", about, chart, tables)


def connect_latency_section(sessions: DataFrame) -> Section:
    about = "From CONNECT (or STOMP) to the broker's CONNECTED, per session."
    chart, tables = latency_parts(sessions, "connect_latency_ms", "Connect latency", "sessions")
    tables.append(
        _by(sessions, "login", "connect_latency_ms", "login", "By login, slowest p99 first")
    )
    return Section("connect-latency", "Connect latency", about, chart, tables)


def receipt_latency_section(receipts: DataFrame) -> Section:
    about = (
        "From a frame carrying a receipt header to its RECEIPT. Receipts never answered are "
        "counted by command below."
    )
    chart, tables = latency_parts(receipts, "latency_ms", "Receipt latency", "receipts")
    tables.append(
        _by(receipts, "request_command", "latency_ms", "command", "By command, slowest p99 first")
    )
    outcomes = Table(
        ("command", "outcome", "receipts"),
        [
            (r["request_command"], r["outcome"], r["n"])
            for r in _rows(
                receipts.groupBy("request_command", "outcome")
                .count()
                .withColumnRenamed("count", "n")
                .orderBy("request_command", "outcome")
            )
        ],
        caption="Outcomes",
    )
    tables.append(outcomes)
    return Section("receipt-latency", "Receipt latency", about, chart, tables)


def errors_section(errors: DataFrame, sessions: DataFrame) -> Section:
    about = (
        "ERROR frames the brokers sent (who, when, the message header) and the logins they "
        "refused (an ERROR instead of CONNECTED)."
    )
    frames = _rows(data.error_frames(errors, sessions))
    by_message: dict[str, int] = defaultdict(int)
    for r in frames:
        by_message[r["message"] or "(no message header)"] += 1
    bars = [
        Bar(message, n, f"{message}: {n} ERROR frames")
        for message, n in sorted(by_message.items(), key=lambda item: (-item[1], item[0]))
    ]
    failed = _rows(data.failed_logins(sessions, errors))
    tables = [
        Table(
            ("started (UTC)", "login", "client", "port", "message"),
            [
                (f"{_utc(r['started_us']):%Y-%m-%d %H:%M:%S}", r["login"], r["client_ip"],
                 r["client_port"], r["message"])
                for r in failed
            ],
            caption=f"Failed logins ({len(failed)})",
        ),
        Table(
            ("time (UTC)", "login", "client", "port", "message", "logged in", "closed"),
            [
                (f"{_utc(r['ts_us']):%Y-%m-%d %H:%M:%S.%f}"[:-3], r["login"], r["client_ip"],
                 r["client_port"], r["message"], _yes_no(r["logged_in"]),
                 _yes_no(r["connection_closed"]))
                for r in frames[: TABLE_ROWS * 2]
            ],
            caption=f"ERROR frames ({len(frames)}; the first {TABLE_ROWS * 2} shown)",
        ),
    ]  # fmt: skip
    chart = bar_chart("ERROR frames by message", bars)
    return Section("errors", "ERROR frames and failed logins", about, chart, tables)


def _yes_no(value: bool | None) -> str | None:
    return None if value is None else ("yes" if value else "no")


def heartbeat_section(spark: SparkSession, heartbeats: DataFrame) -> Section:
    about = (
        "Each heart-beat's gap since the previous byte in its direction, as a multiple of the "
        "negotiated interval; beyond 1.5x a peer may already consider the connection dead."
    )
    labels = data.bin_labels(data.LATENESS_EDGES, "x")
    counts = {
        (r["direction"], r["bin"]): r["beats"] for r in _rows(data.heartbeat_lateness(heartbeats))
    }
    directions = (("c2s", "client → server"), ("s2c", "server → client"))
    groups, rows = [], []
    for i, label in enumerate(labels):
        values = tuple(counts.get((d, i), 0) for d, _ in directions)
        tips = tuple(
            f"{name}, gap {label} the interval: {v} beats"
            for (_, name), v in zip(directions, values, strict=True)
        )
        groups.append(Group(label, values, tips))
        rows.append((label, *values))
    chart = grouped_histogram(
        "Heart-beat lateness",
        groups,
        [name for _, name in directions],
        x_title="gap / negotiated interval",
        y_title="heart-beats",
    )
    late = (
        get_query("late_heartbeats")
        .run(spark)
        .select(
            "login",
            "client_ip",
            "client_port",
            "late_side",
            "expected_ms",
            "beats",
            "late_1_5x",
            "late_2x",
            "worst_ratio",
        )
    )
    late_table = Table(
        ("login", "client", "port", "late side", "interval ms", "beats", ">1.5x", ">2x", "worst"),
        [tuple(r.values()) for r in _rows(late.limit(TABLE_ROWS))],
        caption="Sessions with beats later than 1.5x",
    )
    distribution = Table(
        ("gap / interval", *(n for _, n in directions)), rows, caption="Beats per lateness"
    )
    return Section("heart-beats", "Heart-beat lateness", about, chart, [late_table, distribution])


def end_reason_section(sessions: DataFrame) -> Section:
    about = (
        "How connections ended: disconnect_receipt (DISCONNECT answered), disconnect, error "
        "(an ERROR was the last frame), fin, rst, capture_end (still open when capture ended)."
    )
    rows = _rows(data.end_reasons(sessions))
    total = sum(r["sessions"] for r in rows) or 1
    bars = [
        Bar(
            r["end_reason"],
            r["sessions"],
            f"{r['end_reason']}: {r['sessions']} sessions ({100 * r['sessions'] / total:.1f}%)",
        )
        for r in rows
    ]
    table = Table(
        ("end reason", "sessions", "%"),
        [(r["end_reason"], r["sessions"], round(100 * r["sessions"] / total, 1)) for r in rows],
    )
    chart = bar_chart("Sessions by end reason", bars)
    return Section("end-reasons", "Sessions by end reason", about, chart, [table])


def talkers_section(sessions: DataFrame) -> Section:
    about = "Clients (login@address) with the most bytes on the wire, both directions."
    rows = _rows(data.top_talkers(sessions))
    bars = [
        Bar(
            r["client"],
            r["bytes"],
            f"{r['client']}: {r['bytes']:,} bytes ({r['bytes_sent']:,} sent, "
            f"{r['bytes_received']:,} received) in {r['sessions']} sessions",
        )
        for r in rows
    ]
    table = Table(
        ("client", "sessions", "bytes sent", "bytes received", "SEND", "MESSAGE"),
        [
            (
                r["client"],
                r["sessions"],
                r["bytes_sent"],
                r["bytes_received"],
                r["messages_sent"],
                r["messages_delivered"],
            )
            for r in rows
        ],
    )
    return Section(
        "top-talkers", "Top talkers", about, bar_chart("Top talkers", bars, unit=" B"), [table]
    )


def violations_section(spark: SparkSession, anomalies: DataFrame) -> Section:
    about = (
        "STOMP protocol violations (recorded, never fatal) by kind, and by client; other "
        "anomalies of the capture and of TCP below."
    )
    kinds = _rows(data.anomalies_by_kind(anomalies))
    stomp = [k for k in kinds if k["source"] == "stomp"]
    bars = [
        Bar(
            k["kind"],
            k["occurrences"],
            f"{k['kind']}: {k['occurrences']} in {k['sessions']} sessions",
        )
        for k in stomp
    ]
    by_client = (
        get_query("violations")
        .run(spark)
        .select("client_ip", "login", "kind", "occurrences", "sessions", "example")
    )
    tables = [
        Table(
            ("client", "login", "kind", "occurrences", "sessions", "example"),
            [tuple(r.values()) for r in _rows(by_client.limit(TABLE_ROWS))],
            caption="By client",
        ),
        Table(
            ("source", "kind", "occurrences", "sessions"),
            [
                (k["source"], k["kind"], k["occurrences"], k["sessions"])
                for k in kinds
                if k["source"] != "stomp"
            ],
            caption="Other anomalies",
        ),
    ]
    return Section(
        "violations",
        "Protocol violations",
        about,
        bar_chart("Protocol violations by kind", bars),
        tables,
    )


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


@overload
def _utc(micros: int) -> datetime: ...
@overload
def _utc(micros: None) -> None: ...
def _utc(micros: int | None) -> datetime | None:
    return None if micros is None else datetime.fromtimestamp(micros / 1e6, UTC)


def _sum_other(totals: dict[str, list[int]], top: Sequence[str]) -> list[int]:
    rest = [v for name, v in totals.items() if name not in top]
    return [sum(v[0] for v in rest), sum(v[1] for v in rest)]


def _peak_text(peak: tuple[float, datetime] | None) -> str | None:
    if peak is None:
        return None
    rate, moment = peak
    return f"{number(rate)} at {moment:%H:%M:%S}"
