"""A real ``antiloop serve`` process on a loopback port of its own, and a small client for it."""

# ruff: noqa: S105, S310  (a fixed test token; plain HTTP to the loopback service)

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TOKEN = "test-token-123"
SECRET = "webhook-secret-456"


_RUNNING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@dataclass
class Server:
    """A running service: its base URL and a JSON client."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    store: str = ""

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


def start_server(
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    port: int = 0,
    store: str | None = None,
) -> Server:
    """Start ``antiloop serve`` on port 0 (the kernel picks a free one, no race) and wait
    until it says which port it got and answers /healthz there (``port`` and ``store``:
    a restart of an earlier one)."""
    name = uuid.uuid4().hex[:8]
    log = tmp / f"serve-{name}.log"
    environ = {
        **os.environ,
        "ANTILOOP_TOKEN": TOKEN,
        "ANTILOOP_WEBHOOK_SECRET": SECRET,
        **(env or {}),
    }
    store = store or f"sqlite:///{tmp}/antiloop-{name}.db"
    command = [sys.executable, "-m", "antiloop", "serve", "--port", str(port), "--store", store]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--log-level", "info", *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
        )
    deadline = time.monotonic() + 90  # a start-up limit (a loaded machine), not a timed assertion
    server: Server | None = None
    while True:
        if process.poll() is not None:
            raise AssertionError(f"antiloop serve exited: {log.read_text()}")
        if server is None:
            found = _RUNNING.search(log.read_bytes())
            if found:
                server = Server(f"http://127.0.0.1:{int(found[1])}", process, log, store)
        if server is not None:
            try:
                with urllib.request.urlopen(server.url + "/healthz", timeout=1):
                    return server
            except OSError:
                pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"antiloop serve did not start: {log.read_text()}")
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
