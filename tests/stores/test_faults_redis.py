"""Redis under faults, on a Redis of the test's own: lost replies, SIGKILL and restart, a hang.

The Redis runs with an append-only file (``appendfsync always``) in the test's tmp directory
on a free port; the shared Redis on 6379 is never touched. A step counts as acknowledged when
its verdict is not the store-failure one; afterwards every acknowledged step must be in the
store (its audit record and the step count), none twice, and no session stopped by a loop
that only a counted-twice step made.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.stores.conftest import free_port
from tests.stores.faults import store_failed, tally

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action, Verdict
from antiloop.outage import OutageConfig

pytestmark = pytest.mark.redis

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")
NO_JOURNAL = OutageConfig(retry_window=0, journal="")
COMMIT_MARK = b"'locked'"  # a word only the commit script carries


class RedisServer:
    """A redis-server of the test's own, with an append-only file, that can be killed."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            if os.environ.get("CI") == "true":
                pytest.fail("redis-server is not installed (CI=true: it is required)")
            pytest.skip("redis-server is not installed")
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.bind = ["127.0.0.1"]  # more addresses: a namespace's veth (test_fleet_partition)

    def start(self) -> None:
        """Start (or restart, on the same files and port) and wait until it answers.

        free_port() lets the port go before redis-server binds it: when another process took
        it in between, the first start fails (or another server answers), so it moves to a
        fresh port and tries again; a restart keeps its port.
        """
        attempts = 4 if self.process is None else 1
        for attempt in range(attempts):
            if self._started():
                return
            assert self.process is not None
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            if attempt + 1 < attempts:
                self.port = free_port()
        raise AssertionError(f"redis-server on port {self.port} did not start")

    def _repair_torn_tail(self) -> None:
        """Cut a transaction the kill tore off the append-only file, as a fixed server does.

        A SIGKILL can cut the file's last write short. Redis 7.0 then truncates it inside the
        script's MULTI block and appends after it, so the next restart applies the torn half
        (valkey-io/valkey#4342): here an audit record without its state. ``redis-check-aof
        --fix`` truncates before the MULTI; a file that is whole is left as it is.
        """
        manifest = self.directory / "appendonlydir" / "appendonly.aof.manifest"
        checker = shutil.which("redis-check-aof")
        if checker is None or not manifest.exists():
            return
        subprocess.run(
            [checker, "--fix", str(manifest)],
            input=b"y\n",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )

    def _started(self) -> bool:
        self._repair_torn_tail()
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                *self.bind,
                # the other addresses are a test namespace's own: let its replicas in
                *(("--protected-mode", "no") if len(self.bind) > 1 else ()),
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20  # a start-up limit, not a timed assertion
        while not self._ours():
            if self.process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _ours(self) -> bool:
        """Whether the server on the port answers, and is this one (its process id)."""
        assert self.process is not None
        want = f"process_id:{self.process.pid}\r\n".encode()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"INFO server\r\n")
                got = b""
                while b"process_id:" not in got or not got.endswith(b"\r\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
                return want in got
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save; only what the append-only file holds stays."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.kills += 1

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()

    def url(self, port: int | None = None, **options: Any) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"prefix": "faults", **options}.items())
        return f"redis://127.0.0.1:{port or self.port}/0?{query}"


class ReplyDropper:
    """A TCP proxy in front of Redis that loses the reply to some commits.

    Every ``every``-th commit script goes through to Redis, which runs it; its reply is
    thrown away and the client's connection closed (``close``), or the reply is held back
    until the client gives up (``swallow``), as a network that fails at the worst moment.
    """

    def __init__(self, target: int, every: int, mode: str = "close") -> None:
        self.target = target
        self.every = every
        self.mode = mode
        self.commits = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            drop = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, drop), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, drop), daemon=True).start()

    def _up(self, src: socket.socket, dst: socket.socket, drop: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 20):
                if COMMIT_MARK in data:
                    with self._lock:
                        self.commits += 1
                        if self.commits % self.every == 0:
                            self.dropped += 1
                            drop.set()
                dst.sendall(data)
        _shut(src, dst)

    def _down(self, src: socket.socket, dst: socket.socket, drop: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 20):
                if drop.is_set():
                    if self.mode == "swallow":
                        continue  # held back: the client waits for its socket timeout
                    break  # the reply is lost with the connection
                dst.sendall(data)
        _shut(src, dst)


def _shut(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()


def _step(n: int, session: str = "s", id: str | None = None) -> Step:
    ids = {"id": id} if id is not None else {}
    return Step(tool="read", args={"path": f"f{n}"}, output=f"contents {n}", session=session, **ids)


@pytest.mark.parametrize("mode", ["close", "swallow"])
def test_a_lost_commit_reply_is_not_judged_twice(redis_server: RedisServer, mode: str) -> None:
    """redis-py sends a commit again when its reply is lost: the step still counts once.

    Before step ids the second run judged the step on the state the first had saved, and a
    session of distinct reads stopped with "read 'f2' ran twice in a row".
    """
    proxy = ReplyDropper(redis_server.port, every=3, mode=mode)
    guard = Guard(store=redis_server.url(proxy.port, timeout=0.5), config=CONFIG, audit=True)
    verdicts = [guard.record(_step(n)) for n in range(12)]
    proxy.close()
    assert proxy.dropped >= 3
    stops = [v.reason for v in verdicts if v.action >= Action.BLOCK]
    assert stops == []
    store = Guard(store=redis_server.url()).store
    state = store.peek("s")
    assert state is not None
    acknowledged = [n for n, v in enumerate(verdicts) if not store_failed(v)]
    paths = Counter(r.output for r in store.audit_records("s"))
    assert all(paths[f"contents {n}"] == 1 for n in acknowledged), paths
    assert max(paths.values()) == 1
    assert state.steps == sum(paths.values())
    assert store.verify_audit() == []
    print(
        f"redis lost replies ({mode}): 12 steps, {proxy.dropped} commit replies lost, "
        f"{len(acknowledged)} acknowledged, counted {state.steps}, false stops 0"
    )


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_killed_and_restarted_under_load_loses_and_doubles_nothing(
    redis_server: RedisServer, policy: str
) -> None:
    """Four guards write while Redis is SIGKILLed and restarted: acknowledged steps all stay.

    Half the sessions give their steps ids and send a step again until it is acknowledged
    (as a host retrying a hook); the other half send each step once with no id (the guard
    gives it one of its own).
    """
    workers, per_worker = 4, 100
    verdicts: dict[str, list[tuple[int, Verdict]]] = {}
    done = threading.Event()

    def work(w: int) -> None:
        session = f"w{w}"
        guard = Guard(
            store=redis_server.url(timeout=1),
            config=CONFIG,
            audit=True,
            on_store_error=policy,
            outage=NO_JOURNAL,  # the store's own durability; the journal's is test_outage*.py
        )
        got = verdicts[session] = []
        n = -1
        while (n := n + 1) < per_worker or redis_server.kills < 4:
            if w % 2:
                step = _step(n, session, id=f"{session}-{n}")
                verdict = guard.record(step)
                while store_failed(verdict):
                    time.sleep(0.01)
                    verdict = guard.record(step)
            else:
                verdict = guard.record(_step(n, session))
            got.append((n, verdict))
            time.sleep(0.002)

    def chaos() -> None:
        while not done.wait(0.2):
            redis_server.kill()
            time.sleep(0.05)
            redis_server.start()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    killer = threading.Thread(target=chaos)
    for t in threads:
        t.start()
    killer.start()
    for t in threads:
        t.join()
    done.set()
    killer.join()
    redis_server.kill()  # one more: what is on disk is what counts
    redis_server.start()
    assert redis_server.kills >= 5

    store = Guard(store=redis_server.url()).store
    counted = tally(
        store, verdicts, lambda session: Counter(r.output for r in store.audit_records(session))
    )
    for session in ("w1", "w3"):  # retried until acknowledged: every step exactly once
        assert store.peek(session).steps == len(verdicts[session])
    assert store.verify_audit() == []
    print(
        f"redis kill/restart ({policy}): {counted.steps} steps, {counted.acknowledged} "
        f"acknowledged, {redis_server.kills} kills, lost {counted.lost}, doubled {counted.doubled}"
    )
    assert (counted.lost, counted.doubled) == (0, 0)


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_a_hung_redis_answers_within_the_store_timeout(
    redis_server: RedisServer, policy: str
) -> None:
    """SIGSTOPped Redis: a step follows on_store_error after the socket timeout, not 10 s."""
    guard = Guard(store=redis_server.url(), config=CONFIG, audit=True, on_store_error=policy)
    assert guard.record(_step(0)).action is Action.CONTINUE
    redis_server.signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        verdict = guard.record(_step(1))
        took = time.monotonic() - started
    finally:
        redis_server.signal(signal.SIGCONT)
    assert store_failed(verdict)
    assert (verdict.action is Action.BLOCK) == (policy == "block")
    assert took < 4, f"a step took {took:.1f} s on a hung Redis"
    print(f"redis hung ({policy}): the step answered in {took:.2f} s")
    assert guard.record(_step(2)).action is Action.CONTINUE  # back, and nothing doubled


def test_three_serve_replicas_over_a_restarting_redis_stop_no_session(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """40 sessions of distinct reads through three `antiloop serve` replicas; Redis restarts.

    The issue's case: a reply lost in the restart made a replica judge a step twice and stop
    a session with a loop it never had. Every acknowledged step is in Redis, once.
    """
    import json
    import urllib.error
    import urllib.request

    from tests.server.conftest import TOKEN, start_server, stop_server

    replicas = [start_server(tmp_path, "--store", redis_server.url()) for _ in range(3)]
    sessions, per_session = 40, 12
    verdicts: list[tuple[str, int, dict[str, Any]]] = []
    lock = threading.Lock()

    def post(url: str, step: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310 - plain HTTP to the loopback replicas
            f"{url}/v1/steps",
            data=json.dumps(step).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as exc:  # recorded: the test names the status
            return {"action": f"HTTP {exc.code}", "reason": exc.read().decode()}

    def work(w: int) -> None:
        for n in range(per_session):
            for s in range(w, sessions, 4):
                step = {
                    "session": f"r{s}",
                    "tool": "Read",
                    "args": {"path": f"f{n}"},
                    "output": f"contents {n}",
                }
                answer = post(replicas[(s + n) % 3].url, step)
                with lock:
                    verdicts.append((f"r{s}", n, answer))
                time.sleep(0.02)  # a paced load: the outage falls in its middle

    try:
        threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.8)
        redis_server.kill()
        time.sleep(1.0)  # down for a second, as in the issue
        redis_server.start()
        for t in threads:
            t.join()
    finally:
        for replica in replicas:
            stop_server(replica)
    stopped = [(s, n, v["reason"]) for s, n, v in verdicts if v["action"] != "continue"]
    assert stopped == []
    store = Guard(store=redis_server.url()).store
    lost = doubled = 0
    for s in range(sessions):
        outputs = Counter(r.output for r in store.audit_records(f"r{s}"))
        for session, n, verdict in verdicts:
            if session == f"r{s}":
                if not verdict["reason"].startswith("unguarded"):
                    lost += outputs[f"contents {n}"] == 0
                doubled += outputs[f"contents {n}"] > 1
    assert (lost, doubled) == (0, 0)
    assert len(verdicts) == sessions * per_session
    unguarded = sum(v["reason"].startswith("unguarded") for _, _, v in verdicts)
    assert unguarded  # it was down
    print(
        f"redis 3 replicas: {len(verdicts)} steps, {sessions} sessions, {unguarded} unguarded "
        f"while down, stopped 0, lost {lost}, doubled {doubled}"
    )
