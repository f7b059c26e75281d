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


def _keep(shot: Path) -> None:
    """Copy a screenshot to $ANTILOOP_ARTIFACTS when that is set."""
    keep = os.environ.get("ANTILOOP_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


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
        assert page.locator(f"{chart} .bar .seg").count() >= 2, chart
        size = page.locator(f"{chart} .bar-label").first.evaluate(
            "el => parseFloat(getComputedStyle(el).fontSize)"
        )
        assert size >= 12, (chart, size)

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
    _keep(shot)
    assert refused == []
    assert errors == []
    page.close()


def test_details_on_click_and_keyboard(browser: Any, report: Path) -> None:
    """A click on a step shows it under its timeline; so do Tab, the arrow keys and Enter."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(report.as_uri())
    run = page.locator(".run").filter(has=page.locator(".s.e")).first
    cell = run.locator(".s.e").first
    cell.click()
    detail = run.locator(".detail")
    assert detail.is_visible()
    assert "loop: repeat" in detail.inner_text()
    assert cell.get_attribute("aria-pressed") == "true"

    page.locator("#fp-search").focus()
    page.keyboard.press("Tab")
    first = page.evaluate(
        "() => [document.activeElement.className, document.activeElement.dataset.i]"
    )
    assert first[0].startswith("s "), first
    page.keyboard.press("ArrowRight")
    moved = page.evaluate("() => document.activeElement.dataset.i")
    assert int(moved) == int(first[1]) + 1
    page.keyboard.press("Enter")
    shown = page.locator(".run").filter(has=page.locator(".s.sel")).locator(".detail")
    assert shown.inner_text().startswith(f"step {moved} ·")
    page.keyboard.press("Escape")
    assert shown.is_hidden()

    bar = page.locator("#chart-kinds .bar").first
    bar.focus()
    page.keyboard.press("Enter")
    assert bar.get_attribute("aria-pressed") == "true"
    assert "runs" in page.locator("#chart-kinds .detail").inner_text()
    page.close()


def test_search_by_fingerprint(browser: Any, report: Path) -> None:
    """Typing part of a fingerprint keeps the runs with it; a fingerprint's bar searches too."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(report.as_uri())
    bar = page.locator("#chart-fingerprints .bar").first
    fingerprint = bar.get_attribute("data-fp")
    assert fingerprint
    part = fingerprint.split("::", 2)[-1][:12].upper()  # any case, any part
    page.locator("#fp-search").fill(part)
    shown = page.locator(".run:visible")
    having = page.locator(".run").evaluate_all(
        "(runs, q) => runs.filter(r => r.dataset.fps.includes(q)).length", part.lower()
    )
    assert 0 < shown.count() == having < 100
    assert page.locator("#fp-count").inner_text().startswith(f"{having} run")
    assert shown.first.locator("ul.loops li.match").count() >= 1
    page.locator("#fp-search").fill("")
    assert page.locator(".run:visible").count() == 100
    bar.click()
    assert page.locator("#fp-search").input_value() == fingerprint
    assert 0 < page.locator(".run:visible").count() < 100
    page.close()


@pytest.mark.parametrize("width", [360, 768, 1440])
def test_report_fits_three_widths(browser: Any, report: Path, tmp_path: Path, width: int) -> None:
    """At 360, 768 and 1440 px nothing is wider than the window; the labels stay readable."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(report.as_uri())
    found = page.evaluate(
        """() => {
        const wide = [...document.querySelectorAll("body *")].filter(n => {
          const b = n.getBoundingClientRect();
          return (b.width || b.height) && (b.right > innerWidth + 1 || b.left < -1);
        }).map(n => n.tagName + "." + n.className).slice(0, 5);
        return {scroll: document.scrollingElement.scrollWidth, inner: innerWidth, wide};
      }"""
    )
    assert found["scroll"] <= found["inner"], found
    assert found["wide"] == [], found
    sizes = page.locator(".bar-label").evaluate_all(
        "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))"
    )
    assert min(sizes) >= 12
    shot = tmp_path / f"report-{width}.png"
    page.screenshot(path=str(shot), full_page=False)
    _keep(shot)
    page.close()
