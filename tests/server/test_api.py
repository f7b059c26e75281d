"""The HTTP API against a real ``antiloop serve`` process."""

# ruff: noqa: S106, S310  (a fixed test token; plain HTTP to the loopback service)

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import uuid

import pytest
from tests.server.conftest import TOKEN

pytestmark = pytest.mark.slow


def sid() -> str:
    return "s-" + uuid.uuid4().hex[:8]


def grep(session: str, output: str = "a.py:1: x") -> dict:
    return {"session": session, "tool": "Grep", "args": {"pattern": "x"}, "output": output}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/steps"),
        ("POST", "/v1/check"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/x"),
        ("POST", "/v1/sessions/x/stop"),
        ("POST", "/v1/sessions/x/feedback"),
        ("GET", "/v1/approvals?status=pending"),
        ("GET", "/v1/approvals/x"),
        ("POST", "/v1/approvals/x"),
        ("GET", "/v1/events"),
        ("GET", "/openapi.json"),
    ],
)
def test_requests_without_the_token_get_401(server, method, path):
    """Every API call without the token, or with a wrong one, is refused with 401."""
    body = {} if method == "POST" else None
    assert server.call(method, path, body, token=None)[0] == 401
    assert server.call(method, path, body, token="wrong")[0] == 401


def test_dashboard_page_is_served_without_data(server):
    """The page at / loads without the token and has no third-party resources."""
    status, _ = server.call("GET", "/healthz", token=None)
    assert status == 200
    import urllib.request

    with urllib.request.urlopen(server.url + "/") as response:
        page = response.read().decode()
        csp = response.headers["Content-Security-Policy"]
    assert "antiloop" in page
    assert "http://" not in page
    assert "https://" not in page
    assert "frame-ancestors 'none'" in csp


def test_one_step_gets_one_verdict(server):
    """A single step answers a single section 7 verdict with the hint."""
    status, verdict = server.call("POST", "/v1/steps", grep(sid()))
    assert status == 200
    assert verdict["action"] == "continue"
    assert set(verdict) >= {
        "index",
        "action",
        "detector",
        "outcome",
        "fingerprint",
        "reason",
        "hint",
    }


def test_a_batch_gets_a_verdict_per_step(server):
    """A batch answers one verdict per step, in order; a repeat stops, a bad step is invalid."""
    s = sid()
    status, body = server.call("POST", "/v1/steps", {"steps": [grep(s), grep(s), {"args": {}}]})
    assert status == 200
    actions = [v["action"] for v in body["verdicts"]]
    assert actions == ["continue", "stop", "invalid"]
    assert body["verdicts"][1]["fingerprint"].startswith("AGENT::agent::grep::")
    assert [v["index"] for v in body["verdicts"]] == [0, 1, 2]


def test_bad_json_is_400(server):
    """A body that is not JSON is a 400 with a message."""
    status, body = server.call("POST", "/v1/steps", raw=b"{nope")
    assert status == 400
    assert "JSON" in body["error"]


def test_sessions_list_and_detail(server):
    """Sessions are listed with their steps, and one session shows its recent verdicts."""
    s = sid()
    server.call("POST", "/v1/steps", [grep(s), grep(s, "other")])
    status, body = server.call("GET", "/v1/sessions")
    assert status == 200
    rows = {r["session"]: r for r in body["sessions"]}
    assert rows[s]["steps"] == 2
    status, detail = server.call("GET", f"/v1/sessions/{s}")
    assert status == 200
    assert len(detail["recent"]) == 2
    assert server.call("GET", "/v1/sessions/nobody-here")[0] == 404


def test_stop_stops_the_next_step(server):
    """After POST stop, the session's next step is answered with a stop by a person."""
    s = sid()
    server.call("POST", "/v1/steps", grep(s))
    status, body = server.call("POST", f"/v1/sessions/{s}/stop", {"by": "alice"})
    assert (status, body["stop_requested"]) == (200, "alice")
    _, verdict = server.call("POST", "/v1/steps", grep(s, "new"))
    assert (verdict["action"], verdict["detector"]) == ("stop", "person")
    assert verdict["reason"] == "Stopped by alice."


def test_antiloop_stop_command_stops_a_remote_run(server):
    """`antiloop stop SESSION --server URL` stops the session through the API."""
    s = sid()
    done = subprocess.run(
        [sys.executable, "-m", "antiloop", "stop", s, "--server", server.url, "--token", TOKEN],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    _, verdict = server.call("POST", "/v1/steps", grep(s))
    assert verdict["detector"] == "person"


def test_feedback_reaches_the_next_verdict_as_hint(server):
    """Queued feedback comes back once, as the hint of the session's next verdict."""
    s = sid()
    assert server.call("POST", f"/v1/sessions/{s}/feedback", {"text": "look in lib/"})[0] == 200
    _, first = server.call("POST", "/v1/steps", grep(s))
    assert first["hint"] == "A person says: look in lib/"
    _, second = server.call("POST", "/v1/steps", grep(s, "changed"))
    assert second["hint"] == ""
    assert server.call("POST", f"/v1/sessions/{s}/feedback", {"text": " "})[0] == 400


def test_risky_call_waits_for_approval_then_goes_on(server):
    """A risky call asks; the request is listed as pending; an approval lets it go on."""
    s = sid()
    status, gate = server.call(
        "POST", "/v1/check", {"tool": "Bash", "args": {"command": "rm -rf build"}, "session": s}
    )
    assert (status, gate["action"]) == (200, "ask")
    rid = gate["approval"]["id"]
    _, pending = server.call("GET", f"/v1/approvals?status=pending&session={s}")
    assert [r["id"] for r in pending["approvals"]] == [rid]
    status, decided = server.call(
        "POST", f"/v1/approvals/{rid}", {"decision": "approve", "by": "bob"}
    )
    # The voter is the token's holder; the "by" in the body is not believed.
    assert (status, decided["status"], decided["decided_by"]) == (200, "approved", "dashboard")
    assert (decided["channel"], decided["rule"]) == ("web", "tier:delete")
    _, again = server.call("GET", f"/v1/approvals/{rid}")
    assert again["verdict"]["action"] == "continue"
    _, later = server.call("POST", f"/v1/approvals/{rid}", {"decision": "deny"})
    assert later["status"] == "approved"


def test_denied_call_carries_the_comment(server):
    """A deny with a comment ends the request denied and the comment is the hint."""
    s = sid()
    _, gate = server.call(
        "POST", "/v1/check", {"tool": "WebFetch", "args": {"url": "https://x"}, "session": s}
    )
    rid = gate["approval"]["id"]
    _, decided = server.call(
        "POST", f"/v1/approvals/{rid}", {"decision": "deny", "comment": "use the cache"}
    )
    assert (decided["status"], decided["comment"]) == ("denied", "use the cache")
    _, again = server.call("GET", f"/v1/approvals/{rid}")
    assert again["verdict"]["action"] == "stop"
    assert again["verdict"]["hint"] == "A person says: use the cache"
    assert server.call("POST", f"/v1/approvals/{rid}", {"decision": "maybe"})[0] == 400
    assert server.call("POST", "/v1/approvals/none", {"decision": "approve"})[0] == 404


def test_read_only_call_is_allowed_without_asking(server):
    """A read-only call passes /v1/check without an approval request."""
    _, gate = server.call(
        "POST", "/v1/check", {"tool": "Read", "args": {"file_path": "a"}, "session": sid()}
    )
    assert (gate["action"], gate["approval"]) == ("continue", None)


def test_cross_origin_post_is_refused(server):
    """A POST whose Origin is another site is refused (belt and braces against CSRF)."""
    status, _ = server.call(
        "POST", "/v1/steps", grep(sid()), headers={"Origin": "https://evil.example"}
    )
    assert status == 403


def test_openapi_schema(server):
    """The schema lists every endpoint and the bearer scheme."""
    status, doc = server.call("GET", "/openapi.json")
    assert status == 200
    assert doc["openapi"].startswith("3.1")
    for path in ("/v1/steps", "/v1/sessions/{id}/stop", "/v1/approvals/{id}", "/v1/events"):
        assert path in doc["paths"]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_live_events_stream_verdicts(server):
    """A verdict posted after subscribing arrives on the SSE stream."""
    s = sid()
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {TOKEN}"})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type").startswith("text/event-stream")
    assert response.readline().startswith(b": antiloop")  # subscribed
    server.call("POST", "/v1/steps", grep(s))
    event = None
    while True:
        line = response.readline().decode().strip()
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and event == "verdict":
            data = json.loads(line[5:])
            if data["session"] == s:
                break
    assert data["action"] == "continue"
    assert data["tool"] == "Grep"
    conn.close()
