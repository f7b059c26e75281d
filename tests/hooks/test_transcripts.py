"""Claude Code transcripts of one session (and its subagents), found by id, checked again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from antiloop.core.verdict import Action
from antiloop.hooks.transcripts import (
    check_steps,
    project_key,
    read_session,
    session_files,
)

SESSION = "3f2a9c1e-0000-4000-8000-000000000001"
CWD = "/home/dev/my_game"


def _call(n: int, agent: str | None, name: str, args: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "assistant",
        "uuid": f"a{n}",
        "sessionId": SESSION,
        "cwd": CWD,
        "message": {
            "id": f"msg_{agent}_{n}",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"tu_{agent}_{n}", "name": name, "input": args}],
        },
    }
    if agent:
        entry.update(isSidechain=True, agentId=agent)
    return entry


def _result(n: int, agent: str | None, text: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "user",
        "uuid": f"u{n}",
        "sessionId": SESSION,
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"tu_{agent}_{n}", "content": text}],
        },
    }
    if agent:
        entry.update(isSidechain=True, agentId=agent)
    return entry


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


@pytest.fixture
def claude_home(tmp_path: Path) -> dict[str, str]:
    """A ~/.claude with one session of two identical Greps and a subagent doing one."""
    home = tmp_path / ".claude"
    project = home / "projects" / project_key(CWD)
    grep = {"pattern": "doubleJump", "path": "src", "output_mode": "content"}
    found = "src/app.ts:12:  doubleJump() {"
    prompt = {
        "type": "user",
        "uuid": "p0",
        "sessionId": SESSION,
        "message": {"role": "user", "content": "Make the double jump configurable."},
    }
    _write(
        project / f"{SESSION}.jsonl",
        [
            prompt,
            _call(1, None, "Grep", grep),
            _result(1, None, found),
            _call(2, None, "Grep", grep),
            _result(2, None, found),
        ],
    )
    sub = project / SESSION / "subagents"
    _write(sub / "agent-a7.jsonl", [_call(1, "a7", "Grep", grep), _result(1, "a7", found)])
    (sub / "agent-a7.meta.json").write_text(json.dumps({"agentType": "explorer"}))
    return {"CLAUDE_CONFIG_DIR": str(home)}


def test_a_session_is_found_by_its_id(claude_home: dict[str, str]) -> None:
    """The session's transcript and its subagents' are found, with or without the cwd."""
    with_cwd = session_files(SESSION, cwd=CWD, env=claude_home)
    without = session_files(SESSION, env=claude_home)
    assert with_cwd == without
    assert [p.name for p in with_cwd] == [f"{SESSION}.jsonl", "agent-a7.jsonl"]
    assert session_files("nope", env=claude_home) == []


def test_the_transcript_path_of_a_hook_wins(claude_home: dict[str, str]) -> None:
    """A hook's transcript_path names the files directly."""
    main = session_files(SESSION, env=claude_home)[0]
    assert session_files(SESSION, transcript_path=main) == session_files(SESSION, env=claude_home)


def test_steps_carry_the_hooks_agent_names(claude_home: dict[str, str]) -> None:
    """The main conversation is ``main`` and the subagent ``explorer-a7``, as in the hooks."""
    steps = read_session(SESSION, cwd=CWD, env=claude_home)
    assert [(s.tool, s.agent) for s in steps] == [
        ("Grep", "main"),
        ("Grep", "main"),
        ("Grep", "explorer-a7"),
    ]
    assert steps[0].goal == "Make the double jump configurable."
    assert steps[0].session == SESSION


def test_a_recorded_session_is_checked_as_the_hooks_would(claude_home: dict[str, str]) -> None:
    """The second Grep of the main conversation is a loop; the subagent's Grep is not."""
    judged = check_steps(read_session(SESSION, env=claude_home))
    actions = [v.action for _, v in judged]
    assert actions == [Action.CONTINUE, Action.BLOCK, Action.CONTINUE]
    assert (judged[1][1].fingerprint or "").startswith("AGENT::main::grep::")


def test_a_missing_session_is_an_error(claude_home: dict[str, str]) -> None:
    """Reading a session that has no transcript raises FileNotFoundError naming it."""
    with pytest.raises(FileNotFoundError, match="nope"):
        read_session("nope", env=claude_home)


def test_project_keys() -> None:
    """Every character but letters and digits becomes a dash."""
    assert project_key("/Users/ana/dev/game.v2") == "-Users-ana-dev-game-v2"
