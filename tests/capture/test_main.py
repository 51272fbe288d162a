"""`python -m capture`: the proxy's command line with `capture.cli.main`'s exit code as the
process's. Subprocesses only, so no event loop, signal handler or logging setup of the proxy
touches the test process; none of these reach a broker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from capture.cli import EXIT_USAGE
from tests.support.paths import REPO


def _python_m(
    module: str, *args: str, stdout: int = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:1"],  # a usage error: no --out
    ],
)
def test_it_is_the_same_program_as_capture_cli(args: list[str]) -> None:
    """Same arguments, same exit code and output as `python -m capture.cli`."""
    with ThreadPoolExecutor(2) as both:  # side by side: each is mostly interpreter start-up
        package, module = both.map(lambda name: _python_m(name, *args), ["capture", "capture.cli"])
    assert (package.returncode, package.stdout, package.stderr) == (
        module.returncode,
        module.stdout,
        module.stderr,
    )
    said = package.stdout + package.stderr
    assert said.startswith(("usage: stomp-capture ", "stomp-capture: error: "))  # its own name


def test_a_code_main_returns_is_the_exit_status(taken_port: int) -> None:
    """`main()` returns (does not raise) EXIT_USAGE when it cannot listen: `run_cli()`
    hands it on."""
    done = _python_m(
        "capture",
        "--listen", f"127.0.0.1:{taken_port}",
        "--upstream", "127.0.0.1:1",
        "--no-upstream-check",
        "--no-capture",
        "--stats-interval", "0",
    )  # fmt: skip
    assert done.returncode == EXIT_USAGE == 2
    assert "cannot listen" in done.stderr and "Traceback" not in done.stderr


def test_output_to_a_reader_that_left_ends_quietly() -> None:
    reader, writer = os.pipe()
    os.close(reader)  # `stomp-capture --help | true`, the reader already gone
    try:
        done = _python_m("capture", "--help", stdout=writer)
    finally:
        os.close(writer)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert done.returncode in (0, 141)
