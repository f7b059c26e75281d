"""The native hook client, ``antiloop-hook``: the daemon's answers, or the Python client's.

``make`` builds it beside the venv's ``antiloop`` (``python -m antiloop.hooks.native``); the
tests build it there again when the source is newer, so they test this source (the client's
directory names its daemon, so it must be the venv's), and skip without a C compiler (fail
under ``CI=true``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.payloads import ClaudeSession
from tests.hooks.test_daemon import STARTED, fake_daemon, start_daemon, wait_for

from antiloop._hook_client import socket_path
from antiloop.hooks import native
from antiloop.stores import open_store

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def client() -> Path:
    """``antiloop-hook`` beside this venv's ``antiloop``, built from this source."""
    target = BIN / "antiloop-hook"
    if target.is_file() and target.stat().st_mtime >= native.SOURCE.stat().st_mtime:
        return target
    if native.compiler() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no C compiler for the native hook client")
        pytest.skip("no C compiler for the native hook client")
    built = native.build(target)
    assert built is not None
    return built


@pytest.fixture
def beside(client: Path, tmp_path: Path) -> Path:
    """A copy of the client alone in a directory: no ``antiloop`` beside it."""
    home = tmp_path / "bin"
    home.mkdir()
    shutil.copy2(client, home / "antiloop-hook")
    return home / "antiloop-hook"


@pytest.fixture
def nenv(env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """The daemon on, its socket in this test's directory; stopped after."""
    run = tmp_path / "run"
    out = {**env, "ANTILOOP_HOOKD": "1", "ANTILOOP_HOOKD_DIR": str(run)}
    yield out
    for sock in run.glob("*.sock") if run.is_dir() else ():
        sock.unlink()
    while STARTED:
        STARTED.pop().wait(15)


def hook(
    exe: Path, payload: dict[str, Any] | bytes, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [str(exe), "claude-code", *args],
        input=data,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_client_is_answered_by_the_daemon_as_the_python_client_is(
    client: Path, nenv: dict[str, str], tmp_path: Path
) -> None:
    """Through the daemon: the same answers, in order, as a hook process judging them."""
    exe = client
    start_daemon(nenv)
    s, t = ClaudeSession("native", cwd=str(tmp_path)), ClaudeSession("py", cwd=str(tmp_path))
    answers = []
    for session, run_env in ((s, nenv), (t, {**nenv, "ANTILOOP_HOOKD": "0"})):
        script = [
            session.pre("Read", {"file_path": "/a"}),
            session.read("/a", "x\n"),
            session.read("/a", "x\n"),
            session.pre("Read", {"file_path": "/a"}),
        ]
        out = []
        for payload in script:
            proc = hook(exe, payload, run_env)
            assert proc.returncode == 0, proc.stderr
            text = proc.stdout.decode().replace(session.session, "S")
            out.append(json.loads(text) if text.strip() else None)
        answers.append(out)
    assert answers[0] == answers[1]
    assert answers[0][2]["decision"] == "block"


def test_without_a_daemon_the_python_client_answers_and_starts_one(
    client: Path, nenv: dict[str, str], tmp_path: Path
) -> None:
    exe = client
    s = ClaudeSession("first", cwd=str(tmp_path))
    proc = hook(exe, s.read("/a", "x\n"), nenv)
    assert (proc.returncode, proc.stdout) == (0, b""), proc.stderr
    wait_for(lambda: Path(socket_path(nenv)).exists(), 60)
    second = hook(exe, s.read("/a", "x\n"), nenv)
    assert json.loads(second.stdout)["decision"] == "block"


@pytest.mark.parametrize("reply", [b"", b"garbage\n"])
def test_a_daemon_that_fails_an_event_has_it_judged_once_by_the_python_client(
    client: Path, nenv: dict[str, str], tmp_path: Path, reply: bytes
) -> None:
    """No answer (or none that can be read): the socket is taken away, the event handed to
    the Python client with the reason, judged there; the step id keeps it counted once."""
    exe = client
    s = ClaudeSession("dropped", cwd=str(tmp_path))
    first = s.read(str(tmp_path / "a.py"), "x\n")
    assert hook(exe, first, {**nenv, "ANTILOOP_HOOKD": "0"}).stdout == b""
    with fake_daemon(nenv, lambda request: reply) as seen:
        proc = hook(exe, first, nenv)  # the same event again
    assert len(seen) == 1
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"", proc.stdout  # recorded already: not a repeat of itself
    assert b"judged in the hook's own process" in proc.stderr
    assert not Path(socket_path(nenv)).exists()
    store = open_store(nenv["ANTILOOP_STORE"])
    try:
        assert store.peek("dropped").steps == 1
    finally:
        store.close()


def test_a_client_without_its_python_client_says_so_and_fails_as_told(
    beside: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Alone in its directory (no ``antiloop`` beside it): a message, the call goes on;
    ``--fail closed`` blocks (exit 2)."""
    s = ClaudeSession("alone", cwd=str(tmp_path))
    proc = hook(beside, s.pre("Read", {"file_path": "/a"}), env)
    assert proc.returncode == 0
    assert "nothing was checked" in json.loads(proc.stdout)["systemMessage"]
    assert b"cannot run" in proc.stderr
    closed = hook(beside, s.pre("Read", {"file_path": "/a"}), env, "--fail", "closed")
    assert closed.returncode == 2
    assert b"ANTILOOP_FAIL=closed" in closed.stderr


def test_unknown_arguments_go_to_the_python_client(client: Path, env: dict[str, str]) -> None:
    """Anything but AGENT [--config F] [--fail M] is the Python client's to answer."""
    exe = client
    proc = subprocess.run(
        [str(exe), "claude-code", "--bogus"], capture_output=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 2
    assert b"--bogus" in proc.stderr
