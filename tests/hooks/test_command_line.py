"""``antiloop hook AGENT [--config FILE]`` is read without argparse; other forms still parse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.hooks.conftest import ANTILOOP
from tests.hooks.payloads import ClaudeSession

from antiloop.cli import _hook_call


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["hook", "claude-code"], ("claude-code", None)),
        (["hook", "gemini", "--config", "a.toml"], ("gemini", "a.toml")),
        (["hook", "codex", "--config=b.json"], ("codex", "b.json")),
        (["hook", "--help"], None),
        (["hook"], None),
        (["hook", "claude-code", "--config"], None),
        (["hook", "claude-code", "--config="], None),
        (["hook", "claude-code", "--config", "--help"], None),
        (["hook", "claude-code", "extra"], None),
        (["hook", "claude-code", "--fail", "maybe"], None),
        (["hook", "claude-code", "--config", "a", "--config", "b"], None),
        (["check", "x"], None),
        ([], None),
    ],
)
def test_the_plain_hook_forms_skip_the_parser(
    args: list[str], expected: tuple[str, str | None] | None
) -> None:
    """Only the forms the installers write take the short way; the rest go to argparse."""
    assert _hook_call(args) == expected


@pytest.mark.parametrize(
    "args",
    [
        ["hook", "claude-code", "--fail", "closed"],
        ["hook", "claude-code", "--config", "a.toml", "--fail=closed"],
    ],
)
def test_the_fail_option_is_put_in_the_environment(
    args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--fail closed`` (what ``install --on-failure block`` writes) is ``ANTILOOP_FAIL``."""
    monkeypatch.setenv("ANTILOOP_FAIL", "open")  # restored after the test
    assert _hook_call(args) is not None
    assert os.environ["ANTILOOP_FAIL"] == "closed"


def _run(*args: str, stdin: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(ANTILOOP), *args], input=stdin, capture_output=True, env=env, timeout=120, check=False
    )


def test_hook_with_a_config_file_uses_it(tmp_path: Path, env: dict[str, str]) -> None:
    """``--config FILE`` and ``--config=FILE`` on the short way are the config the hook uses."""
    config = tmp_path / "elsewhere" / "antiloop.toml"  # not in the cwd, where it would be found
    config.parent.mkdir()
    config.write_text('[guard]\ndetectors = ["fail-streak"]\n')
    for session, args in (
        ("s-default", ()),
        ("s-spaced", ("--config", str(config))),
        ("s-equals", (f"--config={config}",)),
    ):
        claude = ClaudeSession(session, cwd=str(tmp_path))
        answers = []
        for _ in range(2):  # each call has its own tool_use_id, as in Claude Code
            payload = claude.post(
                "Read", {"file_path": str(tmp_path / "a.py")}, {"content": "same"}
            )
            stdin = json.dumps(payload).encode()
            answers.append(_run("hook", "claude-code", *args, stdin=stdin, env=env))
        assert all(a.returncode == 0 for a in answers), answers[-1].stderr
        blocked = b'"decision": "block"' in answers[1].stdout
        assert blocked == (not args), (session, answers[1].stdout)


def test_a_missing_config_file_is_one_line_and_exit_0(tmp_path: Path, env: dict[str, str]) -> None:
    """A config file that is not there: the hook still answers, and says what is wrong."""
    payload = ClaudeSession("s-missing", cwd=str(tmp_path)).post(
        "Read", {"file_path": str(tmp_path / "a.py")}, {"content": "x"}
    )
    stdin = json.dumps(payload).encode()
    proc = _run(
        "hook", "claude-code", "--config", str(tmp_path / "nope.toml"), stdin=stdin, env=env
    )
    assert proc.returncode == 0
    assert b"nope.toml" in proc.stderr


def test_hook_help_still_comes_from_argparse(env: dict[str, str]) -> None:
    """``antiloop hook --help`` is the parser's help, as for every command."""
    proc = _run("hook", "--help", stdin=b"", env=env)
    assert proc.returncode == 0
    assert b"usage: antiloop hook" in proc.stdout


def test_the_hook_process_does_not_import_argparse_or_logging(env: dict[str, str]) -> None:
    """The per-call process keeps argparse and logging out (start-up time is a feature)."""
    code = (
        "import sys, runpy; sys.argv = ['antiloop', 'hook', 'claude-code'];"
        "from antiloop.cli import main; main();"
        "print(sorted(m for m in ('argparse', 'logging') if m in sys.modules), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], input=b"", capture_output=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().strip().splitlines()[-1] == "[]"
