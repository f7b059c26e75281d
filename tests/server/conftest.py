"""A real ``antiloop serve`` process on a free loopback port, and a small client for it."""

# ruff: noqa: S105, S310  (a fixed test token; plain HTTP to the loopback service)

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TOKEN = "test-token-123"
SECRET = "webhook-secret-456"


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A running service: its base URL and a JSON client."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = TOKEN,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> tuple[int, Any]:
        """Call the API; returns (status, parsed JSON body)."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = {"Content-Type": "application/json", **(headers or {})}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, text.decode()


def start_server(tmp: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    """Start ``antiloop serve`` and wait until it answers /healthz."""
    port = free_port()
    log = tmp / f"serve-{port}.log"
    environ = {
        **os.environ,
        "ANTILOOP_TOKEN": TOKEN,
        "ANTILOOP_WEBHOOK_SECRET": SECRET,
        **(env or {}),
    }
    store = f"sqlite:///{tmp}/antiloop-{port}.db"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "antiloop",
                "serve",
                "--port",
                str(port),
                "--store",
                store,
                *extra,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + 30  # a start-up limit, not a timed assertion
    while True:
        if process.poll() is not None:
            raise AssertionError(f"antiloop serve exited: {log.read_text()}")
        try:
            with urllib.request.urlopen(server.url + "/healthz", timeout=1):
                return server
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"antiloop serve did not start: {log.read_text()}") from None
            time.sleep(0.05)


def stop_server(server: Server) -> None:
    """Stop the process."""
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """One service for a test module."""
    running = start_server(tmp_path_factory.mktemp("serve"))
    yield running
    stop_server(running)
