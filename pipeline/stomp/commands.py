"""STOMP command names per role and version, and which commands may carry a body."""

from __future__ import annotations

CLIENT_COMMANDS: frozenset[str] = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "ACK",
        "NACK",
        "DISCONNECT",
    }
)
SERVER_COMMANDS: frozenset[str] = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
ALL_COMMANDS: frozenset[str] = CLIENT_COMMANDS | SERVER_COMMANDS

BODY_COMMANDS: frozenset[str] = frozenset({"SEND", "MESSAGE", "ERROR"})
NO_BODY_COMMANDS: frozenset[str] = ALL_COMMANDS - BODY_COMMANDS

# NACK arrived with 1.1. STOMP is deliberately not listed: a 1.1+ client sends it before any
# version is negotiated, so a decoder still at 1.0 must accept it silently.
COMMANDS_ADDED_IN_1_1: frozenset[str] = frozenset({"NACK"})

# STOMP 1.2: "CONNECT and CONNECTED frames do not escape" (STOMP is the 1.2 alias of CONNECT).
UNESCAPED_COMMANDS_1_2: frozenset[str] = frozenset({"CONNECT", "CONNECTED", "STOMP"})

VERSIONS: tuple[str, ...] = ("1.0", "1.1", "1.2")

LONGEST_COMMAND = max(len(command) for command in ALL_COMMANDS)
