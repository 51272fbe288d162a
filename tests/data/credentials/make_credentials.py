"""Regenerates credentials.pcap and secrets.json: crafted passcode placements, one connection each.

    .venv/bin/python tests/data/credentials/make_credentials.py

Each connection puts a passcode where a broker could read it (or echo it) in a way a plain
``name == "passcode"`` test misses; the last ones are STOMP over WebSocket with credentials in
the upgrade's URL query and in close reasons. secrets.json lists every value; none may reach
the lake.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.support import pcapgen as g  # noqa: E402
from tests.support.websocket_wire import raw_frame  # noqa: E402

SERVER = ("10.9.0.1", 61613)
WEB_STOMP = ("10.9.0.1", 15674)
CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00\n"
CONNECTED_10 = b"CONNECTED\nsession:s-1\n\n\x00\n"


def _secret(n: int) -> str:
    return f"Cr3d-{n:02d}-zQx"


# (name, client -> server and server -> client chunks, handshake captured)
PLACEMENTS: list[tuple[str, list[tuple[bool, bytes]], bool]] = [
    (
        "space before the colon (1.2 CONNECT)",
        [
            (
                True,
                f"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\n"
                f"passcode :{_secret(1)}\n\n\x00".encode(),
            ),
            (False, CONNECTED),
        ],
        True,
    ),
    (
        "leading space in the name (1.0 CONNECT)",
        [
            (True, f"CONNECT\nlogin:bob\n passcode:{_secret(2)}\n\n\x00".encode()),
            (False, CONNECTED_10),
        ],
        True,
    ),
    (
        "upper case in a STOMP frame",
        [
            (True, f"STOMP\naccept-version:1.2\nhost:/\nPASSCODE:{_secret(3)}\n\n\x00".encode()),
            (False, CONNECTED),
        ],
        True,
    ),
    (
        "escaped colon inside the name (1.2 CONNECT: not unescaped)",
        [
            (
                True,
                f"CONNECT\naccept-version:1.2\nhost:/\npass\\ccode:{_secret(4)}\n\n\x00".encode(),
            ),
            (False, CONNECTED),
        ],
        True,
    ),
    (
        "ERROR echoing the login, CONNECT not captured",
        [
            (
                False,
                f"ERROR\nmessage:login refused passcode:{_secret(5)}\npasscode:{_secret(6)}\n"
                f"content-type:text/plain\n\npasscode:{_secret(7)}\x00\n".encode(),
            )
        ],
        False,
    ),
    (
        "a second CONNECT on the same connection, tab in the name",
        [
            (True, f"CONNECT\naccept-version:1.2\nhost:/\npasscode:{_secret(8)}\n\n\x00".encode()),
            (False, CONNECTED),
            (
                True,
                f"CONNECT\naccept-version:1.2\nhost:/\nPasscode\t:{_secret(9)}\n\n\x00".encode(),
            ),
        ],
        True,
    ),
    (
        "CRLF line ends and a repeated header",
        [
            (
                True,
                f"CONNECT\r\naccept-version:1.2\r\nhost:/\r\npasscode:{_secret(10)}\r\n"
                f"passcode:{_secret(11)}\r\n\r\n\x00".encode(),
            ),
            (False, CONNECTED),
        ],
        True,
    ),
    (
        "escaped name in a 1.2 SEND (decoded to pass:code)",
        [
            (True, b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"),
            (False, CONNECTED),
            (True, f"SEND\ndestination:/queue/a\npass\\ccode:{_secret(12)}\n\nx\x00".encode()),
        ],
        True,
    ),
    (
        "header line without a colon, and an early-text value with a leading space",
        [
            (True, f"CONNECT\naccept-version:1.2\nhost:/\npasscode {_secret(13)}\n\n\x00".encode()),
            (False, b"ERROR\nmessage:malformed frame\n\n\x00\n"),
            (True, f"CONNECT\nusername:carol\npasscode: {_secret(14)}\n\n\x00".encode()),
        ],
        True,
    ),
    (
        "ERROR after a capture gap swallowed the CONNECT, broker port only",
        [
            (
                False,
                f"ERROR\nmessage:Authentication failed for PASSCODE={_secret(15)}\n"
                "\n\x00\n".encode(),
            ),
            (True, f"SEND\ndestination:/queue/a\nPass Code:{_secret(16)}\n\ny\x00".encode()),
        ],
        False,
    ),
]

# STOMP over WebSocket: secrets in the upgrade's request target and in close reasons. Client
# frames are masked with a zero key, so that the secrets stand in the capture as they are.
ZERO_KEY = b"\0\0\0\0"
UPGRADE = (
    "GET {target} HTTP/1.1\r\nHost: broker:15674\r\nUpgrade: websocket\r\n"
    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\nOrigin: http://app.example{origin}\r\n"
    "Sec-WebSocket-Protocol: v12.stomp\r\n\r\n"
)
ACCEPTED = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
    b"Sec-WebSocket-Protocol: v12.stomp\r\n\r\n"
)


def _close(reason: str, from_client: bool) -> bytes:
    payload = (1008).to_bytes(2, "big") + reason.encode()
    return raw_frame(0x8, payload, mask=ZERO_KEY if from_client else None)


def _websocket(
    target: str, client_reason: str, server_reason: str, origin: str = ""
) -> list[tuple[bool, bytes]]:
    connect = b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\n\n\x00"
    return [
        (True, UPGRADE.format(target=target, origin=origin).encode()),
        (False, ACCEPTED),
        (True, raw_frame(0x1, connect, mask=ZERO_KEY)),
        (False, raw_frame(0x1, CONNECTED)),
        (True, _close(client_reason, True)),
        (False, _close(server_reason, False)),
    ]


WEBSOCKET_PLACEMENTS: list[tuple[str, list[tuple[bool, bytes]], bool]] = [
    (
        "WebSocket URL query, one parameter of each credential name; close reasons",
        _websocket(
            f"/ws?login=guest&passcode={_secret(17)}&password={_secret(18)}&pass={_secret(19)}"
            f"&token={_secret(20)}&access_token={_secret(21)}&x=1",
            f"passcode:{_secret(22)}",
            f"Authentication failed password={_secret(23)}",
        ),
        True,
    ),
    (
        "WebSocket URL query, percent-encoded names and an Origin with a token",
        _websocket(
            f"/ws?pass%77ord={_secret(24)}&%70asscode={_secret(25)}&Access%5FToken={_secret(26)}",
            f"PASSCODE = {_secret(27)}",
            "bye",
            origin=f"/?token={_secret(28)}",
        ),
        True,
    ),
    (
        "WebSocket URL query, a repeated parameter, one without value, a fragment",
        _websocket(
            f"/stomp?token={_secret(29)}&token={_secret(30)}&passcode&pass={_secret(31)}"
            f"#access_token={_secret(32)}&state=1",
            f"token: {_secret(33)}",
            "going away",
        ),
        True,
    ),
]
SECRETS = [_secret(n) for n in range(1, 34)]


def conversations() -> list[g.Conversation]:
    out = []
    for index, (_, chunks, handshake) in enumerate(PLACEMENTS + WEBSOCKET_PLACEMENTS):
        client = (f"10.9.1.{index + 1}", 41000 + index)
        out.append(
            g.Conversation(
                client,
                SERVER if index < len(PLACEMENTS) else WEB_STOMP,
                [g.Chunk(from_client, data) for from_client, data in chunks],
                start_ns=g.DEFAULT_START_NS + index * 50_000_000,
                handshake=handshake,
                close="fin",
            )
        )
    return out


def main() -> None:
    capture = g.generate(conversations())
    g.write_pcap(HERE / "credentials.pcap", capture.packets, linktype=g.LINKTYPE_ETHERNET)
    placements = [name for name, _, _ in PLACEMENTS + WEBSOCKET_PLACEMENTS]
    record = {"secrets": SECRETS, "placements": placements}
    (HERE / "secrets.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
