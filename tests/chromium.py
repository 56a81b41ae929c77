"""Open a local HTML page in headless Chromium and report what a person would see: a screenshot, the console
errors and the value of a JavaScript expression evaluated once the page has rendered.

Chromium is driven over the Chrome DevTools Protocol (CDP) on a pipe (``--remote-debugging-pipe``: the browser
reads commands on file descriptor 3 and writes replies and events on descriptor 4, each a JSON message ended by
a NUL byte), so no port is opened and no client library is needed. Protocol reference:
https://chromedevtools.github.io/devtools-protocol/ (domains Target, Page, Runtime, Log, Emulation).

Use from a test::

    from chromium import PLOTLY_CHARTS_JS, render, require_chromium

    browser = require_chromium()                  # skips the test, with the reason, when there is no Chromium
    page = render(browser, path, PLOTLY_CHARTS_JS)
    assert page.errors == [] and page.value["charts"]["timeline"]["rendered"]
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
"""Where the Debian package (and its relatives) install the browser; ``$CHROMIUM`` overrides."""
TIMEOUT_S = 90.0
"""Longest wait for the browser to load and render a page (a loaded 2-core machine takes ~5-20 s)."""
POLL_MARGIN_S = 2.0
"""Polling for ``ready`` stops this long before the deadline, so the error says the page was not ready."""

PLOTLY_CHARTS_JS = """(() => {
  const charts = {};
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    charts[gd.id] = {rendered: !!gd._fullLayout && gd.querySelector('svg.main-svg') !== null,
                     traces: (gd.data || []).length,
                     marks: gd.querySelectorAll('.point, .trace, .bars path, .cartesianlayer path').length,
                     width: gd.getBoundingClientRect().width, height: gd.getBoundingClientRect().height};
  }
  const divs = [...document.querySelectorAll('div.plotly-graph-div')];
  return {ready: typeof Plotly !== 'undefined' && document.readyState === 'complete' &&
                 divs.every(d => !!d._fullLayout),
          charts: charts, divs: divs.map(d => d.id)};
})()"""
"""Expression reporting every plotly chart of the page: ``{ready, charts: {div id: {rendered, traces, marks,
width, height}}, divs: [ids of all plotly divs]}`` (``rendered``: plotly laid the chart out and drew its SVG;
``ready``: plotly.js loaded and every plotly div laid out, so a chart that never renders times the page out)."""


INK_JS = """(async () => {
  const img = new Image();
  img.src = 'data:image/png;base64,' + %s;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const ctx = c.getContext('2d');
  ctx.drawImage(img, 0, 0);
  const px = ctx.getImageData(0, 0, c.width, c.height).data;
  const inked = (x0, y0, x1, y1) => {
    let n = 0, ink = 0;
    for (let y = Math.max(0, y0 | 0); y < Math.min(c.height, y1); y += 2)
      for (let x = Math.max(0, x0 | 0); x < Math.min(c.width, x1); x += 2) {
        const i = 4 * (y * c.width + x); n++;
        if (px[i] < 245 || px[i + 1] < 245 || px[i + 2] < 245) ink++;
      }
    return n ? ink / n : 0;
  };
  const colours = new Set();
  for (let i = 0; i < px.length; i += 4 * 97) colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
  const elements = {};
  for (const el of document.querySelectorAll('.js-plotly-plot[id], [data-ink][id]')) {
    const r = el.getBoundingClientRect();
    elements[el.id] = inked(r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY);
  }
  return {width: c.width, height: c.height, ink: inked(0, 0, c.width, c.height), colours: colours.size,
          elements: elements};
})()"""
"""Decodes the screenshot in the page (a canvas) and measures it: what a person would see, without an image
library in Python (``%s``: the PNG as a JSON string of base64)."""


@dataclass
class Rendered:
    """What the browser showed.

    Attributes:
        screenshot_png: PNG of the whole page (full height).
        errors: console errors, uncaught exceptions and error-level log entries, one line each.
        value: the expression's value once the page had rendered (JSON-decoded).
        messages: every console message and log entry, ``"level: text"``.
        ink: what the screenshot shows, decoded by the browser (:data:`INK_JS`): ``{width, height, ink, colours,
            elements: {id: ink}}``; ``ink`` is the fraction of pixels that are not the page's white background,
            ``colours`` the number of distinct colours (of a sample), ``elements`` the ink inside each element
            with an id among the plotly charts and the ``[data-ink]`` elements.
    """

    screenshot_png: bytes
    errors: list[str]
    value: Any
    messages: list[str] = field(default_factory=list)
    ink: dict[str, Any] | None = None


def find_chromium() -> str | None:
    """The Chromium executable: ``$CHROMIUM``, else the first of :data:`CANDIDATES` or ``chromium`` on PATH."""
    for path in (os.environ.get("CHROMIUM"), *CANDIDATES):
        if path and os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


def require_chromium() -> str:
    """The Chromium executable, or skip the calling test saying why (pytest)."""
    import pytest

    path = find_chromium()
    if path is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install chromium; or set $CHROMIUM)")
    return path


class _Pipe:
    """A CDP session over the browser's pipe: numbered commands, their replies, and the events in between."""

    def __init__(self, to_browser: int, from_browser: int, proc: subprocess.Popen[bytes], deadline: float):
        self._out, self._in, self._proc, self.deadline = to_browser, from_browser, proc, deadline
        self._buf, self._next_id = b"", 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and wait for its reply; events that arrive meanwhile are kept in ``events``.

        Raises:
            RuntimeError: the browser answered with an error, exited, or the deadline passed.
        """
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The first event named ``method`` (kept or still to come)."""
        while True:
            for e in self.events:
                if e["method"] == method:
                    return e
            self.events.append(self._read())

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"chromium: no answer within {TIMEOUT_S:.0f} s")
            ready, _, _ = select.select([self._in], [], [], min(left, 1.0))
            if not ready:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"chromium exited with code {self._proc.returncode}")
                continue
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)


def _launch(browser: str, profile: str) -> tuple[subprocess.Popen[bytes], int, int]:
    """Start headless Chromium with its DevTools pipe on descriptors 3 (commands) and 4 (replies)."""
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()

    def child_fds() -> None:  # in the child between fork and exec: the pipe ends become descriptors 3 and 4
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (cmd_r, rep_w)]  # clear of 3 and 4
        for target, fd in zip((3, 4), high):
            os.dup2(fd, target)  # inheritable, unlike the pipe's own descriptors (PEP 446)
            os.close(fd)

    args = [browser, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
            "--mute-audio", f"--user-data-dir={profile}", "about:blank"]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=child_fds, close_fds=False, start_new_session=True)
    os.close(cmd_r)
    os.close(rep_w)
    return proc, cmd_w, rep_r


def render(browser: str, page: str | Path, expression: str = PLOTLY_CHARTS_JS, width: int = 1400,
           height: int = 900, settle_s: float = 0.5) -> Rendered:
    """Load a local HTML file, wait until ``expression`` reports ``ready`` (or the load event when its value
    has no ``ready`` key), then screenshot the whole page.

    Args:
        browser: the executable (:func:`find_chromium`).
        page: the HTML file.
        expression: JavaScript evaluated in the page (by value) until its result's ``ready`` is true.
        width, height: viewport in CSS pixels; the screenshot spans the page's full height.
        settle_s: pause after ready, for plotly's last relayout.

    Returns:
        The screenshot, console errors and the expression's final value.

    Raises:
        RuntimeError: the browser failed, or did not load and render the page within :data:`TIMEOUT_S`.
    """
    with tempfile.TemporaryDirectory(prefix="gnnplan-chromium-", ignore_cleanup_errors=True) as profile:
        proc, to_browser, from_browser = _launch(browser, profile)
        try:
            cdp = _Pipe(to_browser, from_browser, proc, time.monotonic() + TIMEOUT_S)
            return _drive(cdp, Path(page).resolve().as_uri(), expression, width, height, settle_s)
        finally:
            with contextlib.suppress(OSError):  # the browser already exited
                os.write(to_browser, json.dumps({"id": 10**6, "method": "Browser.close"}).encode() + b"\0")
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # its own process group (session): the renderers go with it
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            os.close(to_browser)
            os.close(from_browser)


def _drive(cdp: _Pipe, url: str, expression: str, width: int, height: int, settle_s: float) -> Rendered:
    target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        cdp.send(f"{domain}.enable", session=session)
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    cdp.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
    cdp.events.clear()  # from here on, every event is the page's
    cdp.send("Page.navigate", {"url": url}, session=session)
    cdp.wait_event("Page.loadEventFired")
    value = _evaluate(cdp, expression, session)
    while isinstance(value, dict) and "ready" in value and not value["ready"]:
        if time.monotonic() > cdp.deadline - POLL_MARGIN_S:
            raise RuntimeError(f"chromium: the page was not ready within {TIMEOUT_S:.0f} s: {json.dumps(value)[:200]}")
        time.sleep(0.2)
        value = _evaluate(cdp, expression, session)
    time.sleep(settle_s)
    value = _evaluate(cdp, expression, session)
    full = cdp.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
    cdp.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": int(full["height"]) + 1}, session=session)
    shot = cdp.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=session)
    ink = cdp.send("Runtime.evaluate", {"expression": INK_JS % json.dumps(shot["data"]), "awaitPromise": True,
                                        "returnByValue": True}, session=session)["result"].get("value")
    errors, messages = _console(cdp.events)
    return Rendered(base64.b64decode(shot["data"]), errors, value, messages, ink)


def _evaluate(cdp: _Pipe, expression: str, session: str) -> Any:
    res = cdp.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session)
    if "exceptionDetails" in res:
        raise RuntimeError(f"chromium: the expression failed: {res['exceptionDetails'].get('text')}")
    return res["result"].get("value")


def _console(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(errors, all messages) from Runtime.consoleAPICalled, Runtime.exceptionThrown and Log.entryAdded."""
    errors, messages = [], []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            level = p.get("type", "log")
        elif e["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text, level = d.get("exception", {}).get("description") or d.get("text", "exception"), "error"
        elif e["method"] == "Log.entryAdded":
            entry = p.get("entry", {})
            text, level = f"{entry.get('text', '')} ({entry.get('url', '')})", entry.get("level", "info")
        else:
            continue
        messages.append(f"{level}: {text}")
        if level in ("error", "assert"):
            errors.append(text.splitlines()[0] if text else level)
    return errors, messages


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels of a PNG, read from its IHDR chunk.

    Raises:
        ValueError: not a PNG.
    """
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
