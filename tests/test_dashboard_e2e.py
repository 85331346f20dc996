"""End to end: the dashboard server on a small fixture, driven by headless Chromium.

Starts the server as ``zoo-dashboard`` does (tests/live_dashboard.py), loads the matrix,
filters it through the URL, clicks a cell to open its model's detail (on the config the
cell is, with the filters kept), follows a caveat's link to its docs section, opens the
Summary, the Leaderboard and Config vs config, and saves a screenshot of each step (to the test's temporary folder, and to
``artifacts/screenshots/`` when ``ZOO_SCREENSHOTS`` is set). Needs Playwright's Python
package and Debian's chromium; without them the test is skipped, except under CI (env
``CI``), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dashboard.serve import READY
from tests.dashboard_data import build
from tests.live_dashboard import CHROMIUM, CHROMIUM_ARGS, live_dashboard

REPO = Path(__file__).resolve().parents[1]
INSTALL = (
    "pip install playwright (the Python package only; no `playwright install`) and "
    "apt-get install chromium (Debian's, at /usr/bin/chromium)"
)
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
TILE = ".zoo-matrix a[title]"
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


@pytest.fixture
def server(tmp_path):
    runs_dir, db_path = build(tmp_path / "data")
    log = tmp_path / "zoo-dashboard.log"
    # zoo-dashboard loads the results as it starts, before any browser asks.
    with live_dashboard(runs_dir, db_path, log, wait_for_data=True) as dashboard:
        assert f"{READY} in " in log.read_text() and "(4 parquet files)" in log.read_text()
        yield dashboard.url


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


def _open(page, url: str, tmp_path: Path, shot: str, *texts: str, selector: str = "") -> None:
    """Go to ``url``, wait for each of ``texts`` (and ``selector``), check and shoot it."""
    page.goto(url)
    for text in texts:
        page.get_by_text(text, exact=False).first.wait_for()
    if selector:
        page.locator(selector).first.wait_for()
    _no_exception(page)
    _shoot(page, tmp_path, shot)


# sync_playwright comes first so that a missing browser skips before a server starts.
def test_matrix_filter_and_detail_in_a_browser(sync_playwright, server, tmp_path):
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(TIMEOUT_MS)

        # The page names st.html's code, so the browser fetches it with Streamlit's own
        # (dashboard/page_code.py): every page, the address of a page as well.
        for address in (server, f"{server}/summary"):
            with urllib.request.urlopen(address) as response:
                assert re.search(
                    r'rel="modulepreload"[^>]*/Html\.[\w-]+\.js"', response.read().decode()
                )
        # Streamlit's own files come from memory (dashboard/static_cache.py): the same
        # bytes and headers as from its handler, which still answers a revalidation.
        with urllib.request.urlopen(server) as response:
            script = re.search(r'src="\./(static/js/index\.[\w-]+\.js)"', response.read().decode())
        import streamlit

        on_disk = (Path(streamlit.__file__).parent / "static" / script[1]).read_bytes()
        with urllib.request.urlopen(f"{server}/{script[1]}") as response:
            assert response.read() == on_disk
            assert response.headers["Cache-Control"].startswith("public, immutable")
            assert response.headers["Content-Type"] == "application/javascript"
            etag = response.headers["ETag"]
        revalidate = urllib.request.Request(
            f"{server}/{script[1]}", headers={"If-None-Match": etag}
        )
        with pytest.raises(urllib.error.HTTPError, match="304"):
            urllib.request.urlopen(revalidate)

        page.goto(server)
        page.locator(TILE).first.wait_for()
        page.get_by_text("Models 1–3 of 3", exact=False).wait_for()
        assert page.locator(TILE).count() == 5
        _no_exception(page)
        _shoot(page, tmp_path, "1-matrix")

        page.goto(f"{server}/?status=compile_error&status=not-a-status")
        page.get_by_text("Models 1–1 of 1", exact=False).wait_for()
        page.locator(TILE).first.wait_for()
        assert page.locator(TILE).count() == 1
        assert "not-a-status" not in page.url
        _no_exception(page)
        _shoot(page, tmp_path, "2-filtered-by-url")

        cell = page.locator(TILE).first
        tooltip = cell.get_attribute("title")
        assert "timm/vit_tiny_patch16_224" in tooltip and "\ncompile_error" in tooltip
        cell.click()
        page.wait_for_url("**/detail?**")
        page.get_by_text("LoweringException: boom in aten.fancy_op", exact=False).first.wait_for()
        page.get_by_text("zoo-run --models timm/vit_tiny_patch16_224", exact=False).first.wait_for()
        assert "model=timm%2Fvit_tiny_patch16_224" in page.url
        assert "config=inductor%2Fdefault" in page.url and "status=compile_error" in page.url
        _no_exception(page)
        _shoot(page, tmp_path, "3-model-detail")

        # Its aot_eager cell's timing was disturbed: the caveat links to the docs section
        # that explains it, opened in the dashboard.
        page.get_by_text("Why: README.md § What is recorded", exact=False).first.click()
        page.wait_for_url("**/docs?**")
        assert "section=what-is-recorded" in page.url
        page.get_by_role("heading", name="What is recorded").first.wait_for()
        _no_exception(page)
        _shoot(page, tmp_path, "3-docs")

        _open(
            page,
            f"{server}/summary",
            tmp_path,
            "4-summary",
            "Per config: pass rate, speedup, compile time",
            "Across sweeps",
            selector=".js-plotly-plot",
        )

        _open(
            page,
            f"{server}/leaderboard?view=largest+speedups",
            tmp_path,
            "5-leaderboard",
            "largest speedups: passing cells",
            "3 cells. Click a column",
        )
        page.locator('[data-testid="stDataFrame"]').first.wait_for()

        bf16, aot = "inductor%2Fdefault+dyn%3Dfalse+bf16", "aot_eager+dyn%3Dfalse+bf16"
        # resnet18 passes in both: 1.50x against 1.02x.
        _open(
            page,
            f"{server}/configs?config_a={aot}&config_b={bf16}",
            tmp_path,
            "6-config-vs-config",
            "over the 1 models passing",
            "1.47x",
            selector=".js-plotly-plot",
        )
        browser.close()
