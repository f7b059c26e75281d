"""Budgets in the hooks: usage read from a real Claude Code transcript, asked and stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.hooks.conftest import Call

from antiloop.budgets import spent
from antiloop.hooks.usage import claude_code_usage
from antiloop.stores import open_store

RUN = Path(__file__).resolve().parents[1] / "data" / "claude-code" / "runs"
TRANSCRIPT = RUN / "ed44060c-f649-4f7e-ac5c-b73a996cbcc2.jsonl"  # Claude Code, a scripted model


def _entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _calls(path: Path) -> list[tuple[str, str, dict[str, Any], Any]]:
    """Each tool call of the transcript: its id, tool, input and the result Claude Code kept."""
    results: dict[str, Any] = {}
    for entry in _entries(path):
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results[block["tool_use_id"]] = entry.get("toolUseResult", block.get("content"))
    return [
        (block["id"], block["name"], block["input"], results.get(block["id"]))
        for entry in _entries(path)
        if entry.get("type") == "assistant"
        for block in entry["message"]["content"]
        if block.get("type") == "tool_use"
    ]


def _post(session: str, transcript: Path, call: tuple[str, str, dict[str, Any], Any]) -> Any:
    use_id, tool, args, response = call
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": "/workspace",
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": args,
        "tool_response": response,
        "tool_use_id": use_id,
    }


def _pre(session: str, transcript: Path, tool: str, args: dict[str, Any]) -> Any:
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": "/workspace",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": args,
        "tool_use_id": "toolu_next",
    }


def test_usage_of_a_call_is_its_message_usage() -> None:
    """The real transcript's first call carries its message's prompt and completion tokens."""
    assert claude_code_usage(str(TRANSCRIPT), "toolu_scripted_00") == (2579, 40, None)
    assert claude_code_usage(str(TRANSCRIPT), "toolu_missing") == (None, None, None)
    assert claude_code_usage(str(TRANSCRIPT.with_name("none.jsonl")), "toolu_scripted_00") == (
        None,
        None,
        None,
    )


def test_parallel_calls_charge_their_message_once(tmp_path: Path) -> None:
    """Two tool_use lines of one message (as Claude Code writes them): the first is charged."""
    entries = _entries(TRANSCRIPT)
    first = next(e for e in entries if e.get("type") == "assistant")
    twin = json.loads(json.dumps(first))
    message = dict(first["message"], id="msg_parallel")
    message["content"] = [{"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {}}]
    usage = dict(message["usage"], cache_read_input_tokens=1000, output_tokens=70)
    second = dict(message, content=[{"type": "tool_use", "id": "toolu_b", "name": "Read"}])
    lines = [
        {**first, "message": message},
        {**twin, "message": {**second, "usage": usage}, "costUSD": 0.0125},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in [*entries, *lines]))
    assert claude_code_usage(str(path), "toolu_a") == (3579, 70, 0.0125)
    assert claude_code_usage(str(path), "toolu_b") == (None, None, None)


def test_a_claude_code_session_is_asked_then_stopped_by_its_budget(
    call: Call, tmp_path: Path, env: dict[str, str]
) -> None:
    """Replaying the real session: past the soft limit the next call asks; past the hard, halt."""
    config = tmp_path / "antiloop.toml"
    config.write_text("[budgets.session]\nsoft_tokens = 5000\nhard_tokens = 12000\n")
    calls = _calls(TRANSCRIPT)
    answers = [call(_post("b1", TRANSCRIPT, c), ANTILOOP_CONFIG=str(config)) for c in calls[:2]]
    assert answers[0] is None
    second = answers[1]
    assert second is not None
    context = second["hookSpecificOutput"]["additionalContext"]
    assert "soft limit 5000" in context
    asked = call(_pre("b1", TRANSCRIPT, "Bash", {"command": "ls"}), ANTILOOP_CONFIG=str(config))
    assert asked is not None
    decision = asked["hookSpecificOutput"]
    assert decision["permissionDecision"] == "ask"
    assert "soft limit 5000" in decision["permissionDecisionReason"]
    again = call(_pre("b1", TRANSCRIPT, "Bash", {"command": "ls"}), ANTILOOP_CONFIG=str(config))
    assert again is None  # asked once; the person's yes let the run go on
    halted = None
    for c in calls[2:]:
        halted = call(_post("b1", TRANSCRIPT, c), ANTILOOP_CONFIG=str(config))
        if halted is not None and halted.get("continue") is False:
            break
    assert halted is not None
    assert halted["continue"] is False
    assert "hard limit of 12000 tokens" in halted["stopReason"]
    store = open_store(env["ANTILOOP_STORE"])
    try:
        used = spent(store, "b1")
    finally:
        store.close()
    assert used.tokens > 12000


def test_nobody_is_asked_when_nobody_can_answer(call: Call, tmp_path: Path) -> None:
    """Under ``claude -p`` the check-in is only told to the model; the hard limit still holds."""
    config = tmp_path / "antiloop.toml"
    config.write_text("[budgets.session]\nsoft_tokens = 100\n")
    first = _calls(TRANSCRIPT)[0]
    extra = {"ANTILOOP_CONFIG": str(config), "CLAUDE_CODE_SESSION_ATTENDED": "0"}
    assert call(_post("b2", TRANSCRIPT, first), **extra) is not None
    assert call(_pre("b2", TRANSCRIPT, "Bash", {"command": "ls"}), **extra) is None
