"""Redis or PostgreSQL going away mid-run: ridden out within the window, else on_store_error
and the local journal, replayed once the store is back."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.cli import main
from antiloop.core.verdict import Action
from antiloop.outage import OutageConfig, deadline

from .conftest import Backend

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")
STEP = Step(tool="grep", args={"pattern": "needle"}, output="a.py:1: needle", session="s")


class Proxy:
    """A TCP forwarder to a server that a test can stop (the server "goes away") and restart."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):  # wakes the accept() of the other thread
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def proxied(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """(backend, proxy, URL through the proxy) for Redis and PostgreSQL."""
    backend = Backend(request.param, tmp_path)
    target = ("127.0.0.1", 6379 if backend.kind == "redis" else 5432)
    proxy = Proxy(target)
    proxy.start()
    url = backend.url.replace(f":{target[1]}/", f":{proxy.port}/")
    yield backend, proxy, url
    proxy.stop()
    backend.cleanup()


def _guard(url: str, policy: str = "allow", window: float = 0.0, **kw: Any) -> Guard:
    return Guard(
        store=url,
        config=CONFIG,
        on_store_error=policy,
        outage=OutageConfig(retry_window=window, backoff=0.02, max_backoff=0.2, **kw),
    )


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_server_gone_past_the_window_follows_policy_journals_then_replays(
    proxied: Any, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Past the window, allow goes on unguarded (logged) or block refuses this call; the step
    is journaled and, once the store is back, recorded before the next step, marked unguarded."""
    _, proxy, url = proxied
    guard = _guard(url, policy, window=0.3)
    assert guard.record(STEP).action is Action.CONTINUE
    proxy.stop()
    with caplog.at_level(logging.ERROR, logger="antiloop"):
        verdict = guard.record(STEP)
    assert f"on_store_error={policy}" in caplog.text
    if policy == "allow":
        assert verdict.action is Action.CONTINUE
        assert "unguarded" in verdict.reason
    else:
        assert (verdict.action, verdict.detector) == (Action.BLOCK, "store")
        assert "the session is not ended" in verdict.reason
    assert guard.rider.replayer is not None
    assert len(guard.rider.replayer) == 1
    proxy.start()
    back = guard.record(STEP)  # the journaled repeat went in first: the loop is caught now
    assert (back.action, back.detector) == (Action.STOP, "terminated")
    records = [r for r in guard.store.audit_records("s") if r.kind == "step"]
    assert [r.index for r in records[:2]] == [0, 1]
    replayed = records[1]
    assert replayed.detail["unguarded"] is True
    assert replayed.detail["judged"] == "stop"  # what the guard would have said
    assert replayed.action == ("continue" if policy == "allow" else "block")  # what it said
    assert not len(guard.rider.replayer)
    guard.store.close()


def test_a_restart_within_the_window_is_ridden_out(proxied: Any) -> None:
    """The store gone for a second: the step waits for it, is judged, nothing is unguarded."""
    _, proxy, url = proxied
    guard = _guard(url, window=10.0)
    assert guard.record(STEP).action is Action.CONTINUE
    proxy.stop()
    timer = threading.Timer(1.0, proxy.start)
    timer.start()
    try:
        verdict = guard.record(STEP)
    finally:
        timer.join()
    assert (verdict.action, verdict.detector) == (Action.STOP, "repeat")
    assert (
        guard.rider.replayer is None or guard.rider.replayer.journal.path is None
    )  # nothing journaled
    guard.store.close()


def test_block_refuses_one_call_and_the_session_goes_on(proxied: Any) -> None:
    """A blocked step does not end the session: once the store is back, steps continue."""
    _, proxy, url = proxied
    guard = _guard(url, "block")
    proxy.stop()
    first = guard.record(STEP)
    assert (first.action, first.detector) == (Action.BLOCK, "store")
    proxy.start()
    other = Step(tool="read", args={"path": "b"}, output="b", session="s")
    assert guard.record(other).action is Action.CONTINUE
    assert guard.ended("s") is None
    guard.store.close()


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:1/0", "postgresql://root@127.0.0.1:1/test?connect_timeout=2"]
)
@pytest.mark.parametrize("policy", ["allow", "block"])
def test_closed_port_follows_policy(url: str, policy: str, tmp_path: Path) -> None:
    """A store URL to a closed port: the guard opens, and each step follows on_store_error."""
    guard = _guard(url, policy, journal=str(tmp_path))
    verdict = guard.record(STEP)
    expected = Action.CONTINUE if policy == "allow" else Action.BLOCK
    assert verdict.action is expected
    files = list(tmp_path.glob("*/*.jsonl"))
    assert len(files) == 1
    assert files[0].stat().st_mode & 0o777 == 0o600
    guard.store.close()


def test_the_window_ends_before_the_requests_deadline() -> None:
    """A 10 s window inside a 1 s deadline gives up in time to answer by the policy."""
    guard = _guard("redis://127.0.0.1:1/0", window=10.0)
    started = time.monotonic()
    with deadline(1.0):
        verdict = guard.record(STEP)
    assert "unguarded" in verdict.reason
    assert time.monotonic() - started < 1.0  # the deadline, not a speed figure
    guard.store.close()


def test_a_full_journal_refuses_the_call_even_under_allow(tmp_path: Path) -> None:
    """Nothing answered goes unrecorded: a step the journal cannot take is refused."""
    guard = _guard("redis://127.0.0.1:1/0", journal=str(tmp_path), journal_max_bytes=4096)
    big = Step(tool="grep", args={"pattern": "x"}, output="y" * 5000, session="s")
    verdict = guard.record(big)
    assert (verdict.action, verdict.detector) == (Action.BLOCK, "store")
    assert "full" in verdict.reason
    guard.store.close()


def test_a_dead_processes_journal_is_adopted_and_replayed_once(
    proxied: Any, tmp_path: Path
) -> None:
    """A journal left by a process that ended is replayed by the next guard of that store, in
    the order answered; replaying an entry twice records it once (by step id)."""
    _, proxy, url = proxied
    proxy.stop()
    script = (
        "import sys; from antiloop import Guard, GuardConfig, Step\n"
        "from antiloop.outage import OutageConfig\n"
        "g = Guard(store=sys.argv[1], config=GuardConfig(detectors=('repeat',), embedder='ngram'),"
        " outage=OutageConfig(retry_window=0, journal=sys.argv[2]))\n"
        "for n in range(3):\n"
        "    g.record(Step(tool='read', args={'path': f'f{n}'}, output='x', session='d'))\n"
    )
    subprocess.run([sys.executable, "-c", script, url, str(tmp_path)], check=True, timeout=120)
    proxy.start()
    guard = _guard(url, journal=str(tmp_path))
    assert guard.replay_journal() == 3
    records = [r for r in guard.store.audit_records("d") if r.kind == "step"]
    assert [json.loads(r.args or "{}")["path"] for r in records] == ["f0", "f1", "f2"]
    assert all(r.detail["unguarded"] for r in records)
    assert not list(tmp_path.glob("*/*.jsonl"))  # all replayed: no journal left
    entry = {
        "id": "again-1",
        "at": 1.0,
        "step": {"session": "d", "tool": "read", "args": {"path": "f9"}, "output": "x"},
        "answered": {"action": "continue"},
    }
    guard._put_journaled(entry)
    guard._put_journaled(entry)  # a replay cut off before its "done" line: replayed again
    paths = [json.loads(r.args or "{}")["path"] for r in guard.store.audit_records("d")]
    assert paths.count("f9") == 1
    guard.store.close()


def test_the_log_marks_the_unguarded_window(proxied: Any, capsys: Any) -> None:
    """``antiloop log SESSION`` shows a replayed step as unguarded, with the guard's verdict."""
    _, proxy, url = proxied
    guard = _guard(url)
    guard.record(STEP)
    proxy.stop()
    guard.record(STEP)
    proxy.start()
    guard.replay_journal()
    assert main(["log", "s", "--store", url, "--color", "never"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "grep" in line]
    assert "unguarded" not in lines[0]
    assert "continue (unguarded)" in lines[1]
    assert "the guard's verdict then: stop" in lines[1]
    guard.store.close()


def _hook(url: str, journal: Path, n: int) -> subprocess.CompletedProcess[bytes]:
    """``antiloop hook claude-code`` in a process of its own, a PostToolUse of ``Read f<n>``."""
    payload = {
        "session_id": "hooked",
        "cwd": "/workspace",
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": f"/workspace/f{n}"},
        "tool_response": {"content": f"line {n}"},
        "tool_use_id": f"use-{n}",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "CLAUDE_"))}
    env |= {
        "ANTILOOP_STORE": url,
        "ANTILOOP_JOURNAL": str(journal),
        "ANTILOOP_RETRY_WINDOW": "0",
        "ANTILOOP_HOOKD": "0",
    }
    return subprocess.run(
        [sys.executable, "-m", "antiloop", "hook", "claude-code"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_hook_process_journals_and_the_next_one_replays(proxied: Any, tmp_path: Path) -> None:
    """A hook answered while the store is down journals its step and exits; the next hook
    process adopts that journal and records the step, marked unguarded, before its own."""
    backend, proxy, url = proxied
    proxy.stop()
    first = _hook(url, tmp_path, 1)
    assert first.returncode == 0
    assert b"not checked" in first.stdout + first.stderr  # the agent is told, as before
    assert len(list(tmp_path.glob("*/*.jsonl"))) == 1
    proxy.start()
    assert _hook(url, tmp_path, 2).returncode == 0
    store = backend.open()
    records = [r for r in store.audit_records("hooked") if r.kind == "step"]
    assert ["f1" in (r.args or "") for r in records] == [True, False]
    assert records[0].detail["unguarded"] is True
    assert not records[1].detail.get("unguarded")
    assert not list(tmp_path.glob("*/*.jsonl"))
