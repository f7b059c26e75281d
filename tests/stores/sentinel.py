"""A Redis Sentinel group of the test's own: a master, two replicas and three sentinels.

Every process runs on loopback on a free port (``conftest.free_port``), in the test's directory.
``kill_master`` SIGKILLs the master; the sentinels (``down-after-milliseconds`` 1000) agree it
is down and promote a replica, and point the other one at it (so ``wait_replicas=1`` holds
again within a second or two; a restarted old master is demoted only after about 10 s).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.stores.conftest import free_port

NAME = "antiloop-master"
"""The master's name, with a suffix of each group's own (sentinels of another group ignore it)."""


def _redis_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed (CI=true: it is required)")
        pytest.skip("redis-server is not installed")
    return binary


class SentinelGroup:
    """A master, two replicas, three sentinels; ``url`` is the store URL through the sentinels."""

    def __init__(self, directory: Path) -> None:
        self.binary = _redis_binary()
        self.directory = directory
        self.ports = {"a": free_port(), "b": free_port(), "c": free_port()}
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.name = f"{NAME}-{uuid.uuid4().hex[:6]}"

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.name}/0"

    def start(self) -> None:
        """Start the master, its replica and the sentinels; wait until all three see both."""
        self._server("a")
        self._server("b", replica_of=self.ports["a"])
        self._server("c", replica_of=self.ports["a"])
        for n, port in enumerate(self.sentinel_ports):
            conf = self.directory / f"sentinel-{n}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel monitor {self.name} 127.0.0.1 {self.ports['a']} 2\n"
                f"sentinel down-after-milliseconds {self.name} 1000\n"
                f"sentinel failover-timeout {self.name} 4000\n"
                f"sentinel parallel-syncs {self.name} 1\n"
            )
            self.processes[f"s{n}"] = self._spawn([str(conf), "--sentinel"], f"sentinel-{n}")
        self.wait(lambda: all(self._replicas_seen(p) >= 2 for p in self.sentinel_ports), "ready")
        self.wait(lambda: self._sentinels_seen() >= 2, "sentinels to find each other")

    def master_port(self) -> int | None:
        """The master's port, as the first sentinel that answers names it."""
        for port in self.sentinel_ports:
            reply = self._cli(port, "SENTINEL", "get-master-addr-by-name", self.name)
            lines = reply.split()
            if len(lines) == 2 and lines[1].isdigit():
                return int(lines[1])
        return None

    def kill_master(self) -> str:
        """SIGKILL the current master; returns its name (``a`` or ``b``)."""
        self.wait(lambda: self.master_port() in self.ports.values(), "a master named")
        port = self.master_port()
        name = next(k for k, v in self.ports.items() if v == port)
        process = self.processes[name]
        process.kill()
        process.wait()
        return name

    def wait_failover(self, old: str) -> str:
        """Wait until every sentinel names another server as the master, and the remaining
        replica follows it; returns the new master's name."""
        gone = self.ports[old]

        def named() -> int | None:
            found = {self._master_of(p) for p in self.sentinel_ports}
            return found.pop() if len(found) == 1 and None not in found else None

        self.wait(lambda: named() not in (None, gone), "the failover")
        port = named()
        new = next(k for k, v in self.ports.items() if v == port)
        other = next(k for k in self.ports if k not in (old, new))
        self.wait(
            lambda: (
                f"master_port:{port}" in self._cli(self.ports[other], "INFO", "replication")
                and "master_link_status:up" in self._cli(self.ports[other], "INFO", "replication")
            ),
            "the other replica to follow the new master",
        )
        return new

    def _master_of(self, sentinel: int) -> int | None:
        words = self._cli(sentinel, "SENTINEL", "get-master-addr-by-name", self.name).split()
        return int(words[1]) if len(words) == 2 and words[1].isdigit() else None

    def restart(self, name: str) -> None:
        """Start a killed server again (as the master it was: the sentinels demote it)."""
        self._server(name)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def wait(self, done: object, what: str, limit: float = 60.0) -> None:
        deadline = time.monotonic() + limit  # a limit for a stuck group, not a timed assertion
        while not done():  # type: ignore[operator]
            if time.monotonic() > deadline:
                logs = "".join(p.read_text()[-600:] for p in self.directory.glob("*.log"))
                raise AssertionError(f"the Sentinel group did not reach {what}: {logs}")
            time.sleep(0.1)

    # -- processes -------------------------------------------------------------------------

    def _server(self, name: str, replica_of: int | None = None) -> None:
        port = self.ports[name]
        argv = [
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--dbfilename",
            f"{name}.rdb",
            "--appendonly",
            "yes",
            "--appendfilename",
            f"{name}.aof",
            "--appenddirname",
            f"aof-{name}",
            "--appendfsync",
            "always",
            "--save",
            "",
        ]
        if replica_of is not None:
            argv += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.processes[name] = self._spawn(argv, name)
        self.wait(lambda: self._cli(port, "PING") == "PONG", f"{name} answering")

    def _spawn(self, argv: list[str], name: str) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("ab")
        try:
            return subprocess.Popen([self.binary, *argv], stdout=log, stderr=log)
        finally:
            log.close()

    def _cli(self, port: int, *command: str) -> str:
        import socket

        wire = f"*{len(command)}\r\n" + "".join(f"${len(c)}\r\n{c}\r\n" for c in command)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(wire.encode())
                return _parse(s)
        except OSError:
            return ""

    def _replicas_seen(self, port: int) -> int:
        reply = self._cli(port, "SENTINEL", "master", self.name)
        words = reply.split()
        if "num-slaves" in words:
            return int(words[words.index("num-slaves") + 1])
        return 0

    def _sentinels_seen(self) -> int:
        reply = self._cli(self.sentinel_ports[0], "SENTINEL", "master", self.name)
        words = reply.split()
        if "num-other-sentinels" in words:
            return int(words[words.index("num-other-sentinels") + 1])
        return 0


def _parse(sock: object) -> str:
    """A RESP reply, flattened to its words separated by newlines (enough for these commands)."""
    import socket

    assert isinstance(sock, socket.socket)
    words: list[str] = []
    with sock.makefile("rb") as file:
        _words(file, words)
    return "\n".join(words)


def _words(file: Any, words: list[str]) -> None:

    def read() -> None:
        line = file.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-", b":"):
            words.append(rest.decode())
        elif kind == b"$":
            size = int(rest)
            if size >= 0:
                words.append(file.read(size + 2)[:-2].decode())
        elif kind == b"*":
            for _ in range(max(int(rest), 0)):
                read()

    read()
