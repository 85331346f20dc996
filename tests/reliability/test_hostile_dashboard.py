"""Hostile text in a real browser: stored model ids, errors, labels and notes, and the
URL's parameters, full of Markdown, HTML and Streamlit directives, on every page of a
live dashboard in headless Chromium. Each must show as text: no request leaves for the
host they name, no image or link to it is drawn, and the words are on the page as
they were written."""

from __future__ import annotations

import http.server
import threading
import urllib.parse

import pytest

from tests.dashboard_data import build, build_hostile, hostile, hostile_search
from tests.live_dashboard import CHROMIUM, CHROMIUM_ARGS, live_dashboard
from tests.test_dashboard_e2e import sync_playwright  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
TIMEOUT_MS = 30_000


@pytest.fixture
def trap():
    """A web server that records every request: what hostile text asks a browser to
    fetch lands here."""
    hits: list[str] = []

    class Record(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", hits
    server.shutdown()


def assert_inert(page, host: str, hits: list[str]) -> None:
    """Nothing on the page fetches from, or links to, the host the text names."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid^=\"stSkeleton\"]')", timeout=TIMEOUT_MS
    )
    page.wait_for_timeout(500)  # images start loading as soon as they are drawn
    assert hits == []
    linked = page.evaluate(
        """host => [...document.querySelectorAll('a, img, image, source, link, script')]
            .map(e => e.getAttribute('href') || e.getAttribute('src')
                      || e.getAttribute('xlink:href') || '')
            .filter(url => url.includes(host))""",
        host,
    )
    assert linked == []
    errors = page.locator('[data-testid="stException"]')
    assert errors.count() == 0, errors.first.inner_text()


def test_hostile_text_and_url_parameters_show_as_text_on_every_page(
    sync_playwright,  # noqa: F811
    trap,
    tmp_path,
):
    host, hits = trap
    runs_dir, db_path = build_hostile(tmp_path / "data", host)
    log = tmp_path / "zoo-dashboard.log"
    evil = f"timm/evil[**{host}**](http://{host}/model)"
    quoted = urllib.parse.quote_plus
    with (
        live_dashboard(runs_dir, db_path, log, wait_for_data=True) as dashboard,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        page.set_default_timeout(TIMEOUT_MS)
        url = dashboard.url

        # A search that matches nothing is echoed in the page: as text.
        page.goto(f"{url}/?q={quoted(hostile_search(host))}")
        page.get_by_text("No cells match the filters", exact=False).wait_for()
        page.get_by_text("[**Session expired**](", exact=False).first.wait_for()
        assert_inert(page, host, hits)

        # The matrix, a failing cell of the hostile model, and its shipped warning-free
        # header; then every other page, each until what it shows is drawn: a selector,
        # or texts. The Docs page takes a document and a section from the address:
        # named in a warning, never read.
        pair = f"config_a={quoted('inductor/default dyn=false bf16')}"
        visits = [
            ("/?q=evil", ".zoo-matrix a[title]"),
            ("/?rows=families", ".js-plotly-plot"),
            (f"/detail?model={quoted(evil)}", ("inductor codegen", ":red[message red]")),
            ("/summary", ".js-plotly-plot"),
            ("/failures", ("Error signatures", ":red[signature red]")),
            (f"/compare?a={quoted(hostile(host, 'label'))}&b=plain", ("cells compared",)),
            ("/leaderboard?q=evil", '[data-testid="stDataFrame"]'),
            (f"/configs?{pair}&config_b={quoted('aot_eager dyn=false bf16')}", ("Models with both",)),
            ("/breaks", (":red[reason red]",)),
            (f"/docs?doc={quoted(hostile(host, 'doc'))}&section=x", ("Not in the data",)),
        ]  # fmt: skip
        for path, shows in visits:
            page.goto(url + path)
            if isinstance(shows, str):
                page.locator(shows).first.wait_for()
            for text in () if isinstance(shows, str) else shows:
                # Where a table holds the text too, its grid keeps a hidden copy.
                page.get_by_text(text, exact=False).filter(visible=True).first.wait_for()
            assert_inert(page, host, hits)
        # A value no widget offers is dropped from the address, never echoed.
        page.goto(f"{url}/?status={quoted(hostile(host, 'status'))}&family=x")
        page.locator(".zoo-matrix a[title]").first.wait_for()
        assert "status=" not in page.url
        assert_inert(page, host, hits)
        browser.close()
    assert "Traceback" not in log.read_text()


def test_clicking_a_family_tile_opens_its_models_without_a_widget_warning(
    sync_playwright,  # noqa: F811
    tmp_path,
):
    runs_dir, db_path = build(tmp_path / "data")
    log = tmp_path / "zoo-dashboard.log"
    with (
        live_dashboard(runs_dir, db_path, log, wait_for_data=True) as dashboard,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{dashboard.url}/?rows=families")
        point = page.locator(".js-plotly-plot .scatterlayer .point").first
        point.wait_for()
        point.click(force=True)
        page.locator(".zoo-matrix a[title]").first.wait_for()
        assert "family=" in page.url and "rows=families" not in page.url
        browser.close()
    text = log.read_text()
    assert "created with a default value but also had its value set" not in text, text
