"""The operator's view of a running proxy: one ``key=value`` line, periodic and final."""

from __future__ import annotations

from dataclasses import dataclass

from capture.accepting import AcceptCounters
from capture.relay import ProxyCounters
from capture.writer import WriterCounters


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    connections_open: int
    connections_total: int
    bytes_client_to_server: int
    bytes_server_to_client: int
    bytes_captured: int
    bytes_dropped: int
    files_written: int
    upstream_failures: int
    write_errors: int
    connections_left_open: int
    backlog_waits: int = 0
    bytes_loss_recorded: int = 0  # dropped bytes covered by capture-loss blocks in the files
    bytes_loss_unrecorded: int = 0  # dropped bytes not (yet) in any capture-loss block
    disk_full_waits: int = 0
    disk_full_timeouts: int = 0
    accept_limit_waits: int = 0  # times new clients had to wait: max connections open
    accept_failures: int = 0  # accept() failed for want of descriptors or memory

    @classmethod
    def take(
        cls,
        proxy: ProxyCounters,
        writer: WriterCounters | None,
        accepting: AcceptCounters | None = None,
    ) -> StatsSnapshot:
        writer = writer or WriterCounters()
        accepting = accepting or AcceptCounters()
        return cls(
            connections_open=proxy.connections_open,
            connections_total=proxy.connections_total,
            bytes_client_to_server=proxy.bytes_client_to_server,
            bytes_server_to_client=proxy.bytes_server_to_client,
            bytes_captured=writer.bytes_captured,
            bytes_dropped=writer.bytes_dropped,
            files_written=writer.files_written,
            upstream_failures=proxy.upstream_failures,
            write_errors=writer.write_errors,
            connections_left_open=proxy.connections_left_open,
            backlog_waits=writer.backlog_waits,
            bytes_loss_recorded=writer.bytes_loss_recorded,
            bytes_loss_unrecorded=writer.bytes_dropped - writer.bytes_loss_recorded,
            disk_full_waits=writer.disk_full_waits,
            disk_full_timeouts=writer.disk_full_timeouts,
            accept_limit_waits=accepting.accept_limit_waits,
            accept_failures=accepting.accept_failures,
        )

    def line(self, label: str = "stats") -> str:
        return (
            f"{label} connections_open={self.connections_open}"
            f" connections_total={self.connections_total}"
            f" bytes_client_to_server={self.bytes_client_to_server}"
            f" bytes_server_to_client={self.bytes_server_to_client}"
            f" bytes_captured={self.bytes_captured}"
            f" bytes_dropped={self.bytes_dropped}"
            f" files_written={self.files_written}"
            f" upstream_failures={self.upstream_failures}"
            f" write_errors={self.write_errors}"
            f" connections_left_open={self.connections_left_open}"
            f" backlog_waits={self.backlog_waits}"
            f" bytes_loss_recorded={self.bytes_loss_recorded}"
            f" bytes_loss_unrecorded={self.bytes_loss_unrecorded}"
            f" disk_full_waits={self.disk_full_waits}"
            f" disk_full_timeouts={self.disk_full_timeouts}"
            f" accept_limit_waits={self.accept_limit_waits}"
            f" accept_failures={self.accept_failures}"
        )


def parse_stats_line(line: str) -> dict[str, int]:
    """The counters of a line written by ``StatsSnapshot.line`` (for tests and tooling)."""
    fields = line.strip().split()
    return {key: int(value) for key, _, value in (f.partition("=") for f in fields[1:])}
