"""What each event does, answered in each dialect (in this process, a real SQLite store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.hooks.conftest import Call
from tests.hooks.payloads import CLAUDE_EVENTS, CODEX_EVENTS, GEMINI_EVENTS, ClaudeSession

from antiloop.stores import open_store

FOUND = "src/app/app.ts:12:  doubleJump(): void {"


def _store(env: dict[str, str]):  # type: ignore[no-untyped-def]
    return open_store(env["ANTILOOP_STORE"])


def test_the_second_identical_step_is_blocked_with_its_fingerprint(call: Call) -> None:
    """PostToolUse answers decision block at the repeat, the reason naming the fingerprint."""
    s = ClaudeSession("rep")
    assert call(s.grep("doubleJump", FOUND)) is None
    answer = call(s.grep("doubleJump", FOUND))
    assert answer is not None
    assert answer["decision"] == "block"
    assert "Fingerprint: AGENT::main::grep::" in answer["reason"]
    assert "Change the parameters" in answer["reason"]
    assert "continue" not in answer  # the session goes on


def test_a_stopped_procedure_is_denied_before_it_runs(call: Call) -> None:
    """After the repeat, PreToolUse of the same call denies it; another call is let through."""
    s = ClaudeSession("deny")
    call(s.grep("doubleJump", FOUND))
    call(s.grep("doubleJump", FOUND))
    equivalent = {"pattern": "double.*Jump", "path": "./src", "output_mode": "content"}
    same = call(s.pre("Grep", equivalent))
    assert same is not None
    decision = same["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse"
    assert decision["permissionDecision"] == "deny"
    assert "AGENT::main::grep::" in decision["permissionDecisionReason"]
    assert call(s.pre("Grep", {"pattern": "jumpHeight", "path": "src"})) is None


def test_the_person_speaking_opens_a_fresh_window(call: Call) -> None:
    """UserPromptSubmit resets: the stopped call is allowed again and does not loop at once."""
    s = ClaudeSession("reset")
    call(s.grep("doubleJump", FOUND))
    call(s.grep("doubleJump", FOUND))
    assert call(s.prompt("Try grep again please.")) is None
    args = {"pattern": "doubleJump", "path": "src", "output_mode": "content"}
    assert call(s.pre("Grep", args)) is None
    assert call(s.grep("doubleJump", FOUND)) is None


def test_a_cycle_is_blocked(call: Call) -> None:
    """A-B-A-B with the same results answers block at the fourth step."""
    s = ClaudeSession("cycle")
    answers = [
        call(s.grep("doubleJump", FOUND)),
        call(s.read("/home/dev/game/src/app/app.ts", "export class Player {}\n")),
        call(s.grep("doubleJump", FOUND)),
        call(s.read("/home/dev/game/src/app/app.ts", "export class Player {}\n")),
    ]
    assert answers[:3] == [None, None, None]
    assert answers[3] is not None
    assert "AGENT::main::cycle::grep>read::" in answers[3]["reason"]


def test_an_edit_that_changes_nothing_is_a_repeat(call: Call, tmp_path: Path) -> None:
    """The file's sha256 is read from disk: the same edit leaving the same file is blocked."""
    target = tmp_path / "app.ts"
    target.write_text("return 2;\n")
    s = ClaudeSession("edit", cwd=str(tmp_path))
    args = {"file_path": str(target), "old_string": "return 1;", "new_string": "return 2;"}
    assert call(s.post("Edit", args, {"filePath": str(target)})) is None
    second = call(s.failure("Edit", args, "String to replace not found in file."))
    assert second is not None
    assert "AGENT::main::edit::" in second["reason"]


def test_an_edit_that_changes_the_file_is_not_a_repeat(call: Call, tmp_path: Path) -> None:
    """The same edit call is progress while the file's content keeps changing."""
    target = tmp_path / "log.txt"
    s = ClaudeSession("edit2", cwd=str(tmp_path))
    args = {"file_path": str(target), "content": "x"}
    for n in range(3):
        target.write_text("line\n" * (n + 1))
        assert call(s.post("Write", args, {"filePath": str(target)})) is None


def test_subagents_do_not_loop_with_the_main_conversation(call: Call) -> None:
    """The same call once in the main conversation and once in a subagent is no repeat."""
    main = ClaudeSession("apart")
    sub = ClaudeSession("apart", agent_id="a7", agent_type="explorer")
    assert call(main.grep("doubleJump", FOUND)) is None
    assert call(sub.grep("doubleJump", FOUND)) is None
    again = call(sub.grep("doubleJump", FOUND))
    assert again is not None
    assert "AGENT::explorer-a7::grep::" in again["reason"]


def test_a_failure_streak_tells_the_model_to_change_strategy(call: Call) -> None:
    """Three failing Bash calls in a row answer block with the failure-streak hint."""
    s = ClaudeSession("fails")
    answers = [
        call(s.failure("Bash", {"command": f"npm run build:{n}"}, f"Exit code 1\nerror {n}"))
        for n in range(3)
    ]
    assert answers[:2] == [None, None]
    assert answers[2] is not None
    assert answers[2]["decision"] == "block"
    assert "failed 3 times" in answers[2]["reason"]


def test_without_a_config_permissions_stay_the_hosts(call: Call) -> None:
    """No [approval]: the hooks guard loops only and answer nothing for a risky call."""
    s = ClaudeSession("host")
    assert call(s.pre("Bash", {"command": "rm -rf build"})) is None
    assert call(s.pre("Write", {"file_path": "/tmp/a", "content": "x"})) is None
    assert call(s.pre("Bash", {"command": "touch made.txt"})) is None


@pytest.fixture
def approvals(tmp_path: Path) -> dict[str, str]:
    """The environment of a config that opts in to the approval policy (an [approval] table)."""
    config = tmp_path / "approvals.toml"
    config.write_text("[approval]\n")
    return {"ANTILOOP_CONFIG": str(config)}


def test_risky_tools_are_asked_about_once_approvals_are_on(
    call: Call, approvals: dict[str, str]
) -> None:
    """The opted-in default policy asks before shell commands and writes, not before reads."""
    s = ClaudeSession("policy")
    ask = call(s.pre("Bash", {"command": "rm -rf build"}), **approvals)
    assert ask is not None
    assert ask["hookSpecificOutput"]["permissionDecision"] == "ask"
    assert call(s.pre("Read", {"file_path": "/home/dev/game/a.ts"}), **approvals) is None


@pytest.mark.parametrize("tool", ["TodoWrite", "Agent", "Task", "AskUserQuestion", "ExitPlanMode"])
def test_the_agents_bookkeeping_tools_are_not_asked_about(
    call: Call, tool: str, approvals: dict[str, str]
) -> None:
    """Todo lists, subagent launches and questions to the person need no approval."""
    assert call(ClaudeSession("internal").pre(tool, {"x": 1}), **approvals) is None


def test_the_permission_mode_is_respected(call: Call, approvals: dict[str, str]) -> None:
    """bypassPermissions asks nothing; acceptEdits asks about shell commands, not writes."""
    bypass = ClaudeSession("modes", mode="bypassPermissions")
    assert call(bypass.pre("Bash", {"command": "rm -rf build"}), **approvals) is None
    edits = ClaudeSession("modes", mode="acceptEdits")
    assert call(edits.pre("Write", {"file_path": "/tmp/a", "content": "x"}), **approvals) is None
    assert call(edits.pre("Bash", {"command": "rm -rf build"}), **approvals) is not None


def test_a_headless_run_is_never_asked(call: Call, tmp_path: Path) -> None:
    """claude -p has nobody to answer an ask: it is left to the host; a deny rule still holds."""
    config = tmp_path / "antiloop.toml"
    config.write_text('[[approval.rules]]\ncommand = "^rm "\ndecision = "deny"\n')
    headless = {"ANTILOOP_CONFIG": str(config), "CLAUDE_CODE_SESSION_ATTENDED": "0"}
    s = ClaudeSession("headless")
    assert call(s.pre("Bash", {"command": "touch made.txt"}), **headless) is None
    deny = call(s.pre("Bash", {"command": "rm -rf build"}), **headless)
    assert deny is not None
    assert deny["hookSpecificOutput"]["permissionDecision"] == "deny"
    sdk = {"ANTILOOP_CONFIG": str(config), "CLAUDE_CODE_ENTRYPOINT": "sdk-py"}
    assert call(s.pre("Bash", {"command": "touch made.txt"}), **sdk) is None
    attended = {"ANTILOOP_CONFIG": str(config), "CLAUDE_CODE_SESSION_ATTENDED": "1"}
    ask = call(s.pre("Bash", {"command": "touch made.txt"}), **attended)
    assert ask is not None
    assert ask["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_the_policy_is_configurable(call: Call, tmp_path: Path) -> None:
    """[approval] rules deny and allow; [hooks] approval = off asks nothing."""
    config = tmp_path / "antiloop.toml"
    config.write_text(
        '[[approval.rules]]\ncommand = "^rm "\ndecision = "deny"\n'
        '[[approval.rules]]\ntool = "Bash"\ndecision = "allow"\n'
    )
    s = ClaudeSession("conf", cwd=str(tmp_path))
    deny = call(s.pre("Bash", {"command": "rm -rf build"}), ANTILOOP_CONFIG=str(config))
    assert deny is not None
    assert deny["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert call(s.pre("Bash", {"command": "ls"}), ANTILOOP_CONFIG=str(config)) is None
    config.write_text('[approval]\n[hooks]\napproval = "off"\n')
    assert call(s.pre("Bash", {"command": "rm -rf build"}), ANTILOOP_CONFIG=str(config)) is None


def test_the_project_config_is_found_beside_the_project(call: Call, tmp_path: Path) -> None:
    """antiloop.toml in the event's cwd is read without ANTILOOP_CONFIG."""
    (tmp_path / "antiloop.toml").write_text("[approval]\n")
    s = ClaudeSession("projconf", cwd=str(tmp_path))
    ask = call(s.pre("Bash", {"command": "rm -rf build"}))
    assert ask is not None
    assert ask["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_stagnation_under_a_stop_hook_ends_the_turn(call: Call, tmp_path: Path) -> None:
    """The same last message at each forced Stop ends the turn with continue false."""
    config = tmp_path / "fast.toml"
    config.write_text('embedder = "ngram"\nmin_steps = 1\n')
    s = ClaudeSession("stall")
    call(s.prompt("Make the jump twice as high."), ANTILOOP_CONFIG=str(config))
    message = "I still need to find where the jump height is configured."
    answers = [call(s.stop(message, active=n > 0), ANTILOOP_CONFIG=str(config)) for n in range(4)]
    assert answers[:3] == [None, None, None]
    assert answers[3] is not None
    assert answers[3]["continue"] is False
    assert "stagnation" in answers[3]["stopReason"] or "similar" in answers[3]["stopReason"]
    assert "decision" not in answers[3]  # the hook never forces the agent on


def test_a_goal_reached_at_stop_lets_the_agent_stop(call: Call, tmp_path: Path) -> None:
    """A last message that reaches the goal is logged and the agent stops as it wanted."""
    config = tmp_path / "fast.toml"
    config.write_text('embedder = "ngram"\nmin_steps = 1\n')
    goal = "A three-month Python learning plan with weekly topics, resources and a schedule."
    s = ClaudeSession("goal")
    call(s.prompt(goal), ANTILOOP_CONFIG=str(config))
    call(s.read("/n/0.md", "note 0\n"), ANTILOOP_CONFIG=str(config))
    assert call(s.stop(goal), ANTILOOP_CONFIG=str(config)) is None


def test_sessions_are_opened_and_closed_in_the_audit_log(call: Call, env: dict[str, str]) -> None:
    """SessionStart and SessionEnd leave session records; a step leaves a step record."""
    s = ClaudeSession("audit")
    call(s.start())
    call(s.grep("doubleJump", FOUND))
    call(s.end())
    store = _store(env)
    kinds = [(r.kind, r.detail.get("event")) for r in store.audit_records("audit")]
    assert kinds == [("session", "start"), ("step", None), ("session", "end")]


def test_events_it_does_not_handle_get_no_answer(call: Call) -> None:
    """A Notification is answered with nothing (and nothing is opened)."""
    assert call(CLAUDE_EVENTS["Notification"]) is None


def test_a_stop_request_denies_the_next_call(call: Call, env: dict[str, str]) -> None:
    """``antiloop stop`` (a stop flag in the store) makes PreToolUse deny."""
    s = ClaudeSession("stopme")
    call(s.grep("doubleJump", FOUND))
    _store(env).request_stop("stopme", "ana")  # type: ignore[attr-defined]
    answer = call(s.pre("Read", {"file_path": "/a"}))
    assert answer is not None
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "ana asked" in answer["hookSpecificOutput"]["permissionDecisionReason"]


def test_feedback_from_a_person_reaches_the_model(call: Call, env: dict[str, str]) -> None:
    """Queued feedback comes back as additionalContext after the next call."""
    s = ClaudeSession("fb")
    call(s.grep("doubleJump", FOUND))
    _store(env).push_feedback("fb", "Look in src/physics instead.")  # type: ignore[attr-defined]
    answer = call(s.read("/a", "x"))
    assert answer is not None
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert "Look in src/physics instead." in context


def test_gemini_answers_in_its_dialect(call: Call) -> None:
    """A repeat's reason replaces the repeated result; BeforeTool denies with decision."""
    after = GEMINI_EVENTS["AfterTool"] | {"session_id": "gem"}
    assert call(after, "gemini") is None
    second = call(after | {"timestamp": "2026-01-01T00:00:09Z"}, "gemini")  # called again
    assert second is not None
    assert second["decision"] == "deny"  # Gemini would HTML-escape additionalContext
    assert "AGENT::main::" in second["reason"]
    before = call(GEMINI_EVENTS["BeforeTool"] | {"session_id": "gem"}, "gemini")
    assert before is not None
    assert before["decision"] == "deny"
    assert "AGENT::main::" in before["reason"]


def test_codex_gets_only_deny_before_a_call(call: Call) -> None:
    """Codex honours only deny: the policy's ask is left to Codex; a loop is denied."""
    risky = CODEX_EVENTS["PreToolUse"] | {
        "session_id": "cdx",
        "tool_input": {"command": ["bash", "-lc", "rm -rf build"]},
    }
    assert call(risky, "codex") is None
    post = CODEX_EVENTS["PostToolUse"] | {"session_id": "cdx"}
    call(post | {"tool_use_id": "call_a"}, "codex")
    assert call(post | {"tool_use_id": "call_a"}, "codex") is None  # a retried delivery
    blocked = call(post | {"tool_use_id": "call_b"}, "codex")
    assert blocked is not None
    assert blocked["decision"] == "block"
    denied = call(CODEX_EVENTS["PreToolUse"] | {"session_id": "cdx"}, "codex")
    assert denied is not None
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_stop_repeat_action_ends_the_turn(call: Call, tmp_path: Path) -> None:
    """repeat_action = "stop" answers continue false (and the reason) at the repeat."""
    config = tmp_path / "stop.toml"
    config.write_text('repeat_action = "stop"\n')
    s = ClaudeSession("hard")
    call(s.grep("doubleJump", FOUND), ANTILOOP_CONFIG=str(config))
    answer = call(s.grep("doubleJump", FOUND), ANTILOOP_CONFIG=str(config))
    assert answer is not None
    assert answer["continue"] is False
    assert "AGENT::main::grep::" in answer["stopReason"]
    later = call(s.pre("Read", {"file_path": "/a"}), ANTILOOP_CONFIG=str(config))
    assert later is not None
    assert later["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize("how", ["PostToolUse", "PostToolUseFailure"])
def test_an_interrupted_call_is_neither_a_step_nor_a_repeat(call: Call, env, how: str) -> None:
    """A call the person interrupted says nothing about a loop: not judged, not counted."""
    s = ClaudeSession(f"interrupted-{how}")
    args = {"pattern": "doubleJump", "path": "src", "output_mode": "content"}
    found = {"mode": "content", "content": FOUND, "numLines": 1, "filenames": []}

    def interrupted() -> dict:
        if how == "PostToolUse":
            return s.post("Grep", args, {**found, "interrupted": True})
        return s.failure("Grep", args, "Interrupted by user") | {"is_interrupt": True}

    assert call(s.grep("doubleJump", FOUND)) is None
    assert [call(interrupted()) for _ in range(3)] == [None, None, None]
    assert _store(env).peek(s.session).steps == 1
    answer = call(s.grep("doubleJump", FOUND))  # the second real call is the repeat
    assert answer is not None
    assert answer["decision"] == "block"
    assert _store(env).peek(s.session).steps == 2
