"""``koord compare --html`` opened in a real headless browser: Debian's chromium, driven by chromedriver over
its W3C HTTP API with the standard library (no selenium). The report must render its plots (every inline
SVG has a size, the screenshot is not blank) without console errors and without the network.

tests/e2e/setup_chromium.sh installs chromium and chromium-driver (``make e2e`` runs it); without them the
test is skipped and says why.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WIDTH, HEIGHT = 1400, 2400


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Driver:
    """The few W3C WebDriver calls the test needs, over urllib."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = ""

    def call(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as err:
            raise AssertionError(f"{method} {path}: {err.code} {err.read()[:500]!r}") from err

    def s(self, method: str, path: str, body: Any = None) -> Any:
        return self.call(method, f"/session/{self.session}{path}", body)


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Driver]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium / chromedriver not installed (tests/e2e/setup_chromium.sh installs them)")
    port = _free_port()
    proc = subprocess.Popen(
        [CHROMEDRIVER, f"--port={port}", "--allowed-ips=127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    d = Driver(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if d.call("GET", "/status", timeout=2).get("ready"):
                    break
            except (OSError, AssertionError):
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("chromedriver did not become ready")
            time.sleep(0.2)
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={WIDTH},{HEIGHT}",
        ]
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
                    "goog:loggingPrefs": {"browser": "ALL"},
                }
            }
        }
        d.session = d.call("POST", "/session", caps, timeout=120)["sessionId"]
        yield d
    finally:
        if d.session:
            with contextlib.suppress(OSError, AssertionError):
                d.call("DELETE", f"/session/{d.session}", timeout=30)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _report(tmp_path: Path) -> Path:
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "koord_framework",
            "compare",
            "--cluster",
            "configs/examples/cluster",
            "--config",
            "configs/scheduler/koord-scheduler.yaml",
            "--config",
            "configs/examples/compare/candidate.yaml",
            "--deschedule-rounds",
            "1",
            "--html",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert out.is_file(), proc.stderr
    return out


def test_report_renders_in_headless_chromium(driver: Driver, tmp_path: Path) -> None:
    report = _report(tmp_path)
    text = report.read_text()
    # Self-contained: nothing to fetch (the SVG namespace URIs are names, not requests).
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=['\"]?https?:", text)
    driver.s("POST", "/url", {"url": report.as_uri()})
    assert (
        driver.s("POST", "/execute/sync", {"script": "return document.readyState", "args": []}) == "complete"
    )
    sizes = driver.s(
        "POST",
        "/execute/sync",
        {
            "script": "return Array.from(document.querySelectorAll('.plot svg')).map(e => {"
            " const r = e.getBoundingClientRect(); return [e.parentElement.id, r.width, r.height]; })",
            "args": [],
        },
    )
    plots = {plot_id for plot_id, _, _ in sizes}
    assert {"bars", "histograms", "heat"} <= plots, sizes
    assert all(w > 50 and h > 50 for _, w, h in sizes), sizes
    # The plots drew marks: bars and heat cells are SVG paths or images with a fill.
    marks = driver.s(
        "POST",
        "/execute/sync",
        {"script": "return document.querySelectorAll('.plot svg path, .plot svg image').length", "args": []},
    )
    assert marks > 20
    png = base64.b64decode(driver.s("GET", "/screenshot"))
    shot = tmp_path / "report.png"
    shot.write_bytes(png)
    _assert_not_blank(png)
    logs = driver.s("POST", "/se/log", {"type": "browser"})
    severe = [entry for entry in logs if entry.get("level") == "SEVERE"]
    assert not severe, severe
    print(f"screenshot: {shot}")  # pytest keeps its last temporary directories: look at it there


def _assert_not_blank(png: bytes) -> None:
    """More than one colour, and a meaningful share of pixels that are not the background."""
    from matplotlib import image

    pixels = image.imread(io.BytesIO(png), format="png")
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    flat = pixels[..., :3].reshape(-1, 3)
    colours = {tuple(int(v * 255) for v in row) for row in flat[:: max(len(flat) // 20000, 1)]}
    assert len(colours) > 10, f"only {len(colours)} colours: a blank page?"
    background = flat[0]
    differs = (abs(flat - background).sum(axis=1) > 0.05).mean()
    assert differs > 0.05, f"only {differs:.1%} of the pixels differ from the background"
