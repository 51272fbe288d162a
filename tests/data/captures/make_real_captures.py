"""Re-create the real loopback captures in this folder (needs root, tcpdump and dumpcap).

Run from the repository root:  python tests/data/captures/make_real_captures.py

Each capture records the same exchange over loopback, filtered on its port: a client sends
STOMP-looking frames, the server answers, the server closes first, then the client reconnects
from the same source port (a reused 4-tuple; the server side holds TIME_WAIT, which Linux
lets a new SYN take over), exchanges again and closes; a third connection runs over ::1.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PORT = 47613
CLIENT_PORT = 47999

CAPTURES = {
    # file name: capture command (before the filter)
    "real_lo_ethernet.pcap": ["tcpdump", "-i", "lo", "-U", "-B", "8192"],
    "real_any_sll2.pcap": ["tcpdump", "-i", "any", "-U", "-B", "8192"],
    "real_any_sll.pcap": ["tcpdump", "-i", "any", "-y", "LINUX_SLL", "-U", "-B", "8192"],
    "real_lo_nanos.pcap": ["tcpdump", "-i", "lo", "-U", "--time-stamp-precision=nano"],
    "real_lo_snaplen96.pcap": ["tcpdump", "-i", "lo", "-U", "-s", "96"],
    "real_lo_dumpcap.pcapng": ["dumpcap", "-q", "-i", "lo", "-f"],
}


def serve(listener: socket.socket, rounds: int) -> None:
    for _ in range(rounds):
        conn, _addr = listener.accept()
        with conn:
            received = b""
            while received.count(b"\x00") < 4:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                received += chunk
            conn.sendall(b"CONNECTED\nversion:1.2\n\n\x00\n")
            for n in range(3):
                body = bytes(1 + (n * 7 + i) % 250 for i in range(6000))
                head = f"MESSAGE\nmessage-id:{n}\ncontent-length:{len(body)}\n\n".encode()
                conn.sendall(head + body + b"\x00\n")
            time.sleep(0.05)
        # server closes first: TIME_WAIT stays on the server side


def client(family: int, host: str, bind_port: int | None) -> None:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if bind_port is not None:
        sock.bind((host, bind_port))
    sock.connect((host, PORT))
    sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
    for n in range(3):
        body = bytes(1 + (n * 13 + i) % 250 for i in range(4000))  # no NUL inside
        sock.sendall(f"SEND\ndestination:/queue/a\ncontent-length:{len(body)}\n\n".encode())
        sock.sendall(body + b"\x00")
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass  # seen once when the reused port raced the server's TIME_WAIT; keep going
    sock.close()


def exchange() -> None:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, PORT))
        listener.listen()
        rounds = 2 if family == socket.AF_INET else 1
        server = threading.Thread(target=serve, args=(listener, rounds))
        server.start()
        for _ in range(rounds):
            client(family, host, CLIENT_PORT if family == socket.AF_INET else None)
            time.sleep(0.1)
        server.join()
        listener.close()


def capture(name: str, command: list[str]) -> None:
    path = HERE / name
    # dumpcap takes the filter after -f (last in its command), tcpdump as trailing words
    process = subprocess.Popen(
        [*command, f"tcp port {PORT}", "-w", str(path)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    deadline = time.time() + 10
    while time.time() < deadline:  # wait until the capture is live
        line = process.stderr.readline()
        if "listening on" in line or "Capturing on" in line:
            break
    try:
        time.sleep(0.3)
        exchange()
        time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=10)
    os.chmod(path, 0o644)
    print(name, path.stat().st_size, "bytes")


def main() -> None:
    names = sys.argv[1:] or list(CAPTURES)
    for name in names:
        capture(name, CAPTURES[name])


if __name__ == "__main__":
    main()
