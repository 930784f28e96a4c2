"""Headless Chromium driven over the Chrome DevTools Protocol, for browser tests and benchmarks.

Only what the tests need: start Debian's ``chromium`` with a fresh profile and the flags
that keep it off the network of its own accord, open a page (a report file, or the
dashboard of a running server) in a :class:`Tab`, act on it with JavaScript, and report
what a person would get: console errors, uncaught exceptions, every network request the
page made, the rendered text, DOM queries, downloads and a PNG screenshot. The protocol
runs over the browser's own WebSocket with the ``websockets`` synchronous client (already a
dependency), so no browser-automation package is needed. Used by tests/report (the static
reports), tests/server/ui (the dashboard) and benchmarks/dashboard.py; tests/browser.py adds
the suite's skip rule.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1280,900",
)
START_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    return None


@dataclass
class PageVisit:
    """What loading one page produced."""

    url: str
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    text: str = ""
    screenshot: bytes = b""
    probes: dict[str, Any] = field(default_factory=dict)
    network_errors: list[str] = field(default_factory=list)


class Chromium:
    """One headless browser process and its DevTools connection."""

    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="kiln-chromium-")
        self._process = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={self._profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        self._socket: ClientConnection | None = None
        try:
            opened = connect(self._endpoint(), max_size=None, open_timeout=START_TIMEOUT_S)
            self._socket = self._stack.enter_context(opened)
        except BaseException:
            self.close()
            raise

    def _endpoint(self) -> str:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"chromium exited with status {self._process.returncode}")
            if marker.exists():
                lines = marker.read_text().split()
                if len(lines) >= 2:
                    return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise TimeoutError("chromium did not open its DevTools port")

    def close(self) -> None:
        self._socket = None
        self._stack.close()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        events: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Send one command and wait for its answer; other messages go to ``events``."""
        assert self._socket is not None
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._socket.send(json.dumps(message))
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while True:
            reply = json.loads(self._socket.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if reply.get("id") == ident:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if events is not None:
                events.append(reply)

    def _wait_for(self, method: str, events: list[dict[str, Any]]) -> None:
        assert self._socket is not None
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while not any(event.get("method") == method for event in events):
            events.append(
                json.loads(self._socket.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            )

    def visit(self, path: Path, probes: dict[str, str] | None = None) -> PageVisit:
        """Load ``path`` in a fresh tab; evaluate each probe expression after the load."""
        tab = self.open(path.resolve().as_uri())
        try:
            tab.visit.text = str(tab.evaluate("document.body.innerText"))
            for name, expression in (probes or {}).items():
                tab.visit.probes[name] = tab.evaluate(expression)
            tab.visit.screenshot = tab.screenshot()
        finally:
            visit = tab.close()
        return visit

    def open(self, url: str) -> Tab:
        """A fresh tab showing ``url`` once its load event fired; close it with
        :meth:`Tab.close`, which returns what the page did."""
        return Tab(self, url)

    def _drain(self, events: list[dict[str, Any]]) -> None:
        assert self._socket is not None
        while True:
            try:
                events.append(json.loads(self._socket.recv(timeout=0.05)))
            except TimeoutError:
                return


class Tab:
    """One page of the browser: evaluate JavaScript in it, wait for a condition, take a
    screenshot, accept downloads; :meth:`close` reports its console and network events."""

    def __init__(self, browser: Chromium, url: str) -> None:
        self._browser = browser
        self.events: list[dict[str, Any]] = []
        self.visit = PageVisit(url)
        self._target = browser._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = browser._send(
            "Target.attachToTarget", {"targetId": self._target, "flatten": True}
        )["sessionId"]
        try:
            for domain in ("Page", "Runtime", "Log", "Network"):
                self._send(f"{domain}.enable")
            self.events.clear()  # what about:blank did is not the page's
            self._send("Page.navigate", {"url": url})
            browser._wait_for("Page.loadEventFired", self.events)
        except BaseException:
            self.close()
            raise

    def _send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._browser._send(method, params, session=self._session, events=self.events)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Any DevTools command on this page (``Fetch.enable``, ...); its result."""
        return self._send(method, params)

    def wait_event(self, method: str, timeout: float = LOAD_TIMEOUT_S) -> dict[str, Any]:
        """The parameters of the next not yet taken event ``method`` (page or browser)."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    event["method"] = f"taken:{method}"
                    params: dict[str, Any] = event.get("params", {})
                    return params
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} event in {timeout} s")
            self._browser._drain(self.events)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` (a promise is awaited)."""
        result = self._send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"probe {expression!r} failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = LOAD_TIMEOUT_S) -> Any:
        """Evaluate ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {expression}")
            time.sleep(0.05)

    def screenshot(self, full_page: bool = False) -> bytes:
        """The viewport as PNG, or the whole page's height (for documentation pictures)."""
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if full_page:
            size = self._send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}
            params["clip"]["scale"] = 1
        shot = self._send("Page.captureScreenshot", params)
        return base64.b64decode(shot["data"])

    def allow_downloads(self, folder: Path) -> None:
        """Save this browser's downloads into ``folder``, each named by its download id."""
        self._browser._send(
            "Browser.setDownloadBehavior",
            {"behavior": "allowAndName", "downloadPath": str(folder), "eventsEnabled": True},
            events=self.events,
        )

    def wait_download(self, folder: Path, timeout: float = LOAD_TIMEOUT_S) -> Path:
        """The file of the next download that ends (after :meth:`allow_downloads`)."""
        deadline = time.monotonic() + timeout
        while True:
            params = self.wait_event("Browser.downloadProgress", deadline - time.monotonic())
            if params["state"] != "inProgress":
                assert params["state"] == "completed", "the download was cancelled"
                return folder / str(params["guid"])

    def close(self) -> PageVisit:
        """Close the tab; the page's console errors and requests, sorted out of its events.

        Log entries of source ``network`` (an answer with a 4xx/5xx status, a refused
        connection) are kept apart in ``network_errors``: a typed refusal the page shows
        is no script error, and every request is in ``requests`` anyway."""
        time.sleep(0.1)  # let late console or network events arrive
        self._browser._drain(self.events)
        self._browser._send("Target.closeTarget", {"targetId": self._target})
        visit = self.visit
        for event in self.events:
            if event.get("sessionId") != self._session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                visit.console_errors.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                visit.console_errors.append(json.dumps(params.get("args"))[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                entry = params["entry"]
                errors = visit.network_errors if entry.get("source") == "network" else None
                (visit.console_errors if errors is None else errors).append(
                    f"{entry.get('url', '')} {entry.get('text', '')}"[:500]
                )
        self.events.clear()
        return visit


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the unfiltered rows of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    offset, idat, header = 8, b"", b""
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "big")
        chunk = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if chunk == b"IHDR":
            header = body
        elif chunk == b"IDAT":
            idat += body
        offset += 12 + length
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    depth, color, interlace = header[8], header[9], header[12]
    if depth != 8 or color not in (2, 6) or interlace != 0:
        raise ValueError("unsupported PNG layout")
    channels = 3 if color == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - corner
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def ink_fraction(data: bytes, step: int = 4) -> float:
    """The fraction of pixels (every ``step``-th row and column) that differ from the
    top-left one: 0.0 for a blank page."""
    width, _, rows = png_pixels(data)
    channels = len(rows[0]) // width
    background = rows[0][:3]
    sampled = differing = 0
    for row in rows[::step]:
        for x in range(0, width * channels, channels * step):
            sampled += 1
            differing += row[x : x + 3] != background
    return differing / sampled


def environment_ok() -> bool:
    """Whether this process may start a browser at all (a display is never needed)."""
    return os.name == "posix"
