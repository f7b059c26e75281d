"""Hook inputs captured from the real CLIs (fixtures/captured.json), read as each CLI gives them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.conftest import Call

from antiloop.hooks.events import normalize
from antiloop.hooks.results import codex_shell, gemini_shell
from antiloop.hooks.runner import run_hook
from antiloop.stores import open_store

CAPTURED = Path(__file__).with_name("fixtures") / "captured.json"
POSTS = ("PostToolUse", "PostToolUseFailure", "AfterTool")
DIALECT = {"claude": "claude-code", "codex": "codex", "gemini": "gemini"}


def captured(cli: str, root: Path) -> list[dict[str, Any]]:
    """The CLI's captured events, its temporary directory replaced by ``root``."""
    data = json.loads(CAPTURED.read_text().replace("{root}", str(root)))
    if cli == "codex":
        rollout = Path(data["codex"][0]["transcript_path"])
        rollout.parent.mkdir(parents=True, exist_ok=True)
        rollout.write_text("".join(json.dumps(line) + "\n" for line in data["codex_rollout"]))
    events: list[dict[str, Any]] = data[cli]
    return events


@pytest.mark.parametrize(
    ("cli", "failed", "ok"),
    [
        ("claude", ("missing part 1", 1), ("<2 lines>", 0)),
        ("codex", ("missing part 1\n", 1), ("<2 lines>\n", None)),
        ("gemini", ("missing part 1", 1), ("<2 lines>", None)),
    ],
)
def test_results_are_read_as_the_tool_gave_them(
    cli: str, failed: tuple[str, int], ok: tuple[str, int | None], tmp_path: Path
) -> None:
    """No wrapper text in the output; the failing call's exit code is found (Codex: rollout)."""
    events = [normalize(DIALECT[cli], e) for e in captured(cli, tmp_path)]
    posts = [e for e in events if e.name in POSTS]
    assert [(p.output, p.exit_code) for p in posts] == [failed, ok]
    assert all(e.kind != "other" for e in events)


def test_gemini_wrappers_come_off() -> None:
    """Output, exit code, error and signal from Gemini's sections; PGID and tags dropped."""
    text = (
        "<untrusted_context>\nOutput: line one\nExit Code: 2\nline two?\nError: boom\n"
        "Exit Code: 3\nSignal: 9\nProcess Group PGID: 1234\n</untrusted_context>"
    )
    assert gemini_shell(text) == (
        "line one\nExit Code: 2\nline two?",
        3,
        "boom; terminated by signal 9",
    )
    assert gemini_shell("<untrusted_context>\nOutput: (empty)\n</untrusted_context>") == (
        "",
        None,
        None,
    )


def test_codex_formatted_results_give_the_exit_code() -> None:
    """Both of Codex's formatted shell results (the legacy shell tool, unified exec)."""
    legacy = "Exit code: 1\nWall time: 0.3 seconds\nOutput:\nno such file\n"
    unified = (
        "Chunk ID: e30523\nWall time: 0.0000 seconds\nProcess exited with code 2\n"
        "Original token count: 11\nOutput:\ncat: x: No such file\n"
    )
    assert codex_shell(legacy) == ("no such file\n", 1)
    assert codex_shell(unified) == ("cat: x: No such file\n", 2)
    assert codex_shell("Output:\nnot a header above\n") == ("Output:\nnot a header above\n", None)
    assert codex_shell("plain output\n") == ("plain output\n", None)


def test_codex_failures_count_towards_the_streak(call: Call, tmp_path: Path) -> None:
    """Three failing exec_command calls of Codex give the failure streak."""
    events = captured("codex", tmp_path)
    fail = next(e for e in events if e["hook_event_name"] == "PostToolUse")
    # Three calls, each its own id (one id delivered again is the same call, a retry): the
    # rollout Codex wrote for the failing call is copied for each, as Codex writes one per call.
    rollout = Path(fail["transcript_path"])
    lines = [line for line in rollout.read_text().splitlines() if fail["tool_use_id"] in line]
    with rollout.open("a") as out:
        for n in range(3):
            out.writelines(line.replace(fail["tool_use_id"], f"c{n}") + "\n" for line in lines)
    answers = [
        # each call its own tool-call id: one id delivered again is the same call (a retry)
        call(fail | {"tool_input": {"command": f"sh fail.sh {n}"}, "tool_use_id": f"c{n}"}, "codex")
        for n in range(3)
    ]
    assert answers[:2] == [None, None]
    assert answers[2] is not None
    assert "failed 3 times" in answers[2]["hookSpecificOutput"]["additionalContext"]


def test_gemini_repeat_reason_is_not_escaped(call: Call, tmp_path: Path) -> None:
    """The repeat's reason replaces the repeated output (no HTML escaping, no wrapper)."""
    events = captured("gemini", tmp_path)
    ok = [e for e in events if e["hook_event_name"] == "AfterTool"][1]
    assert call(ok, "gemini") is None
    # the same call made again: Gemini stamps it with a later time (the same stamp is the same
    # event sent twice, judged once: test_daemon.py)
    second = call(ok | {"timestamp": "2099-01-01T00:00:00.000Z"}, "gemini")
    assert second is not None
    assert second["decision"] == "deny"
    assert "::<2 lines>#" in second["reason"]
    assert "untrusted_context" not in second["reason"]
    assert "PGID" not in second["reason"]


def test_codex_deny_reason_has_no_double_full_stop(call: Call, tmp_path: Path) -> None:
    """Codex appends '. Command: …' to the reason: it must not end in a full stop itself."""
    events = captured("codex", tmp_path)
    pre, ok = [e for e in events if e["hook_event_name"] == "PreToolUse"][1], events[5]
    call(ok | {"tool_use_id": "call_a"}, "codex")  # two calls, each with its own id
    call(ok | {"tool_use_id": "call_b"}, "codex")
    denied = call(pre, "codex")
    assert denied is not None
    reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert "was stopped as a loop" in reason
    assert not reason.endswith(".")


def test_an_unknown_shape_is_noticed_kept_and_lets_the_call_go_on(
    env: dict[str, str], tmp_path: Path
) -> None:
    """One line naming the field and the CLI version; no block; the event in the audit log."""
    pre = next(e for e in captured("claude", tmp_path) if e["hook_event_name"] == "PreToolUse")
    odd = pre | {"tool_input": ["sh", "fail.sh"]}
    answer = run_hook(
        "claude-code", json.dumps(odd), env={**env, "AI_AGENT": "claude-code_2-1-332_harness"}
    )
    assert answer.code == 0
    notice = json.loads(answer.stdout)["systemMessage"]
    assert "claude-code 2.1.332" in notice
    assert "'tool_input'" in notice
    assert "\n" not in notice
    assert "hookSpecificOutput" not in answer.stdout
    store = open_store(env["ANTILOOP_STORE"])
    try:
        kept = [r for r in store.audit_records() if r.detail.get("event") == "unknown-shape"]  # type: ignore[attr-defined]
    finally:
        store.close()
    assert len(kept) == 1
    assert kept[0].detail["field"] == "tool_input"
    assert kept[0].session == pre["session_id"]
    closed = run_hook("claude-code", json.dumps(odd), env={**env, "ANTILOOP_FAIL": "closed"})
    assert closed.code == 2
