"""Debian's headless Chromium driven through its chromedriver, over the W3C WebDriver protocol
with nothing but the standard library (a handful of calls is all the report test needs)."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> tuple[str, str] | None:
    """(browser, chromedriver) paths, or None when either is missing."""
    driver = shutil.which("chromedriver")
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    return (browser, driver) if browser and driver else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Browser:
    def __init__(self, base: str, session_id: str) -> None:
        self.base = f"{base}/session/{session_id}"

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return _request(method, self.base + path, body)

    def open(self, url: str) -> None:
        self.call("POST", "/url", {"url": url})

    def script(self, source: str) -> Any:
        return self.call("POST", "/execute/sync", {"script": source, "args": []})

    def console(self) -> list[dict[str, Any]]:
        """Console messages since the last call (level, message)."""
        return self.call("POST", "/se/log", {"type": "browser"})

    def resize(self, width: int, height: int) -> None:
        self.call("POST", "/window/rect", {"width": width, "height": height})

    def print_pdf(self, path: Path) -> Path:
        """The page printed as the browser prints it (A4, print media, backgrounds)."""
        body = {"page": {"width": 21.0, "height": 29.7}, "background": True}
        path.write_bytes(base64.b64decode(self.call("POST", "/print", body)))
        return path

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.call("GET", "/screenshot")))
        return path


@contextmanager
def headless_chromium(browser: str, driver: str, log: Path) -> Iterator[Browser]:
    port = _free_port()
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [driver, f"--port={port}"], stdout=log_file, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    session_id = None
    try:
        _wait_ready(base, process)
        options = {
            "binary": browser,
            # --no-sandbox: the tests may run as root, where Chromium's sandbox refuses to start.
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1400,1000",
            ],
        }
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": options,
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        answer = _request(
            "POST", f"{base}/session", {"capabilities": {"alwaysMatch": capabilities}}
        )
        session_id = answer["sessionId"]
        yield Browser(base, session_id)
    finally:
        if session_id is not None:
            with suppress(OSError):
                _request("DELETE", f"{base}/session/{session_id}")
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(base: str, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromedriver exited with {process.returncode}")
        try:
            if _request("GET", f"{base}/status").get("ready"):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError("chromedriver did not become ready")


def _request(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"{}").get("value")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:2000]
        raise RuntimeError(f"WebDriver {method} {url}: {exc.code} {detail}") from None
