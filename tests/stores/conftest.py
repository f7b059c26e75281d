"""Store fixtures: every backend behind one parametrised fixture, and the contract suite.

Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432, database ``test``, user root or
postgres, trust auth) are the real servers: absent, their tests skip with the reason; absent
under ``CI=true``, they fail. Each test gets its own Redis key prefix and PostgreSQL schema.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from antiloop.stores import open_store
from antiloop.stores.memory import MemoryStore

pytest.register_assert_rewrite("tests.stores.contract")

REDIS = ("127.0.0.1", 6379)
POSTGRES = ("127.0.0.1", 5432)
PARAMS = [
    "memory",
    "sqlite",
    pytest.param("redis", marks=pytest.mark.redis),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("split", marks=[pytest.mark.redis, pytest.mark.postgres]),
    pytest.param("cluster", marks=pytest.mark.redis),
]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect contract.py (the contract suite) like a test module."""
    if file_path.name == "contract.py":
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def _listening(addr: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(addr, timeout=1):
            return True
    except OSError:
        return False


def need_server(name: str, addr: tuple[str, int]) -> None:
    """Skip (or fail under CI=true) when the server is not listening."""
    if _listening(addr):
        return
    reason = f"{name} is not listening on {addr[0]}:{addr[1]}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the real server is required)")
    pytest.skip(reason)


def postgres_base() -> str:
    """A PostgreSQL URL that connects (root, then postgres), database test."""
    import psycopg

    for user in ("root", "postgres"):
        url = f"postgresql://{user}@127.0.0.1:5432/test"
        try:
            with psycopg.connect(url, connect_timeout=3):
                return url
        except psycopg.Error:
            continue
    message = "PostgreSQL on 127.0.0.1:5432 accepts neither root nor postgres on database test"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    """A port free on 127.0.0.1 right now; within ``ANTILOOP_TEST_PORTS`` (``7200-7299``) when
    set, so that a test's own servers stay in a range of ports given to it on a shared host."""
    low, _, high = os.environ.get("ANTILOOP_TEST_PORTS", "").partition("-")
    candidates = [0]
    if low.isdigit() and high.isdigit():
        candidates = list(range(int(low), int(high) + 1))
        random.shuffle(candidates)
    for port in candidates:
        if port in _GIVEN:  # handed out already (its server may not have bound it yet)
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            found = int(s.getsockname()[1])
            if port:
                _GIVEN.add(found)
            return found
    raise AssertionError(f"no free port in ANTILOOP_TEST_PORTS={low}-{high}")


_GIVEN: set[int] = set()


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


class RedisCluster:
    """A Redis Cluster of three masters on free loopback ports, in a directory of its own.

    With ``replicas=1`` each master has a replica (six nodes) and a master that stops
    answering for ``node_timeout`` ms is failed over to it (``kill`` one to see it).
    """

    def __init__(self, directory: Path, replicas: int = 0, node_timeout: int = 15000) -> None:
        binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if binary is None or cli is None:
            reason = "redis-server and redis-cli are needed for the Redis Cluster tests"
            if os.environ.get("CI") == "true":
                pytest.fail(f"{reason} (CI=true: they are required)")
            pytest.skip(reason)
        self.directory = directory
        self.ports = [_cluster_port() for _ in range(3 * (1 + replicas))]
        self.argv = [binary, "--bind", "127.0.0.1", "--cluster-node-timeout", str(node_timeout)]
        self.processes: list[subprocess.Popen[bytes]] = []
        for port in self.ports:
            (directory / str(port)).mkdir()
            self.processes.append(self._start(port))
        for port in self.ports:
            self._wait(lambda p=port: _listening(("127.0.0.1", p)), f"node {port} to listen")
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *nodes,
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self._wait(self._ok, "the cluster to be ok")

    def _start(self, port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                *(*self.argv, "--port", str(port), "--dir", str(self.directory / str(port))),
                *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                *("--save", "", "--appendonly", "no", "--daemonize", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def restart(self, port: int) -> None:
        """Start a killed node again: it rejoins (a failed-over master as a replica)."""
        self.processes[self.ports.index(port)] = self._start(port)
        self._wait(lambda: _listening(("127.0.0.1", port)), f"node {port} to listen")

    def _ok(self) -> bool:
        import redis

        for port in self.live():
            client = redis.Redis(port=port, socket_timeout=2)
            try:
                info = client.execute_command("CLUSTER", "INFO").decode()
            finally:
                client.close()
            if "cluster_state:ok" not in info:
                return False
        return True

    @staticmethod
    def _wait(ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30  # a start-up limit, not a timed assertion
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        """A ``redis+cluster://`` URL through the first live node."""
        return f"redis+cluster://127.0.0.1:{self.live()[0]}"

    def client(self) -> Any:
        """A raw cluster client."""
        import redis

        return redis.RedisCluster(host="127.0.0.1", port=self.live()[0])

    def live(self) -> list[int]:
        """The ports of the nodes not killed."""
        return [p for p, n in zip(self.ports, self.processes, strict=True) if n.poll() is None]

    def master_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot now."""
        import redis

        client = redis.RedisCluster(host="127.0.0.1", port=self.live()[0])
        try:
            return int(client.get_node_from_key(key).port)
        finally:
            client.close()

    def replica_of(self, port: int) -> int:
        """The port of the master's replica."""
        import redis

        client = redis.Redis(port=port, socket_timeout=2)
        try:
            info = client.info("replication")
        finally:
            client.close()
        return int(info["slave0"]["port"])

    def cut_replica(self, port: int) -> int:
        """Stop the master's replica (SIGSTOP) and drop its link: it lags from now on.

        The master stops streaming to it; what the kernel had buffered for it is all it gets.
        Returns the replica's port (``signal(port, SIGCONT)`` lets it go on).
        """
        import redis

        replica = self.replica_of(port)
        self.signal(replica, signal.SIGSTOP)
        client = redis.Redis(port=port, socket_timeout=2)
        try:
            client.execute_command("CLIENT", "KILL", "TYPE", "replica")
        finally:
            client.close()
        return replica

    def signal(self, port: int, sig: int) -> None:
        """Send a node a signal (SIGSTOP: it lags behind; SIGCONT: it goes on)."""
        self.processes[self.ports.index(port)].send_signal(sig)

    def kill(self, port: int) -> None:
        """SIGKILL one node: what it had not yet sent its replica is gone."""
        process = self.processes[self.ports.index(port)]
        process.kill()
        process.wait()

    def wait_master(self, key: str, port: int) -> None:
        """Wait until the node on ``port`` is the master serving ``key`` (a failover is done)."""
        self._wait(lambda: self.master_of(key) == port and self._ok(), f"{port} to take {key}")

    def wait_ok(self) -> None:
        """Wait until every live node reports the cluster ok (a failover is over)."""
        self._wait(self._ok, "the cluster to be ok")

    def stop(self) -> None:
        for process in self.processes:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A 3-master Redis Cluster of the test session's own, torn down after."""
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster"))
    yield cluster
    cluster.stop()


class Backend:
    """One backend for a test: opens stores on the same data, and cleans up after."""

    def __init__(self, kind: str, tmp_path: Path, cluster: RedisCluster | None = None) -> None:
        self.kind = kind
        self.tag = f"t{uuid.uuid4().hex[:12]}"
        self._stores: list[Any] = []
        self._memory: MemoryStore | None = None
        #: where the audit log lives: a split store keeps it in PostgreSQL
        self.records_kind = {"split": "postgres", "cluster": "redis"}.get(kind, kind)
        if kind == "cluster":
            assert cluster is not None
            self.cluster = cluster
            self.url = f"{cluster.url}?prefix=antiloop-test-{self.tag}"
        elif kind == "split":  # state in Redis, records in PostgreSQL
            need_server("Redis", REDIS)
            need_server("PostgreSQL", POSTGRES)
            self.base = postgres_base()
            self.state_url = f"redis://127.0.0.1:6379/0?prefix=antiloop-test-{self.tag}"
            self.url = f"{self.base}?schema=antiloop_test_{self.tag}"
        elif kind == "sqlite":
            self.url = f"sqlite:///{tmp_path / 'antiloop.db'}"
        elif kind == "redis":
            need_server("Redis", REDIS)
            self.url = f"redis://127.0.0.1:6379/0?prefix=antiloop-test-{self.tag}"
        elif kind == "postgres":
            need_server("PostgreSQL", POSTGRES)
            self.base = postgres_base()
            self.url = f"{self.base}?schema=antiloop_test_{self.tag}"
        else:
            self.url = "memory://"

    def open(self, **options: Any) -> Any:
        """A store object on this backend's data (memory: always the same object)."""
        if self.kind == "memory":
            if self._memory is None:
                self._memory = MemoryStore(**options)
            return self._memory
        if self.kind == "split":
            from antiloop.stores.postgres import PostgresStore
            from antiloop.stores.redis import RedisStore
            from antiloop.stores.split import SplitStore

            state = RedisStore.from_url(self.state_url, **options)
            split = SplitStore(state, PostgresStore.from_url(self.url, **options))
            self._stores.append(split)
            return split
        if options:
            from antiloop.stores import BUILTIN

            scheme = self.url.split(":", 1)[0].split("+", 1)[0]
            module, _, attr = BUILTIN[scheme].partition(":")
            import importlib

            store = getattr(importlib.import_module(module), attr).from_url(self.url, **options)
        else:
            store = open_store(self.url)
        self._stores.append(store)
        return store

    def tamper(self, sql_or_fn: Callable[[Any], None]) -> None:
        """Run a raw change on the backing data (a function of the raw client)."""
        sql_or_fn(self.raw())

    def raw(self) -> Any:
        """The backend's raw handle: a sqlite3/psycopg connection, a redis client, the store."""
        if self.kind == "sqlite":
            import sqlite3

            return sqlite3.connect(self.url[len("sqlite:///") :], isolation_level=None)
        if self.kind == "redis":
            import redis

            return redis.Redis.from_url("redis://127.0.0.1:6379/0")
        if self.kind == "cluster":
            return self.cluster.client()
        if self.kind in ("postgres", "split"):
            import psycopg

            schema = f"antiloop_test_{self.tag}"
            return psycopg.connect(self.base, autocommit=True, options=f"-c search_path={schema}")
        return self.open()

    def cleanup(self) -> None:
        """Close the stores and drop the test's keys or schema."""
        for store in self._stores:
            store.close()
        if self.kind in ("redis", "split"):
            import redis

            client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
            keys = list(client.scan_iter(f"antiloop-test-{self.tag}:*"))
            if keys:
                client.delete(*keys)
            client.close()
        if self.kind in ("postgres", "split"):
            import psycopg

            with psycopg.connect(self.base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS antiloop_test_{self.tag} CASCADE")


@pytest.fixture(params=PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each backend in turn (Redis and PostgreSQL need their servers; the cluster its own)."""
    cluster = request.getfixturevalue("redis_cluster") if request.param == "cluster" else None
    b = Backend(request.param, tmp_path, cluster)
    yield b
    b.cleanup()


@pytest.fixture
def store(backend: Backend) -> Any:
    """A store on the backend."""
    return backend.open()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Any]:
    """A redis-server of the test's own on a free port (append-only, fsync always): its
    statistics count only this test's calls, and faults hit no one else."""
    from tests.stores.test_faults_redis import RedisServer

    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()
