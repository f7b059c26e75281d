"""The terminal channel under a pseudo-terminal: y, y -N, n, feedback, q; no terminal refuses."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from antiloop.approval import parse_reply

CHILD = r"""
import fcntl, json, sys, termios
if sys.argv[3] == "tty":
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
from antiloop import Guard, GuardConfig
from antiloop.approval import Approvals, TerminalChannel
guard = Guard(config=GuardConfig(embedder="ngram"))
approvals = Approvals(guard.store, channels=[TerminalChannel(user="tty-user")])
guard.approvals = approvals
out = []
for i in range(int(sys.argv[2])):
    gate = guard.gate("Bash", {"command": f"make step{i}"}, session="s")
    request = gate.request
    out.append({
        "action": gate.verdict.action.name,
        "hint": gate.verdict.hint,
        "by": request.decided_by if request else None,
        "status": str(request.status) if request else None,
    })
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


def _read_until(fd: int, marker: bytes, limit: float = 30.0) -> bytes:
    """Read the terminal until the marker shows (a safety limit, not a timing assertion)."""
    seen = b""
    end = time.monotonic() + limit
    while marker not in seen:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {marker!r} on the terminal; saw {seen[-500:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.slow
def test_terminal_replies_under_a_pty(tmp_path: Path):
    """Typed replies approve, approve the next N, deny, send feedback and stop the run."""
    result = tmp_path / "out.json"
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(result), "9", "tty"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    try:
        screens = []
        for reply in ["y", "y -3", "n", "try the staging config", "q"]:
            screens.append(_read_until(master, b"feedback for the agent): "))
            os.write(master, reply.encode() + b"\n")
        _read_until(master, b"antiloop: denied")
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    assert b"make step0" in screens[0]
    assert b"[exec]" in screens[0]
    out = json.loads(result.read_text())
    actions = [o["action"] for o in out]
    assert actions == ["CONTINUE"] * 5 + ["BLOCK", "BLOCK", "BLOCK", "STOP"]
    assert out[0]["by"] == "tty-user"
    assert [o["by"] for o in out[2:5]] == ["tty-user (approve next)"] * 3
    assert out[5]["status"] == "denied"
    assert out[6]["hint"] == "A person says: try the staging config"
    assert out[7]["hint"] == "A person says: The person stopped the run."
    assert out[8]["hint"].startswith("A person (tty-user) stopped this run")


@pytest.mark.slow
def test_no_terminal_refuses_cleanly(tmp_path: Path):
    """Without a controlling terminal the channel refuses and the call is denied, not run."""
    result = tmp_path / "out.json"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(result), "1", "none"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        start_new_session=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    out = json.loads(result.read_text())
    assert out[0]["action"] == "BLOCK"
    assert out[0]["by"] == "antiloop"
    assert b"no terminal to ask on" in child.stderr


def test_parse_reply():
    """Each typed line means its answer; an empty line means nothing."""
    assert parse_reply("") is None
    assert parse_reply("Y").status == "approved"
    assert parse_reply("yes -12").approve_next == 12
    assert parse_reply("n").status == "denied"
    assert parse_reply("q").stop
    assert parse_reply("nope, read the docs").comment == "nope, read the docs"


ATTACK_CHILD = r"""
import fcntl, sys, termios
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
from antiloop import Guard, GuardConfig
from antiloop.approval import Approvals, TerminalChannel
guard = Guard(config=GuardConfig(embedder="ngram"))
approvals = Approvals(guard.store, channels=[TerminalChannel(user="tty-user")])
guard.approvals = approvals
command = "rm -rf ~/important \r\x1b[2K  command: ls -la \x07\x1b]0;title\x07"
gate = guard.gate("Bash\x1b[31m", {"command": command}, session="s\x1b[2J")
print("RESULT", gate.verdict.action.name)
"""


@pytest.mark.slow
def test_control_characters_in_the_call_cannot_disguise_the_prompt():
    """ESC, CR and BEL in the proposed call reach the terminal written out, not obeyed."""
    master, slave = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", ATTACK_CHILD],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    try:
        screen = _read_until(master, b"feedback for the agent): ")
        os.write(master, b"n\n")
        screen += _read_until(master, b"RESULT")
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
        os.close(master)
    assert b"\x1b" not in screen
    assert b"\x07" not in screen
    assert b"\r\x1b" not in screen
    shown = b"rm -rf ~/important \\r\\x1b[2K  command: ls -la \\x07\\x1b]0;title\\x07"
    assert shown in screen
    assert b"tool: Bash\\x1b[31m" in screen
    assert b"session s\\x1b[2J" in screen
