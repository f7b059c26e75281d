"""The dashboard's views on a real ``antiloop serve``: /v1/timeline/{id} and /v1/decisions."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.server.conftest import Server


def _sid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _read(session: str, path: str) -> dict[str, Any]:
    return {"session": session, "tool": "Read", "args": {"file_path": path}, "output": "x"}


def _ask(server: Server, session: str, command: str) -> str:
    _, gate = server.call(
        "POST", "/v1/check", {"tool": "Bash", "args": {"command": command}, "session": session}
    )
    return str(gate["approval"]["id"])


def test_views_need_the_token(server: Server) -> None:
    """Both views answer 401 without the token."""
    for path in ("/v1/timeline/x", "/v1/decisions"):
        status, body = server.call("GET", path, token=None)
        assert (status, body) == (401, {"error": "missing or wrong token"})


def test_unknown_session_is_404(server: Server) -> None:
    """A session nobody has seen is a 404 with a one-line error."""
    status, body = server.call("GET", "/v1/timeline/" + _sid("nobody"))
    assert (status, body) == (404, {"error": "no such session"})


def test_timeline_of_a_stopped_loop(server: Server) -> None:
    """A loop stop: stopped, no controls, the latest verdict with its hint, steps and audit."""
    sid = _sid("loop")
    grep = {"session": sid, "tool": "Grep", "args": {"pattern": "needle"}, "output": "none"}
    _, judged = server.call("POST", "/v1/steps", [_read(sid, "a"), grep, grep])
    stop = judged["verdicts"][2]
    status, page = server.call("GET", f"/v1/timeline/{sid}")
    assert status == 200
    assert (page["status"], page["controls"]) == ("stopped", {"stop": False, "feedback": False})
    assert page["steps"] == 3
    latest = page["latest"]
    assert (latest["action"], latest["fingerprint"], latest["hint"]) == (
        "stop",
        stop["fingerprint"],
        stop["hint"],
    )
    assert [(t["index"], t["tool"], t["action"]) for t in page["timeline"]] == [
        (0, "Read", "continue"),
        (1, "Grep", "continue"),
        (2, "Grep", "stop"),
    ]
    assert [r["seq"] for r in page["audit"]] == sorted(r["seq"] for r in page["audit"])
    assert all(r["hash"] for r in page["audit"])
    assert page["audited"] is True


def test_controls_follow_the_state(server: Server) -> None:
    """A running session offers Stop and feedback; once a stop is requested, neither."""
    sid = _sid("run")
    server.call("POST", "/v1/steps", _read(sid, "a"))
    _, page = server.call("GET", f"/v1/timeline/{sid}")
    assert (page["status"], page["controls"]) == ("running", {"stop": True, "feedback": True})
    assert page["latest"] is None
    server.call("POST", f"/v1/sessions/{sid}/stop", {"by": "ops"})
    _, page = server.call("GET", f"/v1/timeline/{sid}")
    assert (page["status"], page["stop_requested"]) == ("stopping", "ops")
    assert page["controls"] == {"stop": False, "feedback": False}


def test_decisions_newest_first_with_who_when_and_wait(server: Server) -> None:
    """Decided requests (not pending ones), newest first, with how long each waited."""
    sid = _sid("dec")
    first = _ask(server, sid, "rm -rf a")
    second = _ask(server, sid, "rm -rf b")
    waiting = _ask(server, sid, "rm -rf c")
    server.call("POST", f"/v1/approvals/{first}", {"decision": "approve"})
    server.call("POST", f"/v1/approvals/{second}", {"decision": "deny", "comment": "no"})
    status, body = server.call("GET", "/v1/decisions?limit=500")
    assert status == 200
    mine = [r for r in body["decisions"] if r["session"] == sid]
    assert [(r["id"], r["status"], r["decided_by"]) for r in mine] == [
        (second, "denied", "dashboard"),
        (first, "approved", "dashboard"),
    ]
    assert waiting not in {r["id"] for r in body["decisions"]}
    for r in mine:
        assert r["waited"] == round(r["decided_at"] - r["created_at"], 3) >= 0
    _, one = server.call("GET", "/v1/decisions?limit=1")
    assert len(one["decisions"]) == 1
    _, page = server.call("GET", f"/v1/timeline/{sid}")
    assert {r["id"] for r in page["approvals"]} == {first, second, waiting}
    assert {"at": mine[0]["decided_at"], "by": "dashboard", "text": "no"} in page["feedback"]


def test_bad_limit_is_400(server: Server) -> None:
    """A limit that is not a whole number from 1 to 500 is refused in one line."""
    for bad in ("0", "501", "x", "-1"):
        status, body = server.call("GET", f"/v1/decisions?limit={bad}")
        assert status == 400
        assert body == {"error": "'limit' must be a whole number from 1 to 500"}


def test_views_leave_redacted(server: Server) -> None:
    """A secret in feedback or an approval comment is redacted in both views."""
    sid = _sid("red")
    server.call("POST", "/v1/steps", _read(sid, "a"))
    server.call("POST", f"/v1/sessions/{sid}/feedback", {"text": "use password=hunter2xyz"})
    server.call("POST", "/v1/steps", _read(sid, "b"))
    rid = _ask(server, sid, "rm -rf c")
    comment = "ok with token=abcdef1234567890"
    server.call("POST", f"/v1/approvals/{rid}", {"decision": "approve", "comment": comment})
    _, page = server.call("GET", f"/v1/timeline/{sid}")
    _, decisions = server.call("GET", "/v1/decisions?limit=500")
    for body in (page, decisions):
        text = json.dumps(body)
        assert "hunter2xyz" not in text
        assert "abcdef1234567890" not in text
    said = [f["text"] for f in page["feedback"]]
    assert "use password=[REDACTED]" in said
    assert "ok with token=[REDACTED]" in said


def test_openapi_lists_the_views(server: Server) -> None:
    """The schema describes both views."""
    _, schema = server.call("GET", "/openapi.json")
    assert "get" in schema["paths"]["/v1/timeline/{id}"]
    limit = schema["paths"]["/v1/decisions"]["get"]["parameters"][0]
    assert (limit["name"], limit["schema"]["maximum"]) == ("limit", 500)


def test_a_request_past_its_expiry_is_history(tmp_path: Path) -> None:
    """Read past its expires_at, a pending request is expired: decided, and in the history."""
    from starlette.testclient import TestClient

    from antiloop.server.app import Service, create_app

    now = [1_000_000.0]
    service = Service(f"sqlite:///{tmp_path}/x.db", "t0ken-for-tests", clock=lambda: now[0])
    headers = {"Authorization": "Bearer t0ken-for-tests"}
    with TestClient(create_app(service)) as client:
        body = {"tool": "Bash", "args": {"command": "rm -rf x"}, "session": "exp"}
        request = client.post("/v1/check", json=body, headers=headers).json()["approval"]
        assert client.get("/v1/decisions", headers=headers).json() == {"decisions": []}
        now[0] = request["expires_at"] + 1
        page = client.get("/v1/timeline/exp", headers=headers).json()
        decided = client.get("/v1/decisions", headers=headers).json()["decisions"]
    assert [r["status"] for r in page["approvals"]] == ["expired"]
    assert [(r["id"], r["status"], r["decided_by"]) for r in decided] == [
        (request["id"], "expired", "timeout")
    ]
    assert decided[0]["waited"] == round(now[0] - request["created_at"], 3)


def test_the_page_never_parses_text_as_html() -> None:
    """The dashboard script builds nodes and text nodes only: no HTML parsing sink in it."""
    from importlib import resources

    page = resources.files("antiloop.server").joinpath("dashboard.html").read_text("utf-8")
    script = page[page.index("<script>") :]
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
