"""Claude Code's HTTP hooks answered by a real ``antiloop serve`` process."""

from __future__ import annotations

import json
import uuid

import pytest

from antiloop.hooks import installer

pytestmark = pytest.mark.slow


def event(session: str, name: str, **fields: object) -> dict:
    return {
        "session_id": session,
        "hook_event_name": name,
        "cwd": "/work/game",
        "transcript_path": "/tmp/none.jsonl",
        **fields,
    }


GREP = {"pattern": "doubleJump", "path": "src"}
RESULT = {"mode": "content", "content": "src/app.ts:12:  doubleJump(): void {", "numLines": 1}


def test_second_identical_grep_is_blocked_over_http(server):
    """Claude Code's own payloads: the second identical Grep is blocked with its fingerprint."""
    session = "cc-" + uuid.uuid4().hex[:8]
    answers = []
    for _ in range(2):
        status, pre = server.call(
            "POST",
            "/v1/hooks/claude-code",
            event(session, "PreToolUse", tool_name="Grep", tool_input=GREP),
        )
        assert status == 200
        assert pre.get("hookSpecificOutput", {}).get("permissionDecision") != "deny"
        status, post = server.call(
            "POST",
            "/v1/hooks/claude-code",
            event(session, "PostToolUse", tool_name="Grep", tool_input=GREP, tool_response=RESULT),
        )
        assert status == 200
        answers.append(post)
    assert answers[0].get("decision") != "block"
    assert answers[1]["decision"] == "block"
    assert "AGENT::main::grep::double jump@src::" in answers[1]["reason"]
    status, refused = server.call(
        "POST",
        "/v1/hooks/claude-code",
        event(session, "PreToolUse", tool_name="Grep", tool_input={**GREP, "path": "./src/"}),
    )
    assert refused["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_hook_route_needs_the_token_and_a_known_agent(server):
    """Without the token the hook is refused with 401; an unknown agent is a 400."""
    body = event("x", "PreToolUse", tool_name="Read", tool_input={"file_path": "a"})
    assert server.call("POST", "/v1/hooks/claude-code", body, token=None)[0] == 401
    assert server.call("POST", "/v1/hooks/cursor", body)[0] == 400


def test_install_writes_http_hooks_and_uninstall_removes_them(tmp_path):
    """--http installs http handlers with the token from the environment, and removes them again."""
    settings = tmp_path / "settings.json"
    original = json.dumps(
        {
            "model": "opus",
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},
        },
        indent=2,
    )
    settings.write_text(original)
    url = installer.hook_url("http://127.0.0.1:8765/", "claude-code")
    installer.install("claude-code", settings, url)
    data = json.loads(settings.read_text())
    ours = installer.find_ours(data, "claude-code")
    handler = ours["PostToolUse"][0]
    assert handler["type"] == "http"
    assert handler["url"] == "http://127.0.0.1:8765/v1/hooks/claude-code"
    assert handler["headers"] == {"Authorization": "Bearer $ANTILOOP_TOKEN"}
    assert handler["allowedEnvVars"] == ["ANTILOOP_TOKEN"]
    installer.uninstall("claude-code", settings)
    assert settings.read_text() == original
