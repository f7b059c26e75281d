"""Fail-safe: bad input, a broken store or config, the deadline; open by default, closed on ask."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import missing
from tests.hooks.payloads import CLAUDE_EVENTS, GEMINI_EVENTS, ClaudeSession

from antiloop.hooks import handler as handler_module
from antiloop.hooks.events import HookEvent
from antiloop.hooks.runner import run_hook


def _json(stdout: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(stdout)
    return value


@pytest.mark.parametrize("data", [b"", b"{oops", b"[]", b'{"session_id": "x"}'])
def test_unreadable_input_fails_open_with_a_message(data: bytes, env: dict[str, str]) -> None:
    """Bad input exits 0 with a systemMessage saying nothing was checked, and a stderr line."""
    answer = run_hook("claude-code", data, env=env)
    assert answer.code == 0
    assert "nothing was checked" in _json(answer.stdout)["systemMessage"]
    assert answer.stderr.startswith("antiloop hook:")


def test_unreadable_input_blocks_when_closed(env: dict[str, str]) -> None:
    """Under ANTILOOP_FAIL=closed unreadable input exits 2 with the reason on stderr."""
    answer = run_hook("claude-code", b"", env={**env, "ANTILOOP_FAIL": "closed"})
    assert answer.code == 2
    assert answer.stdout == ""
    assert "empty" in answer.stderr


def test_an_unknown_agent_is_reported_not_raised(env: dict[str, str]) -> None:
    """``antiloop hook cursor`` answers with a message instead of a usage error."""
    answer = run_hook("cursor", json.dumps(CLAUDE_EVENTS["PreToolUse"]), env=env)
    assert answer.code == 0
    assert "unknown agent" in _json(answer.stdout)["systemMessage"]


def _read_only_location(tmp_path: Path) -> Path:
    """A store path in a directory no one here may write (root writes anywhere but /sys)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        return locked / "antiloop.db"
    if not Path("/sys/kernel").is_dir():
        missing("no read-only location for root on this system (/sys/kernel)")
    return Path("/sys/kernel/antiloop-test.db")


@pytest.mark.parametrize("name", ["PreToolUse", "PostToolUse", "Stop", "SessionStart"])
def test_a_read_only_store_fails_open(name: str, tmp_path: Path, env: dict[str, str]) -> None:
    """A store that cannot be written lets the call go on, saying so and why."""
    bad = {**env, "ANTILOOP_STORE": f"sqlite:///{_read_only_location(tmp_path)}"}
    answer = run_hook("claude-code", json.dumps(CLAUDE_EVENTS[name]), env=bad)
    assert answer.code == 0
    message = _json(answer.stdout)["systemMessage"]
    assert "read-only or cannot be created" in message
    assert f"this {name} was not checked" in message


def test_a_store_under_a_file_fails_open(tmp_path: Path, env: dict[str, str]) -> None:
    """A store whose directory cannot be created (a file is in the way) is reported."""
    (tmp_path / "file").write_text("x")
    bad = {**env, "ANTILOOP_STORE": f"sqlite:///{tmp_path / 'file' / 'sub' / 'a.db'}"}
    answer = run_hook("claude-code", json.dumps(CLAUDE_EVENTS["PostToolUse"]), env=bad)
    assert "cannot create the directory" in _json(answer.stdout)["systemMessage"]


def test_a_store_that_is_not_a_database_fails_open(tmp_path: Path, env: dict[str, str]) -> None:
    """A store path holding another file is reported and left alone; the call goes on."""
    other = tmp_path / "notes.db"
    other.write_text("my notes\n")
    bad = {**env, "ANTILOOP_STORE": f"sqlite:///{other}"}
    for name in ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart"):
        answer = run_hook("claude-code", json.dumps(CLAUDE_EVENTS[name]), env=bad)
        assert answer.code == 0
        message = _json(answer.stdout)["systemMessage"]
        assert "not an SQLite database" in message
        assert f"this {name} was not checked" in message
    assert other.read_text() == "my notes\n"


def test_a_broken_store_denies_when_closed(tmp_path: Path, env: dict[str, str]) -> None:
    """Under ANTILOOP_FAIL=closed a call about to run is denied when the store is broken."""
    other = tmp_path / "notes.db"
    other.write_text("my notes\n")
    bad = {**env, "ANTILOOP_STORE": f"sqlite:///{other}", "ANTILOOP_FAIL": "closed"}
    pre = run_hook("claude-code", json.dumps(CLAUDE_EVENTS["PreToolUse"]), env=bad)
    decision = _json(pre.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "ANTILOOP_FAIL=closed" in decision["permissionDecisionReason"]
    gemini = run_hook("gemini", json.dumps(GEMINI_EVENTS["BeforeTool"]), env=bad)
    assert _json(gemini.stdout)["decision"] == "deny"
    post = run_hook("claude-code", json.dumps(CLAUDE_EVENTS["PostToolUse"]), env=bad)
    assert "systemMessage" in _json(post.stdout)  # nothing left to deny after the call


def test_a_missing_store_directory_is_created(tmp_path: Path, env: dict[str, str]) -> None:
    """A store whose directories do not exist yet is created on first use."""
    deep = tmp_path / "a" / "b" / "c" / "antiloop.db"
    answer = run_hook(
        "claude-code",
        json.dumps(CLAUDE_EVENTS["PostToolUse"]),
        env={**env, "ANTILOOP_STORE": f"sqlite:///{deep}"},
    )
    assert (answer.code, answer.stdout) == (0, "")
    assert deep.is_file()


def test_a_bad_config_is_reported(tmp_path: Path, env: dict[str, str]) -> None:
    """A config with an unknown key lets the call go on, naming the key."""
    config = tmp_path / "antiloop.toml"
    config.write_text("repeat_treshold = 3\n")
    answer = run_hook(
        "claude-code",
        json.dumps(CLAUDE_EVENTS["PreToolUse"]),
        env={**env, "ANTILOOP_CONFIG": str(config)},
    )
    assert "repeat_treshold" in _json(answer.stdout)["systemMessage"]


def test_the_config_can_ask_to_fail_closed(tmp_path: Path, env: dict[str, str]) -> None:
    """[hooks] fail = "closed" denies a call the guard cannot check."""
    config = tmp_path / "antiloop.toml"
    config.write_text('[hooks]\nfail = "closed"\n')
    other = tmp_path / "notes.db"
    other.write_text("x")
    bad = {**env, "ANTILOOP_CONFIG": str(config), "ANTILOOP_STORE": f"sqlite:///{other}"}
    answer = run_hook("claude-code", json.dumps(CLAUDE_EVENTS["PreToolUse"]), env=bad)
    assert _json(answer.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.fixture
def stuck(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Makes the handler wait until the returned event is set (the test sets it at the end)."""
    release = threading.Event()

    def wait(self: object, event: HookEvent) -> handler_module.Outcome:
        release.wait()
        return handler_module.PASS

    monkeypatch.setattr(handler_module.HookHandler, "handle", wait)
    return release


def test_the_deadline_answers_for_a_stuck_hook(stuck: threading.Event, env: dict[str, str]) -> None:
    """Past its deadline the hook answers (open: a message) and says the work is unfinished."""
    answer = run_hook(
        "claude-code", json.dumps(CLAUDE_EVENTS["PreToolUse"]), env=env, deadline=0.05
    )
    stuck.set()
    assert answer.finished is False
    assert answer.code == 0
    assert "deadline" in _json(answer.stdout)["systemMessage"]


def test_the_deadline_denies_when_closed(stuck: threading.Event, env: dict[str, str]) -> None:
    """Past its deadline under ANTILOOP_FAIL=closed the call is denied."""
    answer = run_hook(
        "claude-code",
        json.dumps(ClaudeSession("late").pre("Bash", {"command": "ls"})),
        env={**env, "ANTILOOP_FAIL": "closed"},
        deadline=0.05,
    )
    stuck.set()
    decision = _json(answer.stdout)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    assert "deadline" in decision["permissionDecisionReason"]


def test_an_internal_error_is_named(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """A bug in the handler becomes a message naming the exception, never exit 1."""

    def broken(self: object, event: HookEvent) -> handler_module.Outcome:
        raise KeyError("oops")

    monkeypatch.setattr(handler_module.HookHandler, "handle", broken)
    answer = run_hook("claude-code", json.dumps(CLAUDE_EVENTS["Stop"]), env=env)
    assert answer.code == 0
    assert "KeyError" in _json(answer.stdout)["systemMessage"]
    assert "KeyError" in answer.stderr
