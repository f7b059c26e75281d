"""Redis or PostgreSQL going away mid-run: the guard follows on_store_error, then resumes."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from antiloop import Guard, GuardConfig, Step
from antiloop.core.verdict import Action

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


@pytest.mark.parametrize("policy", ["allow", "block"])
def test_server_gone_mid_run_follows_policy_then_resumes(
    proxied: Any, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With the server gone, allow goes on unguarded (logged) or block blocks; then it resumes."""
    _, proxy, url = proxied
    guard = Guard(store=url, config=CONFIG, on_store_error=policy)
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
    proxy.start()
    back = guard.record(STEP)  # the state of the first step survived: this is the repeat
    assert (back.action, back.detector) == (Action.STOP, "repeat")
    guard.store.close()


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:1/0", "postgresql://root@127.0.0.1:1/test?connect_timeout=2"]
)
@pytest.mark.parametrize("policy", ["allow", "block"])
def test_closed_port_follows_policy(url: str, policy: str) -> None:
    """A store URL to a closed port: the guard opens, and each step follows on_store_error."""
    guard = Guard(store=url, config=CONFIG, on_store_error=policy)
    verdict = guard.record(STEP)
    expected = Action.CONTINUE if policy == "allow" else Action.BLOCK
    assert verdict.action is expected
