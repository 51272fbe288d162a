from __future__ import annotations

from pathlib import Path

import pytest

from capture.config import (
    ClientTls,
    ConfigError,
    HostPort,
    ProxyConfig,
    UpstreamTls,
    parse_capture_mode,
    parse_disk_full_wait,
    parse_flush_seconds,
    parse_host_port,
    parse_max_connections,
    parse_mode,
    parse_size,
    settings_from_toml,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:61613", HostPort("127.0.0.1", 61613)),
        ("broker.internal:1", HostPort("broker.internal", 1)),
        ("[::1]:61613", HostPort("::1", 61613)),
        ("[fe80::1%lo]:5", HostPort("fe80::1%lo", 5)),
        (" localhost:65535 ", HostPort("localhost", 65535)),
    ],
)
def test_addresses(text: str, expected: HostPort) -> None:
    assert parse_host_port(text) == expected


@pytest.mark.parametrize("text", ["61613", "::1:61613", "host:", "host:port", "a b:1", "h:70000"])
def test_bad_addresses_say_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigError, match="bad address"):
        parse_host_port(text)


def test_port_zero_only_where_allowed() -> None:
    assert parse_host_port("127.0.0.1:0", allow_zero=True).port == 0
    with pytest.raises(ConfigError, match="out of range"):
        parse_host_port("127.0.0.1:0")


def test_host_port_prints_ipv6_in_brackets() -> None:
    assert str(HostPort("::1", 5)) == "[::1]:5"
    assert str(HostPort("h", 5)) == "h:5"


def test_sizes_and_modes() -> None:
    assert [parse_size(s) for s in ("10", "4K", "1.5M", "2g", "1GiB", 7)] == [
        10, 4096, 1572864, 2 << 30, 1 << 30, 7
    ]
    with pytest.raises(ConfigError):
        parse_size("lots")
    assert parse_mode("0640") == 0o640 and parse_mode("600") == 0o600
    with pytest.raises(ConfigError, match="others"):
        parse_mode("0644")
    with pytest.raises(ConfigError, match="owner"):
        parse_mode("0040")


def test_toml_with_several_listeners(tmp_path: Path) -> None:
    path = tmp_path / "proxy.toml"
    path.write_text(
        """
        out = "caps"
        rotate_size = "64M"
        rotate_seconds = 600
        mask_passcode = true
        drain = 5
        file_mode = "0600"

        [[listener]]
        listen = "127.0.0.1:61000"
        upstream = "127.0.0.1:61613"

        [[listener]]
        listen = "[::1]:61001"
        upstream = "broker:61614"
        client_tls = { cert = "c.pem", key = "/abs/c.key" }
        upstream_tls = { ca = "ca.pem", verify = false, server_name = "broker" }
        """
    )
    settings = settings_from_toml(path)
    first, second = settings.pop("listeners")
    assert settings == {
        "out_dir": tmp_path / "caps",
        "rotate_bytes": 64 << 20,
        "rotate_seconds": 600,
        "mask_passcode": True,
        "drain_seconds": 5,
        "file_mode": 0o600,
    }
    assert (first.listen, first.upstream, first.client_tls) == (
        HostPort("127.0.0.1", 61000), HostPort("127.0.0.1", 61613), None
    )
    assert second.client_tls == ClientTls(tmp_path / "c.pem", Path("/abs/c.key"))
    assert second.upstream_tls == UpstreamTls(
        ca=tmp_path / "ca.pem", verify=False, server_name="broker"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[listener]]\nlisten = '1.2.3.4:1'\n", "needs listen and upstream"),
        ("colour = 'red'\n", "unknown settings"),
        ("listener = 3\n", "array of tables"),
        ("[[listener]]\nlisten='a:1'\nupstream='b:2'\nbogus=1\n", "unknown listener"),
        ("out = \n", "not valid TOML"),
    ],
)
def test_bad_config_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        settings_from_toml(path)
    with pytest.raises(ConfigError, match="cannot read"):
        settings_from_toml(tmp_path / "missing.toml")


def test_capture_mode_and_flush_interval(tmp_path: Path) -> None:
    assert parse_capture_mode("lossless") is True and parse_capture_mode("drop") is False
    with pytest.raises(ConfigError, match="lossless or drop"):
        parse_capture_mode("fast")
    assert parse_flush_seconds("0.25") == 0.25
    for bad in ("0", "-1", "x", "4000"):
        with pytest.raises(ConfigError):
            parse_flush_seconds(bad)
    config = tmp_path / "proxy.toml"
    config.write_text('capture_mode = "drop"\nflush_seconds = 0.5\n')
    assert settings_from_toml(config) == {"listeners": (), "lossless": False, "flush_seconds": 0.5}
    defaults = ProxyConfig(listeners=(), out_dir=None)
    assert defaults.lossless and defaults.flush_seconds <= 1.0


def test_disk_full_wait(tmp_path: Path) -> None:
    assert parse_disk_full_wait("2.5") == 2.5 and parse_disk_full_wait("0") == 0
    for bad in ("-1", "x", "4000"):
        with pytest.raises(ConfigError, match="disk-full wait"):
            parse_disk_full_wait(bad)
    config = tmp_path / "proxy.toml"
    config.write_text("disk_full_wait = 10\n")
    assert settings_from_toml(config) == {"listeners": (), "disk_full_wait": 10.0}
    assert 0 < ProxyConfig(listeners=(), out_dir=None).disk_full_wait <= 10


def test_max_connections(tmp_path: Path) -> None:
    assert parse_max_connections("10000") == 10_000
    for bad in ("0", "-3", "many"):
        with pytest.raises(ConfigError, match="max connections"):
            parse_max_connections(bad)
    config = tmp_path / "proxy.toml"
    config.write_text("max_connections = 5000\n")
    assert settings_from_toml(config) == {"listeners": (), "max_connections": 5000}
    assert ProxyConfig(listeners=(), out_dir=None).max_connections is None  # the fd limit's
