"""The HTML reports (``report.html``) of a simulate run and of a sweep in a real browser (Debian's ``chromium``,
headless): the page loads from a ``file://`` URL with no console message, no failed load, no script error and every
image decoded (read over the DevTools protocol on a pipe, ``--remote-debugging-pipe``: no library needed), a
screenshot of its first screen (1280 x 900) shows the answer table, and at 1400 and 800 CSS px its tables and
terminal blocks fit the window. The tests skip when ``/usr/bin/chromium`` is absent, unless
``ONLINEEVAL_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where a missing browser fails.

The pages are those of the ``sim`` and ``sweep`` fixtures (``tests/conftest.py``, folders built once per run by
``tests/html_report_folders.py``), which ``tests/test_html_report.py`` checks without a browser.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from simulations.html_report import REPORT_NAME

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_BROWSER = os.environ.get("ONLINEEVAL_REQUIRE_BROWSER") == "1"
WIDTH, HEIGHT = 1280, 900
ANSWER_HEADER_RGB = (0x1F, 0x5F, 0xA8)  # table.answer th background in page.py's stylesheet


def _browser() -> Path:
    if CHROMIUM.is_file():
        return CHROMIUM
    if REQUIRE_BROWSER:
        pytest.fail(f"ONLINEEVAL_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)")
    pytest.skip(f"headless browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium); "
                "CI installs it (.ci/run)")


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"]


def screenshot(page: Path, png: Path) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([str(_browser()), *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                        page.resolve().as_uri()], check=True, capture_output=True, timeout=120)


_MOVE_FDS_AND_EXEC = """
import os, sys
a, b = os.dup(int(sys.argv[1])), os.dup(int(sys.argv[2]))
os.dup2(a, 3)
os.dup2(b, 4)
os.set_inheritable(3, True)
os.set_inheritable(4, True)
os.execv(sys.argv[3], sys.argv[3:])
"""


class DevTools:
    """The browser driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
    JSON messages separated by NUL bytes on file descriptors 3 and 4); no websocket library."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp()
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        # the protocol wants the pipe on descriptors 3 (commands in) and 4 (replies out): a tiny
        # Python stub moves them there (copies first, so the two cannot clobber each other) and execs
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MOVE_FDS_AND_EXEC, str(to_r), str(from_w), str(_browser()), *FLAGS,
             f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_r, from_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, until: Any, timeout: float) -> dict[str, Any] | None:
        end = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                msg = json.loads(raw)
                if until(msg):
                    return msg
                self.events.append(msg)
            ready, _, _ = select.select([self.from_r], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed the DevTools pipe")
            self.buf += chunk

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        i = self.next_id
        reply = self._read(lambda m: m.get("id") == i, 60)
        assert reply is not None, f"no reply to {method}"
        assert "error" not in reply, reply
        return reply["result"]

    def load(self, url: str) -> tuple[list[str], dict[str, Any]]:
        """Load ``url`` in a new tab: (every console message, script error, error log entry and
        failed load, as text; the page's state read after the load)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.call(f"{domain}.enable", session=s)
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=s)
        loaded = self._read(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == s, 60)
        assert loaded is not None, "the page never finished loading"
        state = json.loads(self.call("Runtime.evaluate", {"returnByValue": True, "awaitPromise": True, "expression": """
            Promise.all([...document.images].map(i => i.decode().then(() => true, () => false))).then(ok => {
              const t = document.querySelector('table.answer');
              const r = t ? t.getBoundingClientRect() : null;
              return JSON.stringify({title: document.title, images: ok,
                sections: document.querySelectorAll('section').length,
                answer: r && {top: r.top, bottom: r.bottom, left: r.left, right: r.right, rows: t.rows.length},
                scrollWidth: document.documentElement.scrollWidth});
            })"""}, session=s)["result"]["value"])
        self._read(lambda m: False, 0.3)  # late messages
        problems = []
        for e in self.events:
            p, m = e.get("params") or {}, e.get("method")
            if m == "Runtime.consoleAPICalled":
                problems.append(f"console.{p.get('type')}: {[a.get('value') for a in p.get('args', [])]}")
            elif m == "Runtime.exceptionThrown":
                problems.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                problems.append(f"log {p['entry']['level']}: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.loadingFailed":
                problems.append(f"failed load: {p.get('errorText')}")
            elif m == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                if not u.startswith(("file:", "data:", "about:")):
                    problems.append(f"network request to {u}")
        self.call("Target.closeTarget", {"targetId": target})
        return problems, state

    def measure(self, url: str, width: int, expression: str) -> Any:
        """Load ``url`` in a new tab whose window is ``width`` CSS pixels wide and return the JSON
        value of ``expression`` (a string of JavaScript evaluating to JSON text) after the load."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=s)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=s)
        self.call("Page.navigate", {"url": url}, session=s)
        loaded = self._read(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == s, 60)
        assert loaded is not None, "the page never finished loading"
        value = json.loads(self.call("Runtime.evaluate", {"returnByValue": True, "expression": expression},
                                     session=s)["result"]["value"])
        self.call("Target.closeTarget", {"targetId": target})
        return value

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.proc.wait(timeout=20)
        except (AssertionError, RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=20)
        finally:
            os.close(self.to_w)
            os.close(self.from_r)
            shutil.rmtree(self.profile, ignore_errors=True)


def test_reports_render_in_headless_chromium_without_errors(sim: Path, sweep: Path, tmp_path: Path) -> None:
    """Both reports load from disk with no console message, script error, error log entry,
    failed or network load; every image decodes; the answer table is on the first screen
    and nothing is wider than the window. A broken page is caught by the same check."""
    _browser()
    broken = tmp_path / "broken.html"
    broken.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>b</title></head><body>'
                      '<script>console.error("oops")</script><img src="missing.png"></body></html>')
    dt = DevTools()
    try:
        problems, _ = dt.load(broken.as_uri())
        assert any("oops" in p for p in problems) and any("ERR_FILE_NOT_FOUND" in p for p in problems), problems
        for folder, sections in ((sim, 6), (sweep, 6)):
            problems, state = dt.load((folder / REPORT_NAME).resolve().as_uri())
            assert problems == [], problems
            assert state["title"].startswith("onlineeval")
            assert state["images"] and all(state["images"]), state["images"]
            assert state["sections"] >= sections
            answer = state["answer"]
            assert answer is not None and answer["rows"] >= 3
            assert 0 <= answer["top"] < HEIGHT / 2, answer  # the answer starts in the top half of the first screen
            assert answer["right"] <= WIDTH and state["scrollWidth"] <= WIDTH, state
    finally:
        dt.close()


def _first_screen(png: Path) -> Any:
    from PIL import Image

    with Image.open(png) as im:
        assert im.size == (WIDTH, HEIGHT)
        return im.convert("RGB")


def test_first_screen_shows_the_answer(sim: Path, sweep: Path, tmp_path: Path) -> None:
    """Screenshots of the first screen (1280 x 900): not blank, and the answer table's header
    row (its own colour) is drawn in the top half, across most of the width."""
    import numpy as np

    for name, folder in (("sim", sim), ("sweep", sweep)):
        png = tmp_path / f"{name}.png"
        screenshot(folder / REPORT_NAME, png)
        px = np.asarray(_first_screen(png), dtype=np.int16)
        assert px.std() > 20, "blank screenshot"
        header = np.all(np.abs(px - np.array(ANSWER_HEADER_RGB)) <= 3, axis=2)
        rows = np.nonzero(header.sum(axis=1) > WIDTH * 0.4)[0]
        assert rows.size >= 15, f"{name}: no answer-table header row on the first screen"
        assert rows.min() < HEIGHT / 2, f"{name}: the answer table starts below the top half"
        body = px[rows.max() + 2: rows.max() + 120]
        assert body.std() > 20, f"{name}: the answer table's rows are not drawn under its header"
    # the check fails on a page without the answer
    blank = tmp_path / "blank.html"
    blank.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><title>x</title></head><body><h1>x</h1></body>'
                     '</html>')
    screenshot(blank, tmp_path / "blank.png")
    px = np.asarray(_first_screen(tmp_path / "blank.png"), dtype=np.int16)
    assert not np.any(np.all(np.abs(px - np.array(ANSWER_HEADER_RGB)) <= 3, axis=2).sum(axis=1) > WIDTH * 0.4)


# every table's right edge and every <pre>'s text, measured in the laid-out page: what sticks out
# past the window (a table wider than its scroll box, a <pre> line running off its box)
_OVERFLOW_JS = """JSON.stringify({
  innerWidth: window.innerWidth,
  tables: [...document.querySelectorAll('table.answer')].map(t => ({id: t.id, right: t.getBoundingClientRect().right,
    lastHeader: (t.tHead && t.tHead.rows[0].lastElementChild.textContent) || ''})),
  boxes: [...document.querySelectorAll('div.scroll')].map(d => ({scroll: d.scrollWidth, client: d.clientWidth,
    first: d.querySelector('th') ? d.querySelector('th').textContent : ''})),
  pres: [...document.querySelectorAll('pre')].map(p => ({scroll: p.scrollWidth, client: p.clientWidth,
    right: p.getBoundingClientRect().right})),
  scrollWidth: document.documentElement.scrollWidth})"""


def _overflows(state: dict[str, Any]) -> list[str]:
    w = state["innerWidth"]
    out = [f"answer table {t['id']} ends at {t['right']:.0f} px > {w} (last column {t['lastHeader']!r} hidden)"
           for t in state["tables"] if t["right"] > w + 0.5]
    out += [f"<pre> text {p['scroll']} px wide in a {p['client']} px box" for p in state["pres"]
            if p["scroll"] > p["client"] + 1 or p["right"] > w + 0.5]
    if state["scrollWidth"] > w:
        out.append(f"page {state['scrollWidth']} px wide in a {w} px window")
    return out


def test_answer_tables_and_terminal_blocks_fit_the_window(sim: Path, sweep: Path, tmp_path: Path) -> None:
    """Review 12, F4: at 1400 and 800 CSS px every answer table (simulate and sweep pages) ends inside
    the window, so its last columns (null Delta, offline MDE) are visible without scrolling, and the
    pasted terminal blocks (<pre>: sequential, multiple comparisons, SRM, CUPED ...) wrap instead of
    running off-screen. The measurement catches the old stylesheet (main at most 1240 px wide, <pre>
    lines unwrapped) on a page with a long terminal line."""
    _browser()
    import importlib

    page_module = importlib.import_module("simulations.html_report.page")

    pages = [sim / REPORT_NAME, sweep / REPORT_NAME]
    assert len(list(sweep.glob(f"points/*/{REPORT_NAME}"))) == 3
    pages.append(sorted(sweep.glob(f"points/*/{REPORT_NAME}"))[0])
    old_css = page_module._CSS.replace(
        "main { margin: 0 auto;", "main { max-width: 1240px; margin: 0 auto;").replace(
        "white-space: pre-wrap;", "white-space: pre;").replace(
        "table.answer td { font-size: 14px; white-space: normal; }", "table.answer td { font-size: 14px; }").replace(
        "@media (max-width: 1000px)", "@media (max-width: 10px)")
    assert old_css != page_module._CSS
    long_line = "ab: " + " ".join(f"clause{i} at equal power the rule's mean 13.2 days cost 9.2" for i in range(12))
    old = tmp_path / "old.html"
    old.write_text((sim / REPORT_NAME).read_text(encoding="utf-8").replace(page_module._CSS, old_css).replace(
        "<pre>", f"<pre>{long_line}\n", 1), encoding="utf-8")
    assert "<pre>" in (sim / REPORT_NAME).read_text(encoding="utf-8")  # the sim page has terminal blocks
    dt = DevTools()
    try:
        for width in (1400, 800):
            for html in pages:
                state = dt.measure(html.resolve().as_uri(), width, _OVERFLOW_JS)
                assert state["innerWidth"] == width
                assert state["tables"], f"{html}: no answer table"
                assert _overflows(state) == [], (html, width, _overflows(state))
                if width == 1400 and html == pages[0]:  # every simulate table fits (the null check's verdict wraps)
                    wide = [b for b in state["boxes"] if b["scroll"] > b["client"] + 1]
                    assert wide == [], (html, wide)
            state = dt.measure(old.as_uri(), width, _OVERFLOW_JS)
            problems = _overflows(state)
            assert any(p.startswith("<pre>") for p in problems), problems
        assert any(p.startswith("answer table") for p in _overflows(dt.measure(old.as_uri(), 800, _OVERFLOW_JS)))
    finally:
        dt.close()


def test_counterfactual_report_renders_and_every_table_fits(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The bundled configs/counterfactual.yaml's report (made small, with the config's own estimators and flags):
    loads with no console message or failed load, every plot decodes, and at 1280 (the screenshot's width) and
    1400 CSS px no table is wider than its box, so the per-estimator table's 'assumption' column is visible
    without scrolling (it was cut off at 1280 while the short 'support violated' cells were held 320 px wide)."""
    _browser()
    from html_report_folders import counterfactual_folder

    page = (counterfactual_folder(tmp_path_factory) / REPORT_NAME).resolve()
    assert "Counterfactual estimators" in page.read_text(encoding="utf-8")
    dt = DevTools()
    try:
        problems, state = dt.load(page.as_uri())
        assert problems == [], problems
        assert len(state["images"]) >= 4 and all(state["images"]), state["images"]
        for width in (WIDTH, 1400):
            state = dt.measure(page.as_uri(), width, _OVERFLOW_JS)
            assert _overflows(state) == [], (width, _overflows(state))
            assert any(b["first"] == "estimator" for b in state["boxes"])  # the per-estimator table is measured
            wide = [b for b in state["boxes"] if b["scroll"] > b["client"] + 1]
            assert wide == [], (width, wide)
    finally:
        dt.close()
