"""The real thing: `streamlit run dashboard/app.py` on the fixture's data, every page shot by headless Chromium.

Screenshots are kept under ``artifacts/screenshots/`` (git-ignored) for people to look at. A shot counts only
when the page has rendered: the first shot of a cold app shows Streamlit's skeleton, so Chromium is driven over its
DevTools protocol and each page is shot once its script has finished and it shows a title, no skeleton and drawn
charts; the PNG is then checked not to be blank (its main area, right of the sidebar, holds text and colour).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import stop

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = ROOT / "artifacts" / "screenshots"
PAGES = {"overview": "", "replication": "replication", "consumers": "consumers", "transactions": "transactions",
         "consensus": "consensus", "history": "history"}
WIDTH, HEIGHT = 1400, 1000
SIDEBAR_FRACTION = 0.25  # Streamlit's sidebar is ~300 px of 1400
VIEWER_TZ = "Europe/Berlin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            if r.status == 200 and r.read().strip() == b"ok":
                return
        time.sleep(0.3)
    raise TimeoutError(f"{url} not healthy after {timeout}s")


@pytest.fixture(scope="module")
def dashboard_url(dashboard_data: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install chromium)")
    port = free_port()
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py"),
           "--server.address", "127.0.0.1", "--server.port", str(port), "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", "--",
           "--state-dir", str(dashboard_data.state_dir), "--history", str(dashboard_data.history_dir),
           "--reports", str(dashboard_data.reports_dir), "--refresh", "0", "--poll-interval", "3600"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "TZ": "UTC"})
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        if stop(proc) not in (0, -signal.SIGTERM):
            print(log.read_text(errors="replace")[-3000:])


# True once the page has run: the script finished (Streamlit's own `data-test-script-state` on the app: its
# "running" indicator shows only after a delay, so a fast page could be shot mid-run, a chart not yet sent and the
# rest of the page missing), a title in the main block, no skeleton, no "running" indicator, and every plotly
# chart drawn (its SVG present).
READY_JS = """(() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.dataset.testScriptState !== 'notRunning') return false;
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  if (!main || !main.querySelector('h1')) return false;
  if (document.querySelector('[data-testid="stAppSkeleton"], [data-testid="stSkeleton"]')) return false;
  if (document.querySelector('[data-testid="stStatusWidgetRunningIcon"], '
                             + '[data-testid="stStatusWidgetRunningManIcon"]')) return false;
  return [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'));
})()"""


class Chromium:
    """Headless Chromium driven over the DevTools protocol: navigate, wait until the page has rendered, shoot.

    Waiting on the page itself (rather than on ``--virtual-time-budget``) is what makes the first shot of a
    cold app reliable. One browser process serves every page.
    """

    def __init__(self, profile: Path) -> None:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}",
               "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"]
        # A browser in another zone than the server's, to show times converted to the viewer's zone.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env={**os.environ, "TZ": VIEWER_TZ}, start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
            target = next(t for t in json.load(r) if t.get("type") == "page")
        from websockets.sync.client import connect

        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=10))
        self._id = 0
        self.call("Page.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def shoot(self, url: str, out: Path, timeout: float = 45.0) -> bool:
        """Navigate, wait until READY_JS holds (or `timeout`), save a PNG; True when the page said ready."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        ready = False
        while time.monotonic() < deadline:
            time.sleep(0.25)
            res = self.call("Runtime.evaluate", expression=READY_JS, returnByValue=True)
            if res.get("result", {}).get("value") is True:
                ready = True
                time.sleep(0.6)  # let charts and tables finish laying out
                break
        shot = self.call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["data"]))
        return ready

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stack.close()
        stop(self.proc, timeout=10)


@pytest.fixture(scope="module")
def browser(dashboard_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    b = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


def rendered(png: Path) -> tuple[bool, str]:
    """(has the page rendered, why): the main area must show text (dark pixels) and several colours."""
    from PIL import Image

    if not png.exists() or png.stat().st_size == 0:
        return False, "no file"
    with Image.open(png) as im:
        rgb = im.convert("RGB")
        main = rgb.crop((int(rgb.width * SIDEBAR_FRACTION), 0, rgb.width, rgb.height))
        colours = main.getcolors(1 << 24) or []
        dark = sum(n for n, (r, g, b) in colours if r + g + b < 450)
        share = dark / (main.width * main.height)
    ok = len(colours) >= 150 and share >= 0.004
    return ok, f"{len(colours)} colours, {share:.2%} dark pixels in the main area"


@pytest.mark.parametrize("page", list(PAGES))
def test_page_screenshot_is_not_blank(dashboard_url: str, browser: Chromium, page: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    out = SHOTS / f"{page}.png"
    ok, why = False, ""
    for _attempt in range(3):
        out.unlink(missing_ok=True)
        said_ready = browser.shoot(f"{dashboard_url}/{PAGES[page]}", out)
        ok, why = rendered(out)
        if ok and said_ready:
            break
    assert ok, f"{page}: screenshot blank ({why}); see {out}"
    assert said_ready, f"{page}: the page never finished rendering (script running or a chart not drawn); see {out}"


PAGE_STATE_JS = """(() => ({
  title: (document.querySelector('[data-testid="stMainBlockContainer"] h1') || {}).innerText || null,
  notFound: document.body.innerText.includes('Page not found'),
  deploy: !!document.querySelector('[data-testid="stAppDeployButton"]'),
  path: location.pathname,
}))()"""


def test_overview_at_slash_overview_without_deploy_button(dashboard_url: str, browser: Chromium,
                                                          tmp_path: Path) -> None:
    """``/overview`` shows the Overview (Streamlit serves the default page at "/" only; the app sends it
    there), and the toolbar is minimal: no Deploy button (dashboard/.streamlit/config.toml)."""
    assert browser.shoot(f"{dashboard_url}/overview", tmp_path / "overview.png"), "the page never got ready"
    state: dict[str, Any] = {}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # the redirect to "/" may land a moment after the first render
        state = browser.call("Runtime.evaluate", expression=PAGE_STATE_JS, returnByValue=True)["result"]["value"]
        if state["path"] == "/" and state["title"] == "Overview":
            break
        time.sleep(0.25)
    assert state["title"] == "Overview" and not state["notFound"], state
    assert state["path"] == "/", state
    assert not state["deploy"], state
