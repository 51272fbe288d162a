"""Check a sample capture against its client-side record, using tshark's TCP reassembly.

This is an independent cross-check for make_samples.py, not the pipeline's decoder: it
splits each direction of each TCP stream into STOMP frames and heart-beats with the rule
documented in samples/README.md: one EOL right after a frame's NUL and in the same TCP
segment belongs to the frame; every other EOL between frames is a heart-beat.

A connection the record marks `"transport": "websocket"` is read as RFC 6455 after its HTTP
upgrade: its data messages (unmasked, fragments joined) stand for the segments, so one EOL
right after a frame's NUL in the same WebSocket message belongs to the frame and a message
holding only an EOL is a heart-beat. No extension is supported (stomp.py offers none).
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FOLLOW_SEPARATOR = "=" * 20
NODE_RE = re.compile(r"^Node ([01]): (.+):(\d+)$")


@dataclass(slots=True)
class DirectionSummary:
    frames: Counter[str] = field(default_factory=Counter)
    heart_beats: int = 0
    incomplete_bytes: int = 0


@dataclass(slots=True)
class StreamBytes:
    """Both directions of one TCP stream, as tshark's per-segment payloads."""

    ports: tuple[int, int]
    from_node0: list[bytes]
    from_node1: list[bytes]

    def split(self, client_port: int) -> tuple[list[bytes], list[bytes]]:
        """(client->server, server->client) segments."""
        if self.ports[0] == client_port:
            return self.from_node0, self.from_node1
        return self.from_node1, self.from_node0


def _tshark(pcap: Path, *args: str) -> str:
    result = subprocess.run(
        ["tshark", "-r", str(pcap), *args], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"tshark failed on {pcap}: {result.stderr.strip()}")
    return result.stdout


def conversation_count(pcap: Path) -> int:
    return sum("<->" in line for line in _tshark(pcap, "-q", "-z", "conv,tcp").splitlines())


def stream_bytes(pcap: Path) -> list[StreamBytes]:
    ids = sorted({int(x) for x in _tshark(pcap, "-T", "fields", "-e", "tcp.stream").split()})
    args = ["-q"]
    for stream_id in ids:
        args += ["-z", f"follow,tcp,raw,{stream_id}"]
    streams: list[StreamBytes] = []
    ports: dict[str, int] = {}
    chunks: dict[str, list[bytes]] = {"0": [], "1": []}
    in_block = False
    for line in _tshark(pcap, *args).splitlines():
        if line.startswith("Follow: tcp,raw"):
            in_block, ports, chunks = True, {}, {"0": [], "1": []}
        elif in_block and line.startswith(FOLLOW_SEPARATOR):
            streams.append(StreamBytes((ports["0"], ports["1"]), chunks["0"], chunks["1"]))
            in_block = False
        elif in_block and (match := NODE_RE.match(line)):
            ports[match.group(1)] = int(match.group(3))
        elif in_block and line.strip() and not line.startswith("Filter:"):
            node = "1" if line.startswith("\t") else "0"
            chunks[node].append(bytes.fromhex(line.strip()))
    return streams


def _content_length(header_block: bytes) -> int | None:
    for line in header_block.split(b"\n")[1:]:
        name, _, value = line.rstrip(b"\r").partition(b":")
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def summarize(segments: list[bytes]) -> DirectionSummary:
    data = b"".join(segments)
    segment_starts, offset = set(), 0
    for segment in segments:
        segment_starts.add(offset)
        offset += len(segment)
    summary = DirectionSummary()
    i, after_frame = 0, False
    while i < len(data):
        eol = 1 if data[i : i + 1] == b"\n" else 2 if data[i : i + 2] == b"\r\n" else 0
        if eol:
            is_frame_trailer = after_frame and i not in segment_starts
            if not is_frame_trailer:
                summary.heart_beats += 1
            after_frame = False
            i += eol
            continue
        header_end = data.find(b"\n\n", i)
        crlf_end = data.find(b"\r\n\r\n", i)
        if crlf_end != -1 and (header_end == -1 or crlf_end < header_end):
            header_end, body_start = crlf_end, crlf_end + 4
        else:
            body_start = header_end + 2
        if header_end == -1:
            summary.incomplete_bytes = len(data) - i
            break
        length = _content_length(data[i:header_end])
        end = body_start + length if length is not None else data.find(b"\0", body_start)
        if end == -1 or end >= len(data) or data[end] != 0:
            summary.incomplete_bytes = len(data) - i
            break
        command = data[i : data.find(b"\n", i)].rstrip(b"\r").decode("ascii", "replace")
        summary.frames[command] += 1
        i, after_frame = end + 1, True
    return summary


def websocket_messages(stream: bytes) -> list[bytes]:
    """The data messages of one direction of a WebSocket connection, upgrade included; a
    frame cut off by the end of the capture is left out."""
    i, messages, partial = stream.index(b"\r\n\r\n") + 4, [], b""
    while i + 2 <= len(stream):
        fin, opcode = stream[i] & 0x80, stream[i] & 0x0F
        masked, length = stream[i + 1] & 0x80, stream[i + 1] & 0x7F
        i += 2
        if length >= 126:
            size = 2 if length == 126 else 8
            length, i = int.from_bytes(stream[i : i + size], "big"), i + size
        key = stream[i : i + 4] if masked else b""
        i += len(key)
        payload = stream[i : i + length]
        if len(payload) < length:
            break
        i += length
        if key:
            payload = bytes(b ^ key[n % 4] for n, b in enumerate(payload))
        if opcode in (0, 1, 2):  # continuation, text, binary; control frames carry no STOMP
            partial += payload
            if fin:
                messages.append(partial)
                partial = b""
    return messages


def compare(expected: dict[str, Any], pcap: Path) -> list[str]:
    """Mismatches between the capture and the client-side record (empty when they agree)."""
    problems: list[str] = []
    connections = expected["connections"]
    conversations = conversation_count(pcap)
    if conversations != len(connections):
        problems.append(f"tshark conv,tcp shows {conversations}, record has {len(connections)}")
    streams = {tuple(sorted(s.ports)): s for s in stream_bytes(pcap)}
    for conn in connections:
        key = tuple(sorted((conn["client_port"], conn["server_port"])))
        stream = streams.get(key)
        if stream is None:
            problems.append(f"{conn['name']}: no TCP stream for client port {conn['client_port']}")
            continue
        sent, received = stream.split(conn["client_port"])
        if conn.get("transport") == "websocket":
            sent = websocket_messages(b"".join(sent))
            received = websocket_messages(b"".join(received))
        for label, data, frames_key, beats_key in (
            ("sent", sent, "frames_sent", "heart_beats_sent"),
            ("received", received, "frames_received", "heart_beats_received"),
        ):
            seen = summarize(data)
            if dict(seen.frames) != conn[frames_key]:
                problems.append(
                    f"{conn['name']} {label}: capture {dict(seen.frames)} != {conn[frames_key]}"
                )
            if seen.heart_beats != conn[beats_key]:
                problems.append(
                    f"{conn['name']} {label}: capture has {seen.heart_beats} heart-beats,"
                    f" client saw {conn[beats_key]}"
                )
            if seen.incomplete_bytes:
                problems.append(f"{conn['name']} {label}: {seen.incomplete_bytes} trailing bytes")
    return problems
