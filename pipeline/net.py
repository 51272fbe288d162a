"""The network vocabulary shared by the capture proxy, the readers, reassembly and the model,
each defined once: TCP flags, an endpoint, a direction, the key of a flow, the broker ports.

No imports beyond the standard library: the capture proxy uses it too.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10
URG = 0x20

# Broker ports that tell the server side when a capture starts mid-connection (STOMP, STOMP+TLS).
DEFAULT_BROKER_PORTS: tuple[int, ...] = (61613, 61614)


class Endpoint(NamedTuple):
    """One end of a TCP connection; compares and sorts as the (ip, port) tuple."""

    ip: str
    port: int

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


class Direction(StrEnum):
    """Which way bytes travel; the value is what the tables store."""

    C2S = "c2s"  # client to server (broker)
    S2C = "s2c"

    @classmethod
    def of(cls, from_client: bool) -> Direction:
        return cls.C2S if from_client else cls.S2C

    @property
    def side(self) -> str:
        """The sending side: "client" or "server"."""
        return "client" if self is Direction.C2S else "server"

    @property
    def reverse(self) -> Direction:
        return Direction.S2C if self is Direction.C2S else Direction.C2S


FlowEnds = tuple[str, int, str, int]  # (ip_a, port_a, ip_b, port_b), the smaller endpoint first


def flow_ends(src_ip: str, src_port: int, dst_ip: str, dst_port: int) -> FlowEnds:
    """The 4-tuple with the smaller (ip, port) endpoint first: the same for both directions."""
    if (dst_ip, dst_port) < (src_ip, src_port):
        return dst_ip, dst_port, src_ip, src_port
    return src_ip, src_port, dst_ip, dst_port


def flow_key(src_ip: str, src_port: int, dst_ip: str, dst_port: int) -> str:
    """`flow_ends` as one string, the key the Spark passes group and sort a flow by."""
    ip_a, port_a, ip_b, port_b = flow_ends(src_ip, src_port, dst_ip, dst_port)
    return f"{ip_a}|{port_a}|{ip_b}|{port_b}"


def key_ends(key: str) -> FlowEnds:
    """The inverse of `flow_key`."""
    ip_a, port_a, ip_b, port_b = key.split("|")
    return ip_a, int(port_a), ip_b, int(port_b)
