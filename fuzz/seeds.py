"""Real inputs to start fuzzing from: the bundled sample captures and the STOMP byte streams of
their connections (each direction reassembled), plus a few hand-made edge cases."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pipeline.reassembly import Data, Segment
from tests.support.local_reassembly import LocalReassembly

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"

# A passcode no detail, log line or repr may ever show (see the decoder target's checks).
PASSCODE = "Zx9!fuzz-secret"

EDGE_STREAMS = (
    b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:%s\n\n\x00" % PASSCODE.encode(),
    b"CONNECTED\r\nversion:1.2\r\nheart-beat:0,0\r\n\r\n\x00\r\n\n",
    b"SEND\ndestination:/q\ncontent-length:5\n\nab\x00cd\x00\n",
    b"SEND\ndestination:/q\ncontent-length:2147483648\n\nbody\x00",
    b"MESSAGE\nmessage-id:a\\cb\nsubscription:0\ndestination:/q\n\n\xff\xfe\x00",
    b"send\nDestination: /q \n\nlenient\x00",
    b"SEND\nx:" + b"y" * 300 + b"\n\n\x00",
    b"\x00\x00\n\nGET / HTTP/1.1\r\nHost: broker\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(32)),
    b"ACK\nid:\\x\nbad\n:empty-name\n\n\x00NACK\n\n\x00",
)


@cache
def capture_files() -> tuple[bytes, ...]:
    return tuple(path.read_bytes() for path in sorted(SAMPLES.glob("*.pcap*")))


@cache
def stomp_streams() -> tuple[bytes, ...]:
    """Each direction of each sample connection, as the decoder would see it."""
    streams: dict[tuple[str, bool], bytearray] = {}
    paths = sorted(str(p) for p in SAMPLES.glob("*.pcap*"))
    for event in LocalReassembly(paths, broker_ports=(61613,)):
        if type(event) is Segment and type(event.event) is Data:
            key = (event.connection_id, event.from_client)
            streams.setdefault(key, bytearray()).extend(event.event.data)
    return tuple(bytes(stream) for stream in streams.values() if stream)
