"""`stomp-lake run` over passive captures of STOMP over TLS (real OpenSSL conversations, written
as a tcpdump would hold them): with the key log, the tables hold what was sent; without it, the
sessions say why nothing was decoded; secrets a pcapng embeds work with no option; and no secret
of a key log reaches the lake."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.net import Direction
from tests.support.paths import REPO
from tests.support.tls_pair import Conversation, converse, write_capture
from tests.support.websocket_wire import Side, request, response

pytestmark = pytest.mark.spark
STOMP_LAKE = REPO / ".venv" / "bin" / "stomp-lake"
C2S, S2C = Direction.C2S, Direction.S2C
SESSION = [
    (C2S, b"CONNECT\naccept-version:1.2\nhost:/\nlogin:app\npasscode:s3cret\n\n\x00"),
    (S2C, b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00\n"),
    (C2S, b"SUBSCRIBE\nid:0\ndestination:/queue/a\nack:client-individual\n\n\x00"),
    (S2C, b"MESSAGE\nsubscription:0\nmessage-id:m-1\nack:m-1\ndestination:/queue/a\n\nhi\x00\n"),
    (C2S, b"ACK\nid:m-1\n\n\x00"),
    (C2S, b"SEND\ndestination:/queue/b\ncontent-length:5\nreceipt:r-1\n\nhello\x00"),
    (S2C, b"RECEIPT\nreceipt-id:r-1\n\n\x00\n"),
    (C2S, b"DISCONNECT\nreceipt:bye\n\n\x00"),
    (S2C, b"RECEIPT\nreceipt-id:bye\n\n\x00\n"),
]


def websocket_session() -> list[tuple[Direction, bytes]]:
    client, server = Side(client=True), Side(client=False)
    framed = [(C2S, request()), (S2C, response())]
    for direction, frame in SESSION:
        side = client if direction is C2S else server
        framed.append((direction, side.text(frame.rstrip(b"\n"))))
    return framed


def table(lake: Path, name: str) -> list[dict]:
    return DeltaTable(str(lake / "tables" / name)).to_pyarrow_table().to_pylist()


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STOMP_LAKE), "run", "--open-connections", "close", *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def secrets_of(*talks: Conversation) -> list[str]:
    lines = [line for t in talks for line in t.keylog.splitlines() if line and line[0] != "#"]
    return [line.split()[2] for line in lines]


def keylog_secrets(text: str) -> list[str]:
    return [line.split()[2] for line in text.splitlines() if line and not line.startswith("#")]


def assert_no_secret_under(folder: Path, secrets: list[str]) -> None:
    needles = [s.encode() for s in secrets] + [s.upper().encode() for s in secrets]
    needles += [bytes.fromhex(s) for s in secrets]
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(needle in data for needle in needles), path


def test_tls_captures_decrypted_with_the_key_log(tmp_path: Path) -> None:
    tls13 = converse(tmp_path, exchanges=SESSION, server_name="broker.example")
    tls12 = converse(tmp_path, tls12_cipher="ECDHE-RSA-AES128-SHA256", exchanges=SESSION)
    wss = converse(tmp_path, exchanges=websocket_session())
    unkeyed = converse(tmp_path, exchanges=SESSION)
    inbox = tmp_path / "in"
    inbox.mkdir()
    for port, talk in enumerate((tls13, tls12, wss, unkeyed), start=40001):
        write_capture(talk, inbox / f"conn-{port}.pcap", client=("10.0.0.5", port))
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "client-a.log").write_text(tls13.keylog + tls12.keylog)
    (keys / "client-b.log").write_text(wss.keylog)
    lake = tmp_path / "lake"
    done = run("--input", str(inbox), "--lake", str(lake), "--tls-keylog", str(keys))
    assert done.returncode == 0, done.stdout + done.stderr  # the validation gate passed
    assert "TLS: secrets for 3 of the 4 TLS connections read" in done.stdout + done.stderr
    sessions = {s["client_port"]: s for s in table(lake, "sessions")}
    assert [sessions[p]["transport"] for p in sorted(sessions)] == [
        "tls", "tls", "websocket+tls", "tls"
    ]  # fmt: skip
    for port in (40001, 40002, 40003):
        assert (
            sessions[port]["tls_decrypted"] and sessions[port]["tls_not_decrypted_reason"] is None
        )
        assert sessions[port]["version"] == "1.2" and sessions[port]["login"] == "app"
        assert sessions[port]["end_reason"] == "disconnect_receipt"
    assert sessions[40001]["tls_version"] == "TLS 1.3"
    assert sessions[40001]["tls_server_name"] == "broker.example"
    assert sessions[40002]["tls_cipher_suite"] == "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"
    assert not sessions[40004]["tls_decrypted"]
    assert sessions[40004]["tls_not_decrypted_reason"] == "no_keys"
    assert sessions[40004]["c2s_frames"] == 0 and sessions[40004]["duration_ms"] > 0
    wire = unkeyed.stream(C2S), unkeyed.stream(S2C)
    assert (sessions[40004]["c2s_bytes"], sessions[40004]["s2c_bytes"]) == tuple(map(len, wire))
    frames = table(lake, "frames")
    decoded = [f for f in frames if f["session_id"] != sessions[40004]["session_id"]]
    assert len(decoded) == 3 * len(SESSION) and len(frames) == len(decoded)
    assert all(f["tcp_offset"] is not None for f in decoded)
    assert len(table(lake, "messages")) == 3 * 2 and len(table(lake, "acks")) == 3
    assert {r["receipt_id"] for r in table(lake, "receipts")} == {"r-1", "bye"}
    assert_no_secret_under(lake, secrets_of(tls13, tls12, wss, unkeyed))


@pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Debian: wireshark-common)")
def test_secrets_a_pcapng_embeds_need_no_option(tmp_path: Path) -> None:
    talk = converse(tmp_path, exchanges=SESSION)
    plain = write_capture(talk, tmp_path / "conn.pcap")
    keys = tmp_path / "keys.log"
    keys.write_text(talk.keylog)
    inbox = tmp_path / "in"
    inbox.mkdir()
    embedded = inbox / "conn-with-secrets.pcapng"
    command = ["editcap", "--inject-secrets", f"tls,{keys}", str(plain), str(embedded)]
    subprocess.run(command, check=True, capture_output=True)
    lake = tmp_path / "lake"
    done = run("--input", str(inbox), "--lake", str(lake))
    assert done.returncode == 0, done.stdout + done.stderr
    (session,) = table(lake, "sessions")
    assert session["transport"] == "tls" and session["tls_decrypted"]
    assert len(table(lake, "frames")) == len(SESSION)
    assert_no_secret_under(lake, secrets_of(talk))


TLS_DATA = REPO / "tests" / "data" / "tls"


def records() -> list[dict]:
    """Every connection of the real TLS captures (tests/data/README.md), as its client saw it."""
    out = []
    for path in sorted(TLS_DATA.glob("*.record.json")):
        record = json.loads(path.read_text())
        for connection in record["connections"]:
            out.append({**connection, "capture": record["capture"]})
    return out


def test_real_broker_captures_give_what_their_clients_sent_and_received(tmp_path: Path) -> None:
    """RabbitMQ's STOMP and Web-STOMP TLS listeners and ActiveMQ's stomp+ssl, TLS 1.2 and 1.3,
    a KeyUpdate, bodies across many records, and a connection whose key is not in the log."""
    inbox, keys, lake = tmp_path / "in", tmp_path / "keys", tmp_path / "lake"
    inbox.mkdir()
    keys.mkdir()
    for capture in TLS_DATA.glob("*.pcap"):
        shutil.copy(capture, inbox / capture.name)
    for keylog in TLS_DATA.glob("*.keys"):
        shutil.copy(keylog, keys / keylog.name)
    done = run("--input", str(inbox), "--lake", str(lake), "--tls-keylog", str(keys))
    assert done.returncode == 0, done.stdout + done.stderr
    sessions = {s["session_id"]: s for s in table(lake, "sessions")}
    expected = records()
    assert len(sessions) == len(expected)
    ids: dict[str, set[str]] = {}
    for message in table(lake, "messages"):
        if message["message_id"] is not None:  # a delivered MESSAGE, not a SEND
            ids.setdefault(message["session_id"], set()).add(message["message_id"])
    frames: dict[str, Counter[str]] = {}
    for frame in table(lake, "frames"):
        frames.setdefault(frame["session_id"], Counter())[
            f"{frame['direction']} {frame['command']}"
        ] += 1
    acks = Counter(a["session_id"] for a in table(lake, "acks"))
    receipts: dict[str, set[str]] = {}
    for receipt in table(lake, "receipts"):
        if receipt["received_at_ns"] is not None:  # asked for and answered
            receipts.setdefault(receipt["session_id"], set()).add(receipt["receipt_id"])
    beats = Counter((b["session_id"], b["direction"]) for b in table(lake, "heartbeats"))
    unkeyed = [s for s in sessions.values() if not s["tls_decrypted"]]
    assert [s["tls_not_decrypted_reason"] for s in unkeyed] == ["no_keys"]
    assert sum(not c.get("keys_in_keylog", True) for c in expected) == 1
    for connection in (c for c in expected if c.get("keys_in_keylog", True)):
        (session_id,) = [
            sid for sid, found in ids.items() if found == set(connection["message_ids"])
        ]
        session = sessions[session_id]
        assert session["transport"] in ("tls", "websocket+tls") and session["tls_decrypted"]
        assert session["tls_server_name"] == connection["tls"].get("server_name")
        sent = Counter({f"c2s {command}": n for command, n in connection["sent"].items()})
        received = Counter({f"s2c {command}": n for command, n in connection["received"].items()})
        assert frames[session_id] == sent + received, connection["capture"]
        assert acks[session_id] == len(connection["acked"]) + len(connection["nacked"])
        assert receipts.get(session_id, set()) == set(connection["receipts"])
        # (the client counts the broker's EOLs after frames as beats too: c2s only)
        assert beats[(session_id, "c2s")] == connection["heart_beats_sent"]
    secrets = [s for k in keys.iterdir() for s in keylog_secrets(k.read_text())]
    assert_no_secret_under(lake, secrets)
    assert not any(s in done.stdout + done.stderr for s in secrets)


def test_without_key_logs_real_tls_is_told_and_embedded_secrets_still_work(tmp_path: Path) -> None:
    inbox, lake = tmp_path / "in", tmp_path / "lake"
    inbox.mkdir()
    for name in ("rabbitmq-stomp-tls13-dsb.pcapng", "rabbitmq-stomp-tls13-large.pcap"):
        shutil.copy(TLS_DATA / name, inbox / name)
    done = run("--input", str(inbox), "--lake", str(lake))
    assert done.returncode == 0, done.stdout + done.stderr
    by_reason = Counter(s["tls_not_decrypted_reason"] for s in table(lake, "sessions"))
    assert by_reason == Counter({None: 1, "no_keys": 1})
    (decoded,) = {f["session_id"] for f in table(lake, "frames")}
    secrets = keylog_secrets((TLS_DATA / "rabbitmq-stomp-tls13.keys").read_text())
    assert_no_secret_under(lake, secrets)
