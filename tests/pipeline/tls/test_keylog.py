from __future__ import annotations

from pathlib import Path

from pipeline.tls.keylog import KeyLog, keylog_paths_from_env, read_keylogs

RANDOM = "ab" * 32


def _read(*lines: str) -> KeyLog:
    keys = KeyLog()
    keys.add_lines(lines)
    return keys


def test_secrets_are_kept_by_client_random_and_label() -> None:
    keys = _read(
        "# comment",
        "",
        f"CLIENT_RANDOM {RANDOM} {'11' * 48}",
        f"CLIENT_TRAFFIC_SECRET_0 {RANDOM} {'22' * 32}",
        f"SERVER_TRAFFIC_SECRET_0 {RANDOM} {'33' * 48}",
        f"EXPORTER_SECRET {RANDOM} {'44' * 32}",  # a label this layer does not use
    )
    secrets = keys.get(bytes.fromhex(RANDOM))
    assert secrets is not None and len(keys) == 1 and keys.unreadable_lines == 0
    assert secrets.master_secret == b"\x11" * 48
    assert secrets.client_traffic == b"\x22" * 32 and secrets.server_traffic == b"\x33" * 48
    assert secrets.tls13


def test_a_secret_of_a_length_no_tls_version_uses_is_unreadable() -> None:
    """A master secret is 48 bytes, a TLS 1.3 traffic secret 32 or 48: a damaged line with a
    one-byte 'secret' was once taken as one (found by fuzz_tls)."""
    keys = _read(
        f"SERVER_HANDSHAKE_TRAFFIC_SECRET {RANDOM} 87",
        f"CLIENT_RANDOM {RANDOM} {'11' * 32}",
        f"CLIENT_TRAFFIC_SECRET_0 {RANDOM} {'22' * 64}",
        f"CLIENT_TRAFFIC_SECRET_0 {'ab' * 31} {'22' * 32}",
        f"CLIENT_RANDOM {RANDOM} not-hex",
        "CLIENT_RANDOM too few",
    )
    assert len(keys) == 0 and keys.unreadable_lines == 6


def test_nothing_read_is_shown() -> None:
    secret = "5e" * 48
    keys = _read(f"CLIENT_RANDOM {RANDOM} {secret}", f"CLIENT_RANDOM {RANDOM} {secret} extra")
    shown = repr(keys) + repr(keys.secrets)
    assert secret not in shown and "5e5e" not in shown and keys.unreadable_lines == 1


def test_only_keeps_the_connections_asked_for() -> None:
    other = "cd" * 32
    keys = _read(f"CLIENT_RANDOM {RANDOM} {'11' * 48}", f"CLIENT_RANDOM {other} {'22' * 48}")
    kept = keys.only([bytes.fromhex(other), b"\x00" * 32])
    assert list(kept.secrets) == [bytes.fromhex(other)]


def test_files_and_folders_are_read(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    folder.mkdir()
    (folder / "b.log").write_text(f"CLIENT_RANDOM {RANDOM} {'11' * 48}\n")
    (tmp_path / "a.log").write_text(f"CLIENT_RANDOM {'cd' * 32} {'22' * 48}\n\xff\n")
    keys = read_keylogs(keylog_paths_from_env(f"{tmp_path / 'a.log'}:{folder}"))
    assert len(keys) == 2 and keys.unreadable_lines == 1
