"""End to end: ``streamlit run`` on a small fixture, driven by headless Chromium.

Loads the matrix, filters it through the URL, clicks a cell to open its model's detail
and saves a screenshot of each step (to the test's temporary folder, and to
``artifacts/screenshots/`` when ``ZOO_SCREENSHOTS`` is set). Needs Playwright's Python
package and Debian's chromium; without them the test is skipped, except under CI (env
``CI``), where it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard_data import build

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = (
    "pip install playwright (the Python package only; no `playwright install`) and "
    "apt-get install chromium (Debian's, at /usr/bin/chromium)"
)
MARKER = ".js-plotly-plot .scatterlayer path.point"
TIMEOUT_MS = 30_000


@pytest.fixture
def sync_playwright():
    """Playwright's entry point, once the package and the browser are known to be there."""
    try:
        from playwright.sync_api import sync_playwright as entry_point
    except ImportError:
        missing = "the playwright package"
    else:
        if Path(CHROMIUM).exists():
            return entry_point
        missing = CHROMIUM
    message = f"{missing} is missing: {INSTALL}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    runs_dir, db_path = build(tmp_path / "data")
    port = _free_port()
    log = (tmp_path / "streamlit.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(REPO / "dashboard" / "app.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        env=dict(os.environ, ZOO_RUNS_DIR=str(runs_dir), ZOO_DB=str(db_path)),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as response:
                if response.read() == b"ok":
                    break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log.close()
                pytest.fail(f"streamlit did not start:\n{(tmp_path / 'streamlit.log').read_text()}")
            time.sleep(0.2)
    yield base
    process.terminate()
    process.wait(timeout=30)
    log.close()


def _shoot(page, tmp_path: Path, name: str) -> None:
    # Streamlit draws placeholders while it loads a widget's code; shoot what a user sees.
    page.wait_for_function(
        "() => !document.querySelector('[data-testid^=\"stSkeleton\"]')", timeout=TIMEOUT_MS
    )
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    if os.environ.get("ZOO_SCREENSHOTS"):
        keep = REPO / "artifacts" / "screenshots"
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / path.name)


def _no_exception(page) -> None:
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.first.inner_text()


# sync_playwright comes first so that a missing browser skips before a server starts.
def test_matrix_filter_and_detail_in_a_browser(sync_playwright, server, tmp_path):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(TIMEOUT_MS)

        page.goto(server)
        page.locator(MARKER).first.wait_for()
        page.get_by_text("Models 1–3 of 3", exact=False).wait_for()
        assert page.locator(MARKER).count() == 5
        _no_exception(page)
        _shoot(page, tmp_path, "1-matrix")

        page.goto(f"{server}/?status=compile_error&status=not-a-status")
        page.get_by_text("Models 1–1 of 1", exact=False).wait_for()
        page.locator(MARKER).first.wait_for()
        assert page.locator(MARKER).count() == 1
        assert "not-a-status" not in page.url
        _no_exception(page)
        _shoot(page, tmp_path, "2-filtered-by-url")

        cell = page.locator(MARKER).first
        cell.scroll_into_view_if_needed()
        box = cell.bounding_box()
        # Plotly picks the point under the pointer from its hover state: hover, then click.
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_timeout(200)
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_url("**/detail?**")
        page.get_by_text("LoweringException: boom in aten.fancy_op", exact=False).first.wait_for()
        page.get_by_text("zoo-run --models timm/vit_tiny_patch16_224", exact=False).first.wait_for()
        assert "model=timm%2Fvit_tiny_patch16_224" in page.url or "vit_tiny" in page.url
        assert "status=compile_error" in page.url
        _no_exception(page)
        _shoot(page, tmp_path, "3-model-detail")
        browser.close()
