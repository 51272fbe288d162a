from __future__ import annotations

from capture.accepting import AcceptCounters
from capture.relay import ProxyCounters
from capture.stats import StatsSnapshot, parse_stats_line
from capture.writer import WriterCounters


def test_stats_line_round_trips() -> None:
    proxy = ProxyCounters(connections_open=2, connections_total=9, bytes_client_to_server=10,
                          bytes_server_to_client=20, upstream_failures=1,
                          connections_left_open=6)
    writer = WriterCounters(bytes_captured=25, bytes_dropped=5, files_written=3, write_errors=4,
                            backlog_waits=7, bytes_loss_recorded=2, disk_full_waits=1,
                            disk_full_timeouts=1)
    accepting = AcceptCounters(accept_limit_waits=8, accept_failures=11)
    line = StatsSnapshot.take(proxy, writer, accepting).line("summary")
    assert line.startswith("summary ")
    assert parse_stats_line(line) == {
        "connections_open": 2,
        "connections_total": 9,
        "bytes_client_to_server": 10,
        "bytes_server_to_client": 20,
        "bytes_captured": 25,
        "bytes_dropped": 5,
        "files_written": 3,
        "upstream_failures": 1,
        "write_errors": 4,
        "connections_left_open": 6,
        "backlog_waits": 7,
        "bytes_loss_recorded": 2,
        "bytes_loss_unrecorded": 3,
        "disk_full_waits": 1,
        "disk_full_timeouts": 1,
        "accept_limit_waits": 8,
        "accept_failures": 11,
    }


def test_without_capture_the_capture_counters_are_zero() -> None:
    line = StatsSnapshot.take(ProxyCounters(connections_total=1), None).line()
    counters = parse_stats_line(line)
    assert counters["connections_total"] == 1 and counters["bytes_captured"] == 0
