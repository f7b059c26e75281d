"""The dashboard in a real browser (Playwright driving Debian's chromium).

Needs ``/usr/bin/chromium`` (``apt-get install chromium``) and the ``playwright`` package (the
``dev`` extra; never ``playwright install``). Skipped without them, except under ``CI=true``,
where their absence fails. Screenshots at 360, 768 and 1440 px wide are written under the
test's tmp dir and copied to ``$ANTILOOP_ARTIFACTS``, by default ``.cache/screenshots``.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tests.conftest import missing
from tests.server.conftest import TOKEN, Server, start_server, stop_server

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
IN_CI = os.environ.get("CI", "").lower() == "true"
WIDTHS = (360, 768, 1440)
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".cache" / "screenshots"  # gitignored

# Elements wider than the viewport, and the page's own horizontal overflow.
OVERFLOW = """() => {
  const wide = [];
  for (const node of document.querySelectorAll("body *")) {
    const box = node.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > innerWidth + 1 || box.left < -1) {
      const where = Math.round(box.left) + ".." + Math.round(box.right);
      wide.push(node.tagName + "." + node.className + " " + where);
    }
  }
  return {scroll: document.scrollingElement.scrollWidth, inner: innerWidth, wide: wide.slice(0, 5)};
}"""


def _need(reason: str) -> None:
    missing(reason)


def _ask(server: Server, command: str, session: str | None = None) -> tuple[str, str]:
    session = session or "b-" + uuid.uuid4().hex[:8]
    _, gate = server.call(
        "POST", "/v1/check", {"tool": "Bash", "args": {"command": command}, "session": session}
    )
    return session, gate["approval"]["id"]


def _step(session: str, path: str, output: str = "x") -> dict[str, Any]:
    return {"session": session, "tool": "Read", "args": {"file_path": path}, "output": output}


def _replayed(db: Path, session: str) -> None:
    """A step answered during a store outage, recorded from the journal (``antiloop.outage``)."""
    import time

    from antiloop import Guard

    guard = Guard(store=f"sqlite:///{db}")
    answered = {"action": "continue", "reason": "unguarded: the store failed (a test)"}
    entry = {"id": "j-1", "at": time.time(), "step": _step(session, "j"), "answered": answered}
    guard._put_journaled(entry)
    guard.store.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A service with a stopped loop, a pending and a decided approval; a browser on it."""
    if not CHROMIUM.exists():
        _need(f"{CHROMIUM} is missing: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package is missing: pip install -e '.[dev]'")
    where = tmp_path_factory.mktemp("dash")
    server = start_server(where)
    looped = "loop-" + uuid.uuid4().hex[:6]
    grep = {"session": looped, "tool": "Grep", "args": {"pattern": "needle"}, "output": "none"}
    _, judged = server.call("POST", "/v1/steps", [_step(looped, "a"), grep, grep])
    waiting, pending = _ask(server, "rm -rf build")
    _, decided = _ask(server, "git push --force")
    server.call("POST", f"/v1/approvals/{decided}", {"decision": "deny", "comment": "not today"})
    unguarded = "outage-" + uuid.uuid4().hex[:6]
    _replayed(next(where.glob("antiloop-*.db")), unguarded)  # the store exists by now
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)

        def open_page(width: int = 1280, signed_in: bool = True) -> Any:
            context = browser.new_context(viewport={"width": width, "height": 900})

            def route(r: Any) -> None:  # offline: a request that leaves the service fails
                if r.request.url.startswith(server.url):
                    r.continue_()
                else:
                    outside.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            tab = context.new_page()
            tab.set_default_timeout(15_000)
            errors: list[str] = []
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.errors = errors
            tab.goto(f"{server.url}/#token={TOKEN}" if signed_in else server.url)
            if signed_in:
                tab.wait_for_selector("#status.live")
            return tab

        yield {
            "server": server,
            "open": open_page,
            "looped": looped,
            "fingerprint": judged["verdicts"][2]["fingerprint"],
            "waiting": waiting,
            "pending": pending,
            "decided": decided,
            "unguarded": unguarded,
        }
        browser.close()
    stop_server(server)
    assert outside == []


@pytest.fixture(scope="module")
def shared_page(world: Any) -> Any:
    """The signed-in tab shared by the interaction tests."""
    tab = world["open"]()
    yield tab
    assert "token" not in tab.url  # the token left the address bar
    assert tab.errors == []
    tab.context.close()


@pytest.fixture
def page(shared_page: Any) -> Any:
    """The shared tab on the overview, whatever view the test before left it on (any order)."""
    shared_page.goto(shared_page.url.split("#")[0] + "#/")
    shared_page.wait_for_selector("#approvals")
    return shared_page


def _shoot(tab: Any, name: str, tmp_path: Path) -> Path:
    shot = tmp_path / f"{name}.png"
    tab.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 5_000
    keep = Path(os.environ.get("ANTILOOP_ARTIFACTS") or SCREENSHOTS)
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / shot.name)
    return shot


def _fits(tab: Any, where: str) -> None:
    found = tab.evaluate(OVERFLOW)
    assert found["scroll"] <= found["inner"], f"{where}: the page scrolls sideways: {found}"
    assert found["wide"] == [], f"{where}: wider than the viewport: {found['wide']}"


def test_sign_in_page(world: Any) -> None:
    """Signed out, the page asks for the token (no empty panels); a wrong one is refused."""
    tab = world["open"](signed_in=False)
    signin = tab.locator("#signin")
    assert signin.is_visible()
    assert "ANTILOOP_TOKEN" in signin.inner_text()
    assert tab.locator("#overview").is_hidden()
    assert tab.locator("#nav").is_hidden()
    assert tab.locator("#signout").is_hidden()
    assert "Nothing waits" not in tab.locator("body").inner_text()
    assert tab.evaluate("document.activeElement.id") == "token"
    tab.keyboard.type("not-the-token")
    tab.keyboard.press("Enter")
    tab.locator("#signin-error", has_text="refused").wait_for()
    assert tab.locator("#overview").is_hidden()
    tab.locator("#token").fill(TOKEN)
    tab.keyboard.press("Enter")
    tab.wait_for_selector("#status.live")
    assert tab.locator("#signin").is_hidden()
    assert tab.locator("#overview").is_visible()
    assert tab.evaluate("document.activeElement.id") == "content"
    tab.context.close()


def test_pending_approval_counts_down(page: Any, world: Any) -> None:
    """A pending request shows the time left before it expires, ticking down."""
    card = page.locator(f'.approval[data-id="{world["pending"]}"]')
    timer = card.locator(".countdown")
    timer.wait_for()
    first = timer.inner_text()
    assert re.fullmatch(r"expires in \d+ min \d+ s", first), first
    page.wait_for_function(
        "([el, was]) => el.textContent !== was", arg=[timer.element_handle(), first]
    )


def test_decided_approvals_have_a_history(page: Any, world: Any) -> None:
    """A decided request is kept: who decided, when, how long it waited, the comment."""
    recent = page.locator(f'#recent-decisions li[data-id="{world["decided"]}"]')
    recent.wait_for()
    assert "denied" in recent.inner_text()
    assert "by dashboard" in recent.inner_text()
    page.locator("#nav a", has_text="History").click()
    row = page.locator(f'#history-table tr[data-id="{world["decided"]}"]')
    row.wait_for()
    assert row.locator("td.by").inner_text() == "dashboard"
    assert re.fullmatch(r"\d+ s", row.locator("td.waited").inner_text())
    assert "not today" in row.inner_text()
    page.go_back()
    page.locator("#overview").wait_for()


def test_session_page_of_a_stopped_loop(page: Any, world: Any) -> None:
    """The session page shows the timeline, the fingerprint, reason and hint, the audit; no Stop."""
    looped = world["looped"]
    # the overview lists the 8 most recent sessions: in random order other tests push it out
    page.goto(page.url.split("#")[0] + "#/session/" + looped)
    page.locator("#s-title", has_text=looped).wait_for()
    page.locator("#s-timeline li.step").first.wait_for()
    actions = page.locator("#s-timeline li.step").evaluate_all(
        "nodes => nodes.map(n => n.dataset.action)"
    )
    assert actions == ["stop", "continue", "continue"]  # newest first
    assert page.locator("#s-status").inner_text() == "stopped: loop"  # as the audit log says
    latest = page.locator("#s-latest")
    assert latest.locator("code.fingerprint").inner_text() == world["fingerprint"]
    assert latest.locator(".reason").inner_text() not in ("", "—")
    assert latest.locator(".hint").inner_text() not in ("", "—")
    assert page.locator("#s-audit tr.record").count() >= 3
    assert page.locator("#session button.stop").count() == 0
    assert page.locator("#session input.feedback").count() == 0
    assert "stopped" in page.locator("#s-controls").inner_text()
    page.goto(page.url.split("#")[0] + "#/")
    page.locator("#overview").wait_for()
    row = page.locator(f'li.session[data-session="{looped}"]')
    assert row.locator("button.stop").count() == 0  # no Stop offered on the overview either


def test_keyboard_approves(page: Any, world: Any) -> None:
    """Tab from the comment box reaches Approve, which shows focus; Enter decides."""
    server = world["server"]
    _, rid = _ask(server, "rm -rf dist")
    card = page.locator(f'.approval[data-id="{rid}"]')
    card.locator("input.comment").focus()
    page.keyboard.type("ok, go")
    page.keyboard.press("Tab")
    focused = page.evaluate(
        "() => [document.activeElement.className, getComputedStyle(document.activeElement)"
        ".outlineStyle, document.activeElement.getAttribute('aria-label')]"
    )
    assert focused[0] == "approve", focused
    assert focused[1] != "none", focused  # the focus is visible
    assert focused[2].startswith("Approve Bash"), focused
    page.keyboard.press("Enter")
    card.wait_for(state="detached")
    _, record = server.call("GET", f"/v1/approvals/{rid}")
    assert (record["status"], record["comment"]) == ("approved", "ok, go")


def test_deny_with_a_comment(page: Any, world: Any) -> None:
    """Denying with a comment stores the comment, which the agent gets as its hint."""
    server = world["server"]
    _, rid = _ask(server, "curl https://example.invalid")
    card = page.locator(f'.approval[data-id="{rid}"]')
    card.locator("input.comment").fill("use the local mirror")
    card.locator("button.deny").click()
    card.wait_for(state="detached")
    _, record = server.call("GET", f"/v1/approvals/{rid}")
    assert (record["status"], record["comment"]) == ("denied", "use the local mirror")
    assert record["verdict"]["hint"] == "A person says: use the local mirror"


def test_feedback_then_stop_and_controls_go(page: Any, world: Any) -> None:
    """Feedback (sent with Enter) reaches the next step; after Stop the controls are gone."""
    server = world["server"]
    session = "stop-" + uuid.uuid4().hex[:8]
    server.call("POST", "/v1/steps", _step(session, "a"))
    row = page.locator(f'li.session[data-session="{session}"]')
    row.locator("input.feedback").fill("try the tests first")
    row.locator("input.feedback").press("Enter")
    page.wait_for_function(
        "el => el.value === ''", arg=row.locator("input.feedback").element_handle()
    )
    _, hinted = server.call("POST", "/v1/steps", _step(session, "b"))
    assert hinted["hint"] == "A person says: try the tests first"
    row.locator("button.stop").click()  # Stop asks for a reason and a confirmation
    page.locator("#stop-confirm").click()
    row.locator(".state", has_text="stopping").wait_for()
    assert row.locator("button.stop").count() == 0
    _, stopped = server.call("POST", "/v1/steps", _step(session, "c"))
    assert (stopped["action"], stopped["reason"]) == ("stop", "Stopped by dashboard.")


def test_live_verdict_appears(page: Any, world: Any) -> None:
    """A loop stop posted to the API appears in the live list with its fingerprint."""
    session = "live-" + uuid.uuid4().hex[:8]
    step = {"session": session, "tool": "Grep", "args": {"pattern": "hay"}, "output": "none"}
    _, body = world["server"].call("POST", "/v1/steps", [step, step])
    item = page.locator(f'li.verdict[data-session="{session}"][data-action="stop"]')
    item.wait_for()
    assert item.locator("code.fingerprint").inner_text() == body["verdicts"][1]["fingerprint"]


@pytest.mark.parametrize("width", WIDTHS)
def test_three_widths_fit(world: Any, width: int, tmp_path: Path) -> None:
    """Sign-in, overview and session page at 360, 768 and 1440 px: nothing overflows sideways."""
    tab = world["open"](width, signed_in=False)
    tab.locator("#signin").wait_for()
    _fits(tab, f"sign-in at {width}")
    _shoot(tab, f"dashboard-signin-{width}", tmp_path)
    tab.locator("#token").fill(TOKEN)
    tab.keyboard.press("Enter")
    tab.wait_for_selector("#status.live")
    tab.locator(
        f'.approval[data-id="{world["pending"]}"] .countdown:has-text("expires")'
    ).wait_for()
    tab.locator("#recent-decisions li.decided").first.wait_for()
    _fits(tab, f"overview at {width}")
    comment = tab.locator(f'.approval[data-id="{world["pending"]}"] input.comment')
    assert comment.bounding_box()["width"] >= 150  # the comment box does not collapse
    _shoot(tab, f"dashboard-overview-{width}", tmp_path)
    tab.goto(f"{world['server'].url}/#/session/{world['looped']}")
    tab.locator("#s-audit tr.record").first.wait_for()
    _fits(tab, f"session page at {width}")
    _shoot(tab, f"dashboard-session-{width}", tmp_path)
    tab.goto(f"{world['server'].url}/#/session/{world['waiting']}")
    tab.locator("#s-approvals .countdown:has-text('expires')").wait_for()
    assert tab.locator("#s-controls button.stop").is_visible()  # it runs: Stop is offered
    _fits(tab, f"page of a waiting session at {width}")
    _shoot(tab, f"dashboard-waiting-{width}", tmp_path)
    tab.goto(f"{world['server'].url}/#/history")
    tab.locator("#history-table tr.decided").first.wait_for()
    _fits(tab, f"history at {width}")
    _shoot(tab, f"dashboard-history-{width}", tmp_path)
    assert tab.errors == []
    tab.context.close()


def test_agent_text_is_never_html(page: Any, world: Any) -> None:
    """Markup in a session id, a tool name and arguments is shown as text, never run."""
    evil = '<img src=x onerror="window.pwned=1">'
    session = "x-" + uuid.uuid4().hex[:6] + evil
    step = {"session": session, "tool": "Grep" + evil, "args": {"pattern": evil}, "output": "0"}
    world["server"].call("POST", "/v1/steps", [step, step])
    item = page.locator("li.verdict", has_text="x-").filter(has_text=evil).first
    item.wait_for()
    page.goto(page.url.split("#")[0] + "#/session/" + quote(session, safe=""))
    page.locator("#s-timeline li.step").first.wait_for()
    assert evil in page.locator("#s-title").inner_text()
    assert evil in page.locator("#s-timeline").inner_text()
    assert page.locator("img").count() == 0
    assert page.evaluate("window.pwned") is None
    page.goto(page.url.split("#")[0] + "#/")


def test_tab_starts_with_the_skip_link(page: Any, world: Any) -> None:
    """The first Tab shows the skip link; Enter on it moves the focus to the content."""
    page.goto(page.url.split("#")[0] + "#/session/" + world["looped"])
    page.reload()  # a fresh load: the focus starts at the top
    page.locator("#s-audit tr.record").first.wait_for()
    page.keyboard.press("Tab")
    skip = page.locator("a.skip")
    assert page.evaluate("document.activeElement.className") == "skip"
    assert skip.bounding_box()["width"] > 50  # shown while focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"
    assert page.locator("#session").is_visible()  # still the session's page
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.tagName") in {"A", "BUTTON", "INPUT", "UL"}


def test_a_step_recorded_after_an_outage_is_marked_unguarded(page: Any, world: Any) -> None:
    """The audit table marks a record the journal put in after an outage."""
    page.goto(f"{world['server'].url}/#/session/{world['unguarded']}")
    record = page.locator("#s-audit tr.record").first
    record.wait_for()
    assert record.locator(".unguarded").inner_text().strip() == "unguarded"
    page.goto(f"{world['server'].url}/#/session/{world['looped']}")
    page.locator("#s-audit tr.record").first.wait_for()
    assert page.locator("#s-audit .unguarded").count() == 0
