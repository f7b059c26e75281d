"""PostgreSQL under faults, on a cluster the test starts itself: stopped, hung, killed.

initdb and postgres (found under /usr/lib/postgresql/*/bin) run a throw-away cluster on a free
port with trust auth; run as root, they run as the ``postgres`` user, as PostgreSQL requires.
The shared server on 5432 is never touched. A step counts as acknowledged when its verdict is
not the store-failure one; afterwards every acknowledged step must be in the store, none twice.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.stores.conftest import free_port
from tests.stores.faults import store_failed, tally

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action, Verdict

pytestmark = pytest.mark.postgres

CONFIG = GuardConfig(detectors=("repeat", "cycle"), embedder="ngram")


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: it is required)")
    pytest.skip(reason)


class Cluster:
    """A PostgreSQL cluster of the test's own: start, stop, kill, hang and resume."""

    def __init__(self) -> None:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
        if not found:
            _missing("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
        self.bin = found[-1].parent
        self.user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                _missing("running as root and there is no 'postgres' user to run PostgreSQL as")
        # not under pytest's tmp_path: its parents are 0700 root, closed to the postgres user
        self.root = Path(tempfile.mkdtemp(prefix="antiloop-pg-"))
        self.data = self.root / "data"
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "test"])

    def _run(self, argv: list[str]) -> None:
        subprocess.run(argv, check=True, capture_output=True, **self._as_user())

    def _as_user(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    @property
    def url(self) -> str:
        return f"postgresql://test@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start (or restart on the same data and port) and wait until it accepts a query."""
        import psycopg

        log = (self.root / "log").open("ab")
        self.process = subprocess.Popen(
            [
                str(self.bin / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "shared_buffers=16MB",
            ],
            stdout=log,
            stderr=log,
            **self._as_user(),
        )
        log.close()
        deadline = time.monotonic() + 60  # a start-up limit (recovery after a kill), not a test
        while True:
            if self.process.poll() is not None:
                raise AssertionError((self.root / "log").read_text()[-2000:])
            try:
                with psycopg.connect(self.url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise AssertionError("the test's PostgreSQL did not start") from None
                time.sleep(0.05)

    def pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer...)."""
        assert self.process is not None
        found = [self.process.pid]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                text = stat.read_text()
                if int(text.rpartition(")")[2].split()[1]) == self.process.pid:
                    found.append(int(stat.parent.name))
        return found

    def hang(self) -> None:
        """SIGSTOP the postmaster and its children: connections stay open, nothing answers."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        """A clean stop (SIGINT: fast shutdown)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        self.process.wait(60)

    def kill(self) -> None:
        """SIGKILL the postmaster and its children: a crash; recovery replays the WAL."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert self.process is not None
        self.process.wait(30)
        for pid in pids[1:]:  # the backends are the postmaster's children, not ours
            deadline = time.monotonic() + 10
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        self.kills += 1

    def destroy(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.resume()
            self.process.kill()
            self.process.wait(30)
            for pid in self.pids()[1:]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """One cluster for the module (initdb takes seconds); each test uses its own schema."""
    made = Cluster()
    made.start()
    yield made
    made.destroy()


@pytest.fixture
def url(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """The cluster's URL with a schema of the test's own; the cluster is up afterwards."""
    schema = f"faults_{abs(hash(request.node.nodeid)) % 10**9}"
    yield f"{cluster.url}?schema={schema}"
    if cluster.process is None or cluster.process.poll() is not None:
        cluster.start()
    cluster.resume()


def _step(n: int, session: str = "s", id: str | None = None) -> Step:
    return Step(tool="read", args={"path": f"f{n}"}, output=f"contents {n}", session=session, id=id)


def _outputs(url: str, session: str) -> Counter[str | None]:
    store = Guard(store=url).store
    try:
        return Counter(r.output for r in store.audit_records(session))
    finally:
        store.close()


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_a_stopped_server_follows_on_store_error_at_once(
    cluster: Cluster, url: str, policy: str
) -> None:
    """PostgreSQL shut down: the next step follows on_store_error quickly; then it resumes."""
    guard = Guard(store=url, config=CONFIG, audit=True, on_store_error=policy)
    assert guard.record(_step(0)).action is Action.CONTINUE
    cluster.stop()
    started = time.monotonic()
    verdicts = [guard.record(_step(1)), guard.record(_step(2))]
    took = time.monotonic() - started
    assert all(store_failed(v) for v in verdicts)
    assert all((v.action is Action.BLOCK) == (policy == "block") for v in verdicts)
    assert took < 2, f"two steps took {took:.1f} s on a stopped server"
    print(f"postgres stopped ({policy}): two steps answered in {took:.2f} s")
    cluster.start()
    assert guard.record(_step(3)).action is Action.CONTINUE
    assert guard.record(_step(3)).action is Action.STOP  # the state survived: a real repeat
    guard.store.close()


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_a_hung_server_costs_a_step_the_timeout_not_more(
    cluster: Cluster, url: str, policy: str
) -> None:
    """SIGSTOPped PostgreSQL (connections open, nothing answers): on_store_error after 1 s."""
    guard = Guard(store=f"{url}&timeout=1", config=CONFIG, audit=True, on_store_error=policy)
    assert guard.record(_step(0)).action is Action.CONTINUE
    cluster.hang()
    try:
        took = []
        verdicts = []
        for n in (1, 2):  # the open connection, then a new one to the hung postmaster
            started = time.monotonic()
            verdicts.append(guard.record(_step(n)))
            took.append(time.monotonic() - started)
    finally:
        cluster.resume()
    assert all(store_failed(v) for v in verdicts), [v.reason for v in verdicts]
    assert "no answer within timeout=1 s" in verdicts[0].reason
    assert all((v.action is Action.BLOCK) == (policy == "block") for v in verdicts)
    assert max(took) < 3.5, f"steps took {took} s on a hung server"
    print(f"postgres hung ({policy}): steps answered in {', '.join(f'{t:.2f}' for t in took)} s")
    assert guard.record(_step(3)).action is Action.CONTINUE
    guard.store.close()


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_killed_and_restarted_under_load_loses_and_doubles_nothing(
    cluster: Cluster, url: str, policy: str
) -> None:
    """Three guards write while PostgreSQL is SIGKILLed and restarted: acknowledged steps stay.

    Steps carry ids and a step is sent again until acknowledged (a commit whose answer was
    lost in the crash is then recognised, not counted twice); one session sends each step
    once, without an id.
    """
    verdicts: dict[str, list[tuple[int, Verdict]]] = {}
    guards: list[Guard] = []
    kills_before = cluster.kills
    done = threading.Event()

    def work(w: int) -> None:
        session = f"w{w}"
        guard = Guard(store=url, config=CONFIG, audit=True, on_store_error=policy)
        guards.append(guard)
        got = verdicts[session] = []
        n = -1
        while (n := n + 1) < 40 or cluster.kills - kills_before < 3:
            if w:
                step = _step(n, session, id=f"{session}-{n}")
                verdict = guard.record(step)
                while store_failed(verdict):
                    time.sleep(0.02)
                    verdict = guard.record(step)
            else:
                verdict = guard.record(_step(n, session))
                if store_failed(verdict):
                    time.sleep(0.02)
            got.append((n, verdict))

    def chaos() -> None:
        while not done.wait(0.3):
            cluster.kill()
            cluster.start()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(3)]
    killer = threading.Thread(target=chaos)
    for t in threads:
        t.start()
    killer.start()
    for t in threads:
        t.join()
    done.set()
    killer.join()
    for guard in guards:  # the server is up: every journaled step goes in, then no replay runs
        guard.replay_journal()
        replayer = guard.rider.replayer
        if replayer is not None:
            assert len(replayer) == 0
            replayer.close()
        guard.store.close()

    store = Guard(store=url).store
    counted = tally(store, verdicts, lambda session: _outputs(url, session))
    for session, got in verdicts.items():
        if session != "w0":  # retried until acknowledged: every step exactly once
            assert store.peek(session).steps == len(got)
    assert store.verify_audit() == []
    store.close()
    print(
        f"postgres kill/restart ({policy}): {counted.steps} steps, {counted.acknowledged} "
        f"acknowledged, {cluster.kills - kills_before} kills, lost {counted.lost}, "
        f"doubled {counted.doubled}"
    )
    assert (counted.lost, counted.doubled) == (0, 0)


def test_the_watchdog_fires_only_past_the_deadline_and_restarts_after_stop() -> None:
    """A block inside its deadline is left alone; one past it is shut; stop and reuse work."""
    from antiloop.stores.postgres import _Watchdog

    class Conn:
        class pgconn:  # psycopg's attribute name
            socket = -1  # no socket: shutting it is a no-op

    watchdog, conn = _Watchdog(0.2), Conn()
    with watchdog.watch(conn):
        time.sleep(0.05)
    assert (watchdog.fired, watchdog.shut) == (0, None)
    with watchdog.watch(conn):
        time.sleep(0.4)
    assert (watchdog.fired, watchdog.shut) == (1, conn)
    watchdog.stop()
    with watchdog.watch(conn):
        time.sleep(0.4)
    assert watchdog.fired == 2
    watchdog.stop()
    watchdog.stop()
    with watchdog.watch(conn):
        pass
    time.sleep(0.3)
    assert watchdog.fired == 2


@pytest.mark.parametrize("policy", ["allow", "block"])
@pytest.mark.parametrize("damage", ["garbage", "", "7 short"])
def test_a_damaged_audit_head_is_reported_and_later_steps_still_recorded(
    url: str, policy: str, damage: str
) -> None:
    """A head that is not 'seq hash' is a problem verify names; steps go on being recorded."""
    import psycopg

    guard = Guard(store=url, config=CONFIG, audit=True, on_store_error=policy)
    guard.record(_step(0))
    guard.record(_step(1))
    base, _, query = url.partition("?schema=")
    with psycopg.connect(base, autocommit=True, options=f"-c search_path={query}") as conn:
        conn.execute("UPDATE meta SET value = %s WHERE key = 'audit_head'", (damage,))
    if damage:
        assert [p.kind for p in guard.store.verify_audit()][:1] == ["head"]
    for n in (2, 3):
        verdict = guard.record(_step(n))
        assert not store_failed(verdict), verdict.reason
    assert [r.seq for r in guard.store.audit_records("s")] == [1, 2, 3, 4]
    assert guard.store.verify_audit() == []
    guard.store.close()
