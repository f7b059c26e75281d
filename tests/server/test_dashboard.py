"""The dashboard in a real browser (Playwright driving Debian's chromium).

Needs ``/usr/bin/chromium`` (``apt-get install chromium``) and the ``playwright`` package (the
``dev`` extra; never ``playwright install``). Skipped without them, except under ``CI=true``,
where their absence fails.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from tests.conftest import missing
from tests.server.conftest import TOKEN, start_server, stop_server

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _need(reason: str) -> None:
    missing(reason)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A page of the dashboard, signed in, on a fresh service."""
    if not CHROMIUM.exists():
        _need(f"{CHROMIUM} is missing: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package is missing: pip install -e '.[dev]'")
    server = start_server(tmp_path_factory.mktemp("dash"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context()
        # Offline: any request that leaves the service fails the test.
        outside: list[str] = []

        def route(r):
            if r.request.url.startswith(server.url):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        tab = context.new_page()
        tab.set_default_timeout(20_000)
        tab.goto(f"{server.url}/#token={TOKEN}")
        tab.wait_for_selector("#status.live")
        tab.server = server
        yield tab
        assert outside == []
        assert "token" not in tab.url  # the token left the address bar
        browser.close()
    stop_server(server)


def _ask(server, command: str) -> tuple[str, str]:
    session = "b-" + uuid.uuid4().hex[:8]
    _, gate = server.call(
        "POST", "/v1/check", {"tool": "Bash", "args": {"command": command}, "session": session}
    )
    return session, gate["approval"]["id"]


def test_approve_a_pending_request(page):
    """A pending request shows up; clicking Approve decides it approved by the dashboard."""
    server = page.server
    _, rid = _ask(server, "rm -rf build")
    card = page.locator(f'.approval[data-id="{rid}"]')
    card.wait_for()
    assert "rm -rf build" in card.inner_text()
    card.locator("button.approve").click()
    card.wait_for(state="detached")
    _, record = server.call("GET", f"/v1/approvals/{rid}")
    assert (record["status"], record["decided_by"]) == ("approved", "dashboard")


def test_deny_with_a_comment(page):
    """Denying with a comment stores the comment, which the agent gets as its hint."""
    server = page.server
    _, rid = _ask(server, "curl https://example.invalid")
    card = page.locator(f'.approval[data-id="{rid}"]')
    card.locator("input.comment").fill("use the local mirror")
    card.locator("button.deny").click()
    card.wait_for(state="detached")
    _, record = server.call("GET", f"/v1/approvals/{rid}")
    assert (record["status"], record["comment"]) == ("denied", "use the local mirror")
    assert record["verdict"]["hint"] == "A person says: use the local mirror"


def test_watch_a_verdict_appear_live(page):
    """A loop stop posted to the API appears in the live list with its fingerprint."""
    server = page.server
    session = "live-" + uuid.uuid4().hex[:8]
    step = {"session": session, "tool": "Grep", "args": {"pattern": "needle"}, "output": "none"}
    _, body = server.call("POST", "/v1/steps", [step, step])
    fingerprint = body["verdicts"][1]["fingerprint"]
    item = page.locator(f'li.verdict[data-session="{session}"][data-action="stop"]')
    item.wait_for()
    assert item.locator("code.fingerprint").inner_text().strip() == fingerprint


def test_stop_a_session_and_send_feedback(page):
    """Feedback typed for a session reaches its next step; Stop stops the one after."""
    server = page.server
    session = "stop-" + uuid.uuid4().hex[:8]
    server.call(
        "POST",
        "/v1/steps",
        {"session": session, "tool": "Read", "args": {"file_path": "a"}, "output": "x"},
    )
    row = page.locator(f'tr[data-session="{session}"]')
    row.wait_for()
    row.locator("input.feedback").fill("try the tests first")
    row.locator("button.send").click()
    page.wait_for_function(
        "el => el.value === ''", arg=row.locator("input.feedback").element_handle()
    )
    _, hinted = server.call(
        "POST",
        "/v1/steps",
        {"session": session, "tool": "Read", "args": {"file_path": "b"}, "output": "y"},
    )
    assert hinted["hint"] == "A person says: try the tests first"
    row.locator("button.stop").click()
    row.locator("td.state", has_text="stopping").wait_for()
    _, stopped = server.call(
        "POST",
        "/v1/steps",
        {"session": session, "tool": "Read", "args": {"file_path": "c"}, "output": "z"},
    )
    assert (stopped["action"], stopped["reason"]) == ("stop", "Stopped by dashboard.")
