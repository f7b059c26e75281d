"""The HTML report of the corpus scan in a real browser (Chromium), with the network cut off.

Needs Debian's ``chromium`` at /usr/bin/chromium and the ``playwright`` Python package (the
``dev`` extra); skipped without them, except under ``CI=true`` where their absence fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED, missing, need_path

from antiloop.cli import main

CORPUS = SHARED / "corpus"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _require(ok: bool, reason: str) -> None:
    if not ok:
        missing(reason)


@pytest.fixture(scope="module")
def browser() -> Any:
    """A headless Chromium driven by Playwright."""
    _require(CHROMIUM.exists(), f"{CHROMIUM} is absent (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require(False, "the playwright package is absent (pip install -e '.[dev]')")
        raise
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML report of ``antiloop scan CORPUS --html``."""
    need_path(CORPUS, "the shared corpus beside the repository")
    path = tmp_path_factory.mktemp("report") / "report.html"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["scan", str(CORPUS), "--html", str(path)]) == 1
    return path


def test_report_opens_offline_and_shows_timelines(
    browser: Any, report: Path, tmp_path: Path
) -> None:
    """The report loads with every request but file:// refused, and draws every timeline."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    refused: list[str] = []

    def only_files(route: Any) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", only_files)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(report.as_uri())
    assert page.title() == "antiloop scan report"
    assert page.locator(".run").count() == 100
    assert page.locator(".run .s").count() == 4343
    assert page.locator(".run .s.e").count() > 50
    with_point = page.locator(".run-head", has_text="first loop point").count()
    assert page.locator(".run .s.p").count() == with_point > 20
    for chart in ("#chart-kinds", "#chart-fingerprints", "#chart-waste"):
        assert page.locator(f"{chart} svg rect").count() >= 2, chart

    # The tooltip of a loop cell names its tool, the loop and the command.
    cell = page.locator(".run .s.e").first
    cell.scroll_into_view_if_needed()
    cell.hover()
    tip = page.locator("#tip")
    assert tip.is_visible()
    assert "loop: repeat" in tip.inner_text()

    # "only runs with loops" hides the others.
    page.locator("#only-loops").check()
    visible = page.locator(".run:visible").count()
    assert 0 < visible < 100
    assert visible == page.locator(".run:not([data-loops='0'])").count()

    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    keep = os.environ.get("ANTILOOP_REPORT_SHOT")
    if keep:
        shutil.copy(shot, keep)
    assert refused == []
    assert errors == []
    page.close()
