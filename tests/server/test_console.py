"""The operator's console in a real browser (Playwright driving Debian's chromium) and its API.

One ``antiloop serve`` process with sessions of every kind (``console_world``): the sessions
page (search, filters, counts, pages past 200), a session's steps and its loop side by side,
people named (a named token, a trusted proxy's header), Edit, Stop with a reason and a
confirmation, the tab title and notifications, the fleet page, ``/metrics``, ``/docs`` offline,
and a badge that tells the truth when the server goes away and comes back. Screenshots at 360,
768 and 1280 px go under the test's tmp dir and to ``$ANTILOOP_ARTIFACTS`` (by default
``.cache/screenshots``, which git ignores).
"""

# ruff: noqa: S310  (plain HTTP to the loopback service)

from __future__ import annotations

import json
import re
import signal
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tests.server.conftest import TOKEN, Server, start_server, stop_server
from tests.server.console_world import NAMED, seed
from tests.server.test_dashboard import ARGS, CHROMIUM, _fits, _need, _shoot

pytestmark = pytest.mark.slow

WIDTHS = (360, 768, 1280)
FILLER = 230  # with the sessions of every kind: past the old 200-session limit
NAMED_ENV = {"ANTILOOP_TOKENS": f"alice={NAMED}"}


def _browser() -> Any:
    if not CHROMIUM.exists():
        _need(f"{CHROMIUM} is missing: apt-get install chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package is missing: pip install -e '.[dev]'")
    return sync_playwright


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The service with its sessions, and a way to open a tab on it (offline: no CDN)."""
    sync_playwright = _browser()
    server = start_server(tmp_path_factory.mktemp("console"), env=NAMED_ENV)
    made = seed(server, server.store, filler=FILLER)
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)

        def open_tab(
            width: int = 1280, path: str = "#/", token: str = NAMED, **options: Any
        ) -> Any:
            context = browser.new_context(viewport={"width": width, "height": 900}, **options)

            def route(r: Any) -> None:
                if r.request.url.startswith(server.url):
                    r.continue_()
                else:
                    outside.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            tab = context.new_page()
            tab.set_default_timeout(20_000)
            errors: list[str] = []
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            tab.errors = errors
            tab.goto(f"{server.url}/#token={token}")
            tab.wait_for_selector("#status.live")
            if path != "#/":
                tab.goto(f"{server.url}/{path}")
            return tab

        yield {"server": server, "open": open_tab, "browser": browser, **made}
        browser.close()
    stop_server(server)
    assert outside == []


def test_sessions_page_filters_counts_and_pages(console: Any) -> None:
    """Every session is listed, 50 a page past 200, with search, filters and counts."""
    _, first = console["server"].call("GET", "/v1/console/sessions?limit=1")
    total = first["counts"]["total"]  # other tests of this module may have added sessions
    assert total >= FILLER + 7
    tab = console["open"](path="#/sessions")
    tab.locator("#f-counts", has_text=f"{total} sessions").wait_for()
    assert tab.locator("#page-info").inner_text() == f"1\u201350 of {total}"
    assert tab.locator("tr.session-row").count() == 50
    for _ in range(4):
        tab.locator("#page-next").click()
    tab.locator("#page-info", has_text=f"201\u2013{total} of {total}").wait_for()
    assert tab.locator("tr.session-row").count() == total - 200
    assert tab.locator("#page-next").is_disabled()

    tab.locator("#f-q").fill(console["loop"])
    row = tab.locator(f'tr.session-row[data-session="{console["loop"]}"]')
    row.wait_for()
    tab.locator("#f-counts", has_text=f"1 of {total} sessions matches").wait_for()
    assert "stopped: loop" in row.inner_text()
    assert "repeat: grep 'needle@src' ran twice" in row.inner_text()
    assert "3,000 tokens · $0.0250" in row.inner_text()

    tab.locator("#f-q").fill("")
    tab.locator("#f-state").select_option("done")
    goal = tab.locator(f'tr.session-row[data-session="{console["goal"]}"]')
    goal.wait_for()
    assert "done: goal reached" in goal.inner_text()  # a success, not a loop
    assert goal.locator(".badge").get_attribute("class") == "badge b-done"
    assert tab.locator("tr.session-row").count() == 1

    tab.locator("#f-state").select_option("waiting")  # only waits for an approval: listed
    tab.locator(f'tr.session-row[data-session="{console["waiting"]}"]').wait_for()
    assert "1 approval request waits" in tab.locator("tr.session-row").inner_text()

    tab.locator("#f-state").select_option("")
    tab.locator("#f-detector").select_option("repeat")
    tab.locator(f'tr.session-row[data-session="{console["library"]}"]').wait_for()
    shown = set(
        tab.locator("tr.session-row").evaluate_all("rows => rows.map(r => r.dataset.session)")
    )
    assert shown == {console["loop"], console["hook"], console["library"]}

    tab.locator("#f-detector").select_option("")
    tab.locator("#f-agent").select_option("ops")
    tab.locator(f'tr.session-row[data-session="{console["person"]}"]').wait_for()
    assert tab.locator("tr.session-row").count() == 2
    assert "#/sessions?" in tab.url
    assert "agent=ops" in tab.url
    tab.reload()
    tab.locator(f'tr.session-row[data-session="{console["waiting"]}"]').wait_for()
    assert tab.locator("#f-agent").input_value() == "ops"
    assert tab.errors == []
    tab.context.close()


def test_end_states_come_from_the_audit_log(console: Any, tmp_path: Path) -> None:
    """Hook, library and API sessions keep their end and reason across a restart."""
    server = console["server"]
    before = _states(server)
    again = start_server(tmp_path, env=NAMED_ENV, store=server.store)
    try:
        after = _states(again)
    finally:
        stop_server(again)
    assert after == before
    assert after[console["loop"]][:2] == ("stopped", "repeat")
    assert after[console["goal"]][:2] == ("done", "goal")
    assert after[console["library"]][:2] == ("stopped", "repeat")  # written by the library
    assert after[console["person"]] == ("stopped", "person", "Stopped by alice.")
    assert after[console["waiting"]] == ("waiting", None, None)
    assert after[console["hook"]][0] == "running"  # a hook blocks the call; the agent goes on
    _, hook = server.call("GET", f"/v1/console/sessions/{console['hook']}")
    assert hook["summary"]["last"]["action"] == "block"
    assert hook["summary"]["last"]["detector"] == "repeat"


def _states(server: Server) -> dict[str, tuple[str, str | None, str | None]]:
    found: dict[str, tuple[str, str | None, str | None]] = {}
    cursor = "0"
    while cursor is not None:
        status, page = server.call("GET", f"/v1/console/sessions?limit=500&cursor={cursor}")
        assert status == 200, page
        for row in page["sessions"]:
            end = row["end"] or {}
            found[row["session"]] = (row["state"], end.get("detector"), end.get("reason"))
        cursor = page["next_cursor"]
    return found


def test_session_page_shows_steps_usage_and_the_loop(console: Any) -> None:
    """Each step with its arguments and output; the matched steps side by side, and why."""
    tab = console["open"](path=f"#/session/{console['loop']}")
    loop = tab.locator("#s-loop-panel")
    loop.wait_for()
    assert loop.locator(".matched-step").count() == 2
    assert loop.locator("code.operation").inner_text() == "grep"
    assert loop.locator("code.context").inner_text() == "needle@src"
    assert loop.locator("code.result").inner_text() == "1 match"
    digest = console["fingerprint"].rsplit("#", 1)[1]
    assert f"output digest {digest}" in loop.locator("dl.why-same").inner_text()
    assert loop.locator(".same").count() == 2  # the same arguments, the same output
    assert loop.locator("code.fingerprint").inner_text() == console["fingerprint"]
    assert '{"pattern":"needle","path":"src"}' in loop.locator(".matched-step").first.inner_text()
    summary = tab.locator("#s-summary").inner_text()
    assert "3,000 (2,400 in, 600 out)" in summary
    assert "$0.0250" in summary
    assert tab.locator("#s-status").inner_text() == "stopped: loop"
    steps = tab.locator("#s-timeline li.step")
    assert steps.count() == 3
    assert steps.first.locator(".reason").inner_text().startswith("Why: grep 'needle@src'")
    assert steps.locator(".output pre").first.inner_text() == "no match"

    tab.goto(f"{console['server'].url}/#/session/{console['long']}")
    folded = tab.locator("#s-timeline .output.folded")
    folded.wait_for()
    assert "the audit log keeps the first 4,096 characters of 12,899 bytes" in folded.inner_text()
    assert folded.locator("pre.full").is_hidden()
    folded.locator("summary").click()
    assert folded.locator("pre.full").is_visible()
    assert folded.locator("pre.preview").is_hidden()
    assert "00090 a line" in folded.locator("pre.full").inner_text()
    assert "make: *** [all] Error 2" in tab.locator("#s-timeline .error").inner_text()
    assert "exit code 2" in tab.locator("#s-timeline").inner_text()
    assert tab.errors == []
    tab.context.close()


def test_people_are_named_edit_stop_title_and_notifications(console: Any) -> None:
    """Alice's token names her in the audit; Edit approves changed arguments; Stop asks why."""
    server = console["server"]
    notices = (
        "window.__notes = []; window.Notification = class { static permission = 'default';"
        " static async requestPermission() { this.permission = 'granted'; return 'granted'; }"
        " constructor(title, o) { window.__notes.push(title + ' | ' + o.body); } };"
    )
    tab = console["open"]()
    tab.context.add_init_script(notices)
    tab.reload()
    tab.wait_for_selector("#status.live")
    assert tab.locator("#who").inner_text() == "signed in as alice"
    tab.wait_for_function("() => document.title.startsWith('(')")
    pending = int(re.match(r"\((\d+)\) antiloop$", tab.title())[1])
    assert pending >= 1
    tab.locator("#notify").click()
    tab.locator("#notify", has_text="Notifications on").wait_for()

    session = "edit-" + uuid.uuid4().hex[:6]
    _, gate = server.call(
        "POST",
        "/v1/check",
        {"tool": "Bash", "session": session, "args": {"command": "rm -rf build"}},
    )
    rid = gate["approval"]["id"]
    tab.wait_for_function(f"() => document.title === '({pending + 1}) antiloop'")
    tab.wait_for_function("() => window.__notes.length === 1")
    assert "Bash waits for approval" in tab.evaluate("window.__notes[0]")

    card = tab.locator(f'.approval[data-id="{rid}"]')
    card.locator("button.edit-open").click()
    box = card.locator("textarea.edit-args")
    assert json.loads(box.input_value()) == {"command": "rm -rf build"}
    box.fill("{not json")
    card.locator("button.approve-edited").click()
    card.locator(".edit-error", has_text="Not JSON").wait_for()
    box.fill('{"command": "rm -rf build/tmp"}')
    card.locator("input.comment").fill("only the tmp part")
    card.locator("button.approve-edited").click()
    card.wait_for(state="detached")
    _, decided = server.call("GET", f"/v1/approvals/{rid}")
    assert (decided["status"], decided["decided_by"]) == ("edited", "alice")
    assert decided["edited_args"] == {"command": "rm -rf build/tmp"}
    tab.wait_for_function(f"() => document.title === '({pending}) antiloop'")

    victim = "halt-" + uuid.uuid4().hex[:6]
    server.call(
        "POST", "/v1/steps", {"session": victim, "tool": "Read", "args": {"p": 1}, "output": "1"}
    )
    row = tab.locator(f'li.session[data-session="{victim}"]')
    row.locator("button.stop").click()
    dialog = tab.locator("#stop-dialog")
    assert dialog.is_visible()
    assert victim in dialog.inner_text()
    tab.locator("#stop-cancel").click()
    assert dialog.is_hidden()
    assert server.call("GET", f"/v1/sessions/{victim}")[1]["stop_requested"] is None
    row.locator("button.stop").click()
    tab.locator("#stop-reason").fill("it edits the wrong repository")
    tab.locator("#stop-confirm").click()
    row.locator(".state", has_text="stopping (alice)").wait_for()
    assert "it edits the wrong repository" in row.inner_text()
    _, stopped = server.call(
        "POST", "/v1/steps", {"session": victim, "tool": "Read", "args": {"p": 2}, "output": "2"}
    )
    assert stopped["reason"] == "Stopped by alice."
    tab.goto(f"{server.url}/#/session/{victim}")
    person = tab.locator("#s-people li.person")
    person.wait_for()
    assert person.locator(".by").inner_text() == "alice"
    assert "it edits the wrong repository" in person.inner_text()
    _, view = server.call("GET", f"/v1/console/sessions/{victim}")
    assert view["people"][0]["by"] == "alice"
    assert view["summary"]["state"] == "stopped"
    assert tab.errors == []
    tab.context.close()


def test_fleet_page_draws_its_chart_here(console: Any) -> None:
    """Stops per hour as an SVG drawn in the page; the costliest loop with its usage."""
    tab = console["open"](path="#/fleet")
    tab.locator("svg.chart rect.bar").first.wait_for(state="attached")  # 0 stops: 0 px high
    bars = tab.locator("svg.chart rect.bar")
    assert bars.count() == 24
    counts = bars.evaluate_all("bars => bars.map(b => Number(b.dataset.count))")
    assert sum(counts[-2:]) >= 3  # loop, library, person (a goal reached is no stop)
    assert tab.locator(".t-done .n").inner_text() == "1"
    costly = tab.locator("tr.costly").first
    assert costly.locator("code").inner_text() == console["fingerprint"]
    assert "3,000 tokens · $0.0250" in costly.inner_text()
    assert tab.errors == []
    tab.context.close()


def test_metrics_in_prometheus_format(console: Any) -> None:
    """/metrics needs the token and carries steps, verdicts, approvals, faults, latency."""
    from prometheus_client.parser import text_string_to_metric_families

    server = console["server"]
    assert server.call("GET", "/metrics", token=None)[0] == 401
    request = urllib.request.Request(
        server.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = response.read().decode()
    request.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert response.read().decode().endswith("# EOF\n")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("antiloop_steps_total", (("kind", "step"),))] >= FILLER + 10
    stops = (("action", "stop"), ("detector", "repeat"))
    assert samples[("antiloop_verdicts_total", stops)] >= 2
    assert samples[("antiloop_pending_approvals", ())] >= 1
    assert samples[("antiloop_oldest_pending_approval_age_seconds", ())] > 0
    assert ("antiloop_store_errors_total", (("kind", "timeout"),)) in samples
    assert ("antiloop_store_retries_total", ()) in samples
    latency = (("method", "POST"), ("route", "/v1/steps"), ("status", "200"))
    assert samples[("antiloop_http_request_duration_seconds_count", latency)] >= 1


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_fit_each_width(console: Any, width: int, tmp_path: Path) -> None:
    """Sessions, a loop, a long output, the fleet, the stop dialog and /docs at each width."""
    tab = console["open"](width)
    url = console["server"].url
    pages = [
        ("sessions", "#/sessions", "tr.session-row"),
        ("loop", f"#/session/{quote(console['loop'])}", ".matched-step"),
        ("long-output", f"#/session/{quote(console['long'])}", ".output.folded"),
        ("fleet", "#/fleet", "svg.chart text"),
        ("overview", "#/", "li.session"),
    ]
    for name, path, ready in pages:
        tab.goto(f"{url}/{path}")
        tab.locator(ready).first.wait_for()
        _fits(tab, f"{name} at {width}")
        _shoot(tab, f"console-{name}-{width}", tmp_path)
    tab.locator("li.session button.stop").first.click()
    tab.locator("#stop-dialog").wait_for()
    _fits(tab, f"stop dialog at {width}")
    _shoot(tab, f"console-stop-dialog-{width}", tmp_path)
    tab.locator("#stop-cancel").click()
    tab.goto(f"{url}/docs")
    tab.locator("#post-v1-steps").wait_for()  # drawn from /openapi.json with the tab's token
    assert "Needs Authorization: Bearer" in tab.locator("#post-v1-steps").inner_text()
    _fits(tab, f"/docs at {width}")
    _shoot(tab, f"console-docs-{width}", tmp_path)
    assert tab.errors == []
    tab.context.close()


def test_badge_says_disconnected_and_recovers(console: Any, tmp_path: Path) -> None:
    """The server killed: the badge says disconnected; back on its port: live, no error."""
    server = start_server(tmp_path, env=NAMED_ENV)
    again: Server | None = None
    context = console["browser"].new_context(viewport={"width": 768, "height": 900})
    try:
        session = "back-" + uuid.uuid4().hex[:6]
        step = {"session": session, "tool": "Grep", "args": {"pattern": "x"}, "output": "none"}
        server.call("POST", "/v1/steps", [step, step])
        port = int(server.url.rsplit(":", 1)[1])
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        tab.goto(f"{server.url}/#token={NAMED}")
        tab.wait_for_selector("#status.live")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
        tab.locator("#status.down", has_text="disconnected").wait_for()
        tab.locator("#error", has_text="does not answer").wait_for()
        _shoot(tab, "console-disconnected-768", tmp_path)
        again = start_server(tmp_path, env=NAMED_ENV, port=port, store=server.store)
        tab.wait_for_selector("#status.live", timeout=60_000)
        tab.wait_for_function("() => document.querySelector('#error').textContent === ''")
        row = tab.locator(f'li.session[data-session="{session}"]')
        assert "stopped: loop" in row.inner_text()  # from the audit log, after the restart
        _shoot(tab, "console-reconnected-768", tmp_path)
    finally:
        context.close()
        stop_server(server)
        if again is not None:
            stop_server(again)


def test_a_trusted_proxy_names_the_person(console: Any, tmp_path: Path) -> None:
    """With --identity-header, the proxy's header is the person; off by default."""
    plain = start_server(tmp_path)
    try:
        status, _ = plain.call("GET", "/v1/whoami", token=None, headers={"X-Forwarded-User": "eve"})
        assert status == 401  # off by default: the header is no credential
    finally:
        stop_server(plain)
    server = start_server(tmp_path, "--identity-header", "X-Forwarded-User")
    try:
        user = {"X-Forwarded-User": "bob@example.com"}
        status, me = server.call("GET", "/v1/whoami", token=None, headers=user)
        assert (status, me["identity"], me["proxied"]) == (200, "bob@example.com", True)
        assert server.call("GET", "/v1/whoami", token=None)[0] == 401  # no header, no token
        _, gate = server.call(
            "POST",
            "/v1/check",
            {"tool": "Bash", "session": "proxied", "args": {"command": "rm -rf out"}},
        )
        rid = gate["approval"]["id"]
        _, decided = server.call(
            "POST",
            f"/v1/approvals/{rid}",
            {"decision": "deny", "by": "mallory"},
            token=None,
            headers=user,
        )
        assert decided["decided_by"] == "bob@example.com"  # the body's "by" is not believed
        server.call(
            "POST",
            "/v1/sessions/proxied/stop",
            {"reason": "enough", "by": "mallory"},
            token=None,
            headers=user,
        )
        _, view = server.call("GET", "/v1/console/sessions/proxied")
        assert [(p["by"], p["what"]) for p in view["people"]] == [
            ("bob@example.com", "denied"),
            ("bob@example.com", "stop"),
        ]
        # the dashboard behind the proxy (the header added to every request): no token asked
        context = console["browser"].new_context(extra_http_headers=user)
        try:
            tab = context.new_page()
            tab.goto(server.url + "/")
            tab.wait_for_selector("#status.live", timeout=30_000)
            assert tab.locator("#who").inner_text() == "signed in as bob@example.com"
            assert tab.locator("#signin").is_hidden()
        finally:
            context.close()
    finally:
        stop_server(server)


def test_docs_page_holds_no_data_and_no_outside_address(console: Any) -> None:
    """/docs needs no token, fetches nothing from outside, and is served with a strict CSP."""
    request = urllib.request.Request(console["server"].url + "/docs")
    with urllib.request.urlopen(request, timeout=30) as response:
        csp = response.headers["Content-Security-Policy"]
        page = response.read().decode()
    assert "default-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "http://" not in page
    assert "https://" not in page
    assert "/openapi.json" in page
