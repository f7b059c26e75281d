"""A fleet of agents on one SQLite store: hook processes through the daemon and in-process.

``run_fleet`` starts ``daemon_agents + local_agents`` agents, each a thread that runs its
PostToolUse events one after another as fresh ``antiloop hook claude-code`` processes, as
Claude Code does: the daemon agents with the hook daemon on (the first event starts it), the
local ones with ``ANTILOOP_HOOKD=0``. Every event reads a file of its own, so every verdict is
``continue`` and the hook prints nothing: an event is *acknowledged* when its process exits 0
with empty stdout and stderr (anything else says the step was not checked). A killer thread
may SIGKILL each daemon once it has run ``kill_every`` seconds (at most ``max_kills`` times);
the next hook then answers itself and starts a new one. With ``min_kills`` the daemon agents go
on past ``steps`` until that many kills happened (or ``KILL_DEADLINE`` passed), so a slow
machine, where a daemon takes long to start, still sees its kills.

Afterwards the audit log must hold a ``step`` record of every acknowledged event, and SQLite's
``PRAGMA integrity_check`` must say ``ok``. Used by ``tests/hooks/test_durability.py`` and by
``python -m bench durability``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from antiloop._hook_client import socket_path

ANTILOOP = Path(sys.executable).with_name("antiloop")
HOOK_TIMEOUT = 60.0
KILL_DEADLINE = 120.0  # seconds the daemon agents go on waiting for ``min_kills``


@dataclass
class FleetResult:
    """What a fleet run found."""

    agents: int
    sent: int = 0
    acknowledged: int = 0
    kills: int = 0
    daemon_seen: int = 0  # samples (4 a second) that found a daemon running
    lost: list[str] = field(default_factory=list)  # acknowledged, yet no step record
    integrity: list[str] = field(default_factory=list)  # PRAGMA integrity_check's lines
    unacknowledged: Counter[str] = field(default_factory=Counter)  # first line of each answer
    seconds: float = 0.0


def fleet_env(tmp: Path, fail: str, pythonpath: str | None = None) -> dict[str, str]:
    """The environment of every agent: a store and a socket directory under ``tmp``.

    ``pythonpath`` makes the hooks run another antiloop's source (``bench/durability.py``
    measures the code before the fix with it).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "CLAUDE_"))}
    for kept in ("ANTILOOP_JOURNAL", "ANTILOOP_RETRY_WINDOW"):  # the run's own (tests/conftest.py)
        if kept in os.environ:
            env[kept] = os.environ[kept]
    env.update(
        {
            "ANTILOOP_STORE": f"sqlite:///{tmp / 'store' / 'antiloop.db'}",
            "ANTILOOP_HOOKD_DIR": str(tmp / "run"),
            "ANTILOOP_FAIL": fail,
            "ANTILOOP_HOOK_DEADLINE": "20",
            # Bytecode cached, as in an installation (and not in the source tree).
            "PYTHONPYCACHEPREFIX": str(tmp / "pycache"),
        }
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def _socket_of(env: dict[str, str]) -> str:
    """The daemon's socket as the hooks of ``env`` compute it (it depends on their source)."""
    if "PYTHONPATH" not in env:
        return socket_path(env)
    code = (
        "import os; from antiloop._hook_client import socket_path; print(socket_path(os.environ))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        env=env,
        text=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.strip()


def _event(agent: int, step: int, cwd: str) -> tuple[str, bytes]:
    path = f"{cwd}/agent{agent}/file{step}.py"
    payload = {
        "session_id": f"fleet-{agent}",
        "transcript_path": None,
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": path},
        "tool_response": {"type": "text", "file": {"filePath": path, "content": f"{step}\n"}},
        "tool_use_id": f"toolu-{agent}-{step}",
    }
    return path, json.dumps(payload).encode()


def daemon_pids(socket: str) -> list[int]:
    """The hook daemons answering on ``socket`` (found by their command line)."""
    found = []
    wanted = ["-m", "antiloop.hooks.daemon", "--socket", socket]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = [os.fsdecode(a) for a in argv]
        if any(text[i : i + 4] == wanted for i in range(len(text))):
            found.append(int(entry.name))
    return found


def _kill_all(socket: str) -> int:
    killed = 0
    for pid in daemon_pids(socket):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def run_fleet(
    tmp: Path,
    *,
    daemon_agents: int = 12,
    local_agents: int = 4,
    steps: int = 20,
    local_steps: int | None = None,
    kill_every: float | None = None,
    max_kills: int | None = None,
    min_kills: int = 0,
    fail: str = "open",
    pythonpath: str | None = None,
) -> FleetResult:
    """Run the fleet in ``tmp``; see the module's docstring."""
    env = fleet_env(tmp, fail, pythonpath)
    (tmp / "work").mkdir(parents=True, exist_ok=True)
    cwd = str(tmp / "work")
    socket = _socket_of(env)
    if len(os.fsencode(socket)) > 100:  # the hook would never use the daemon
        raise ValueError(f"the daemon's socket path is too long: {socket}")
    result = FleetResult(agents=daemon_agents + local_agents)
    acknowledged: dict[str, str] = {}  # path -> session
    lock = threading.Lock()
    done = threading.Event()

    started = time.monotonic()

    def more(step: int, count: int, through_daemon: bool) -> bool:
        if step < count:
            return True
        waiting = through_daemon and result.kills < min_kills
        return waiting and time.monotonic() - started < KILL_DEADLINE

    def agent(number: int, through_daemon: bool, count: int) -> None:
        agent_env = {**env, "ANTILOOP_HOOKD": "1" if through_daemon else "0"}
        step = 0
        while more(step, count, through_daemon):
            path, data = _event(number, step, cwd)
            proc = subprocess.run(
                [str(ANTILOOP), "hook", "claude-code"],
                input=data,
                capture_output=True,
                env=agent_env,
                cwd=cwd,
                timeout=HOOK_TIMEOUT,
                check=False,
            )
            answer = (proc.stdout + proc.stderr).decode("utf-8", "replace").strip()
            with lock:
                result.sent += 1
                if proc.returncode == 0 and not answer:
                    acknowledged[path] = f"fleet-{number}"
                else:
                    first = answer.splitlines()[0] if answer else f"exit {proc.returncode}"
                    result.unacknowledged[first[:160]] += 1
            step += 1

    def killer(every: float) -> None:
        first_seen: dict[int, float] = {}
        while not done.wait(0.05) and (max_kills is None or result.kills < max_kills):
            now = time.monotonic()
            for pid in daemon_pids(socket):
                if now - first_seen.setdefault(pid, now) >= every:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                        result.kills += 1

    def watcher() -> None:
        while not done.wait(0.25):
            result.daemon_seen += bool(daemon_pids(socket))

    workers = [
        threading.Thread(target=agent, args=(n, True, steps)) for n in range(daemon_agents)
    ] + [
        threading.Thread(target=agent, args=(daemon_agents + n, False, local_steps or steps))
        for n in range(local_agents)
    ]
    helpers = [threading.Thread(target=watcher)]
    if kill_every is not None:
        helpers.append(threading.Thread(target=killer, args=(kill_every,)))
    for helper in helpers:
        helper.start()
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        done.set()
        for helper in helpers:
            helper.join()
        stop_daemons(socket)
    result.seconds = time.monotonic() - started
    result.acknowledged = len(acknowledged)
    db = tmp / "store" / "antiloop.db"
    recorded = _recorded_steps(db)
    result.lost = sorted(p for p, s in acknowledged.items() if (s, p) not in recorded)
    result.integrity = integrity(db)
    return result


def stop_daemons(socket: str) -> None:
    """Remove the socket (a daemon then exits within a second); kill what is still there."""
    Path(socket).unlink(missing_ok=True)
    deadline = time.monotonic() + 10
    while daemon_pids(socket) and time.monotonic() < deadline:
        time.sleep(0.1)
    _kill_all(socket)


def _recorded_steps(db: Path) -> set[tuple[str, str]]:
    """(session, file path) of every ``step`` record in the audit log."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT body FROM audit WHERE kind = 'step'").fetchall()
    found = set()
    for (body,) in rows:
        record = json.loads(body)
        args = json.loads(record.get("args") or "{}")
        found.add((record["session"], args.get("file_path", "")))
    return found


def integrity(db: Path) -> list[str]:
    """The lines of ``PRAGMA integrity_check`` (``["ok"]`` for a sound file)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute("PRAGMA integrity_check").fetchall()]
