"""Fixtures for the hook tests: a store in tmp_path, in-process and separate-process hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from antiloop.hooks.runner import HookAnswer, run_hook

ANTILOOP = Path(sys.executable).with_name("antiloop")

Call = Callable[..., dict[str, Any] | None]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment whose store lives in tmp_path and whose config is none."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "CLAUDE_"))}
    for kept in ("ANTILOOP_JOURNAL", "ANTILOOP_RETRY_WINDOW"):  # the run's own (tests/conftest.py)
        if kept in os.environ:
            clean[kept] = os.environ[kept]
    clean["ANTILOOP_STORE"] = f"sqlite:///{tmp_path / 'store' / 'antiloop.db'}"
    clean["ANTILOOP_HOOKD"] = "0"  # answered in the process; test_daemon.py turns it on
    return clean


def answer_json(answer: HookAnswer) -> dict[str, Any] | None:
    """The hook's stdout as JSON (None when it printed nothing)."""
    assert answer.code == 0, answer
    return json.loads(answer.stdout) if answer.stdout.strip() else None


@pytest.fixture
def call(env: dict[str, str]) -> Call:
    """Run one hook in this process: ``call(payload, dialect="claude-code")`` -> JSON or None."""

    def run(
        payload: Mapping[str, Any], dialect: str = "claude-code", **extra_env: str
    ) -> dict[str, Any] | None:
        return answer_json(run_hook(dialect, json.dumps(payload), env={**env, **extra_env}))

    return run


def spawn(
    payload: Mapping[str, Any] | bytes, env: Mapping[str, str], dialect: str = "claude-code"
) -> subprocess.CompletedProcess[bytes]:
    """Run ``antiloop hook <dialect>`` as Claude Code does: a new process, JSON on stdin."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [str(ANTILOOP), "hook", dialect],
        input=data,
        capture_output=True,
        env=dict(env),
        timeout=120,
        check=False,
    )


def spawned_json(proc: subprocess.CompletedProcess[bytes]) -> dict[str, Any] | None:
    """The JSON a hook process printed (None for nothing); it must have exited 0."""
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode().strip()
    return json.loads(out) if out else None
