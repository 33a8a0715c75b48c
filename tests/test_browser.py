"""The audit's report.html and the docs site in a real browser: Debian's headless Chromium,
driven by Playwright (``make chromium`` installs the browser; Playwright's own are not used).

The report is written by ``write_reports`` (as ``accord audit --out DIR`` writes it) for an audit
of scripted conditions with known answers, opened from disk. The test checks that it renders
with no console error and no request to any other host, that the stability chart and the
per-prompt table are visible, and that a prompt's ballots expand. The docs site is served on
127.0.0.1 and its index page rendered the same way. Screenshots go to the test's tmp_path.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from accord import models
from accord._types import Settings
from accord.cli._audit import Condition, raw_phase, stabilized_phase, summarize
from accord.cli._audit_input import Item
from accord.cli._audit_report import write_reports
from accord.schema._schema import Schema

CHROMIUM = "/usr/bin/chromium"
# headless=True gives --headless; these are the rest (no sandbox as root, no GPU, nothing fetched).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

Colour = Literal["red", "green", "blue"]

pytestmark = pytest.mark.slow  # a real browser, as a real server is slow


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Debian's Chromium, headless, with a fresh profile (its --user-data-dir) for this module."""
    if shutil.which("chromium") is None:
        pytest.fail("Debian's chromium is not installed: run `make chromium` (make test does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def open_page(context: Any, url: str) -> Any:
    """A page at ``url`` that has recorded, while loading and after, its console errors, uncaught
    exceptions and failed requests (``page.problems``) and every URL it asked for (``page.requests``)."""
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.problems, page.requests = [], []
    page.on("console", lambda message: page.problems.append(f"console {message.type}: {message.text}") if message.type == "error" else None)
    page.on("pageerror", lambda error: page.problems.append(f"uncaught: {error}"))
    page.on("requestfailed", lambda request: page.problems.append(f"failed: {request.url} ({request.failure})"))
    page.on("request", lambda request: page.requests.append(request.url))
    page.goto(url, wait_until="load")
    return page


def scripted_audit() -> dict[str, Any]:
    """Four prompts under three conditions: p0 and p2 agree, p1 differs in wording only, p3 in the
    answer; accord's runs under c1 take 3 ballots for each prompt but p3, which takes 4."""
    schema = Schema.of(Colour)
    golds = ["red", "green", "blue", "red"]
    items = [Item(f"p{i}", f"Name colour {i}.", schema, "Colour", g, json.dumps(g)) for i, g in enumerate(golds)]
    raw = [["red", "green", "blue", "red"], ["red", "Green.", "blue", "blue"], ["red", "green", "blue", "red"]]
    conditions = [Condition(f"c{j}", models.scripted(texts)) for j, texts in enumerate(raw)]
    voted = [["red"] * 3 + ["green"] * 3 + ["blue"] * 3 + ["red"] * 3,
             ["red"] * 3 + ["green"] * 3 + ["blue"] * 3 + ["blue", "red", "red", "red"],
             ["red"] * 3 + ["green"] * 3 + ["blue"] * 3 + ["red"] * 3]
    stable = stabilized_phase(items, [Condition(f"c{j}", models.scripted(texts)) for j, texts in enumerate(voted)], None)
    audit = summarize(items, raw_phase(items, conditions, Settings()), stable, {"float32": {"batch": 0.01}})
    audit["model"] = "scripted"
    return audit


def test_the_audit_report_renders_and_its_ballots_expand(browser: Any, tmp_path: Path) -> None:
    _, report = write_reports(scripted_audit(), tmp_path / "report")
    page = open_page(browser, report.as_uri())

    chart = page.get_by_alt_text("Agreement before and after, per prompt")
    assert chart.is_visible()
    assert page.evaluate("img => img.complete && img.naturalWidth > 100", chart.element_handle())  # the PNG decoded
    table = page.locator("#prompts")
    assert table.is_visible()
    assert table.locator("tr[id^='prompt-']").count() == 4

    # p3: the raw text under c1 said "blue"; accord's run under c1 had one "blue" ballot among "red" ones.
    row = page.locator("#prompt-p3")
    details = row.locator("details")
    assert details.get_attribute("open") is None
    raw_cell = details.locator("td", has_text="blue").first
    assert not raw_cell.is_visible()  # folded
    details.locator("summary").click()
    assert details.get_attribute("open") is not None
    assert raw_cell.is_visible()
    ballots = details.locator("tr", has=page.locator("td", has_text="valid"))
    assert ballots.count() == 3 * 3 + 1  # every ballot of the three runs: 3 + 4 + 3
    assert ballots.first.is_visible()
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)

    assert not page.problems, page.problems
    others = [url for url in page.requests if not url.startswith(("file:", "data:"))]
    assert not others, f"the report asked another host: {others}"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def served_site(docs_site: tuple[Path, subprocess.CompletedProcess[str]]) -> Iterator[str]:
    """The built docs site on 127.0.0.1 (a port the system picks), stopped after the test."""
    site, build = docs_site
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stderr}"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_docs_site_index_renders(browser: Any, served_site: str, tmp_path: Path) -> None:
    page = open_page(browser, served_site)
    page.wait_for_load_state("networkidle")  # the search index too, fetched by a worker
    assert page.get_by_role("heading", name="accord documentation").is_visible()
    assert page.evaluate("getComputedStyle(document.querySelector('.md-header')).position") == "sticky"  # the theme's CSS applied
    assert page.locator("nav.md-nav--primary").get_by_role("link", name="Signatures and fields").count() == 1
    page.screenshot(path=str(tmp_path / "docs_index.png"), full_page=True)
    assert not page.problems, page.problems
    others = [url for url in page.requests if not url.startswith(served_site)]
    assert not others, f"the site asked another host: {others}"

    page.locator("article").get_by_role("link", name="README", exact=True).click()
    page.wait_for_url(served_site + "readme/")
    title = page.locator("article h1")
    assert title.is_visible() and title.inner_text().startswith("accord")  # the README, as a page
