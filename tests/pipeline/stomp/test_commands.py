"""The command sets match the STOMP texts (1.0: Codehaus and Fuse/ActiveMQ; 1.1: the spec's
augmented BNF; 1.2: its summary), and the derived sets keep their relations."""

from __future__ import annotations

import re

import pytest

from pipeline.stomp import commands
from pipeline.stomp.commands import (
    ALL_COMMANDS,
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    COMMANDS_ADDED_IN_1_1,
    LONGEST_COMMAND,
    NO_BODY_COMMANDS,
    SERVER_COMMANDS,
    UNESCAPED_COMMANDS_1_2,
    VERSIONS,
)

# STOMP 1.1, "Augmented BNF": client-command and server-command, as written there.
SPEC_1_1_CLIENT = {
    "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK",
    "DISCONNECT", "CONNECT", "STOMP",
}  # fmt: skip
SPEC_1_1_SERVER = {"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"}
# STOMP 1.0 (Fuse tables 3.2 and 3.3, and the Codehaus text's CONNECT/CONNECTED): no NACK, no
# STOMP frame.
SPEC_1_0_CLIENT = {
    "CONNECT", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "BEGIN", "COMMIT", "ABORT", "DISCONNECT",
}  # fmt: skip
SPEC_1_0_SERVER = {"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"}


def test_client_and_server_commands_are_the_1_1_grammar_s() -> None:
    assert CLIENT_COMMANDS == SPEC_1_1_CLIENT
    assert SERVER_COMMANDS == SPEC_1_1_SERVER


def test_no_command_belongs_to_both_roles_and_all_is_their_union() -> None:
    assert not CLIENT_COMMANDS & SERVER_COMMANDS
    assert ALL_COMMANDS == CLIENT_COMMANDS | SERVER_COMMANDS


def test_a_1_0_session_knows_every_command_but_those_added_in_1_1() -> None:
    """STOMP is a 1.1 frame, yet it is deliberately not among those added: a 1.1+ client sends
    it before any version is negotiated, so a decoder still at 1.0 must take it."""
    at_1_0 = ALL_COMMANDS - COMMANDS_ADDED_IN_1_1
    assert at_1_0 == SPEC_1_0_CLIENT | SPEC_1_0_SERVER | {"STOMP"}
    assert {"NACK"} == COMMANDS_ADDED_IN_1_1
    assert "STOMP" not in COMMANDS_ADDED_IN_1_1


def test_only_send_message_and_error_carry_a_body() -> None:
    # 1.1: "Only the SEND, MESSAGE, and ERROR frames can have a body."
    assert {"SEND", "MESSAGE", "ERROR"} == BODY_COMMANDS
    assert NO_BODY_COMMANDS == ALL_COMMANDS - BODY_COMMANDS
    assert not BODY_COMMANDS & NO_BODY_COMMANDS


def test_connect_frames_are_the_ones_1_2_leaves_unescaped() -> None:
    # 1.2: "CONNECT and CONNECTED frames do not escape"; STOMP is CONNECT's 1.2 alias.
    assert {"CONNECT", "CONNECTED", "STOMP"} == UNESCAPED_COMMANDS_1_2
    assert UNESCAPED_COMMANDS_1_2 <= ALL_COMMANDS


def test_versions_are_the_three_in_ascending_order() -> None:
    assert VERSIONS == ("1.0", "1.1", "1.2")
    assert list(VERSIONS) == sorted(VERSIONS, key=lambda v: tuple(map(int, v.split("."))))


def test_longest_command_is_unsubscribe_s_length() -> None:
    assert LONGEST_COMMAND == len("UNSUBSCRIBE") == 11
    assert all(len(command) <= LONGEST_COMMAND for command in ALL_COMMANDS)


@pytest.mark.parametrize("command", sorted(ALL_COMMANDS))
def test_every_command_is_upper_case_ascii_letters(command: str) -> None:
    assert re.fullmatch(r"[A-Z]+", command)


@pytest.mark.parametrize(
    "name",
    [
        "CLIENT_COMMANDS",
        "SERVER_COMMANDS",
        "ALL_COMMANDS",
        "BODY_COMMANDS",
        "NO_BODY_COMMANDS",
        "COMMANDS_ADDED_IN_1_1",
        "UNESCAPED_COMMANDS_1_2",
    ],
)
def test_the_sets_cannot_be_changed_by_their_users(name: str) -> None:
    assert isinstance(getattr(commands, name), frozenset)
