from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))  # scripts/ modules import each other by bare name

from sample_recorder import (  # noqa: E402
    effective_heart_beats,
    parse_heart_beat,
    unescape_header,
)


def test_unescape_reverses_stomp_py_escaping() -> None:
    assert unescape_header("ID\\cvm-1\\c2") == "ID:vm-1:2"
    assert unescape_header("a\\nb\\\\c\\r") == "a\nb\\c\r"
    assert unescape_header("\\\\c") == "\\c"


def test_parse_heart_beat() -> None:
    assert parse_heart_beat("500, 1000") == [500, 1000]
    assert parse_heart_beat(None) is None
    assert parse_heart_beat("garbage") is None


def test_effective_heart_beats_take_the_max_unless_a_side_is_zero() -> None:
    assert effective_heart_beats([500, 500], [1000, 1000]) == {
        "client_to_server_ms": 1000,
        "server_to_client_ms": 1000,
    }
    assert effective_heart_beats([0, 1000], [1000, 0]) == {
        "client_to_server_ms": 0,
        "server_to_client_ms": 1000,
    }
    assert effective_heart_beats(None, [0, 0]) == {
        "client_to_server_ms": 0,
        "server_to_client_ms": 0,
    }
