"""The service under load: POST /v1/steps on loopback, single steps and batches of 100.

A bounded load client (asyncio, keep-alive connections, a fixed number of requests each) drives
a real ``antiloop serve`` process (uvicorn, one worker) with the SQLite and the Redis store.
Latency is measured per request, from the first byte sent to the last byte received.
Targets on a 2-core machine: single steps >= 1,000/s with p99 <= 25 ms; batches >= 10,000 steps/s.

The floor, in the same run: a bare ASGI function on the same uvicorn (httptools, one worker)
that parses the JSON body and answers a fixed verdict, under the same load; and its start-up
(spawn to the first ``/healthz`` answer) against ``antiloop serve``'s, interleaved round by round.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

TOKEN = "bench-token"  # noqa: S105 - a throwaway token for a loopback bench
SINGLE_TARGET = 1000.0
P99_TARGET_MS = 25.0
BATCH_TARGET = 10_000.0
TOOLS = (
    ("Grep", lambda i: {"pattern": f"needle{i % 97}", "path": "src"}),
    ("Read", lambda i: {"file_path": f"src/mod{i % 89}.py"}),
    ("Bash", lambda i: {"command": f"pytest tests/test_{i % 83}.py -q"}),
    (
        "Edit",
        lambda i: {"file_path": f"src/mod{i % 79}.py", "old_string": "a", "new_string": f"b{i}"},
    ),
)


def _step(i: int, sessions: int) -> dict[str, object]:
    tool, args = TOOLS[i % len(TOOLS)]
    return {
        "session": f"bench-{i % sessions}",
        "agent": "agent",
        "tool": tool,
        "args": args(i),
        "output": f"result {i}\nline two of the output for step {i}",
        "exit_code": 0,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


FLOOR_APP = """
import json, sys, uvicorn
ANSWER = json.dumps({"index": 0, "action": "continue", "detector": None, "outcome": None,
    "fingerprint": None, "reason": "", "hint": "", "session": "s", "escalate_to": None}).encode()
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if body:
        json.loads(body)
    await send({"type": "http.response.start", "status": 200,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(ANSWER)).encode())]})
    await send({"type": "http.response.body", "body": ANSWER})
uvicorn.run(app, port=int(sys.argv[1]), http="httptools", log_level="warning", access_log=False)
"""


def _serve_command(store: str | None, port: int) -> list[str]:
    """``antiloop serve`` on ``store``, or the floor app for None."""
    if store is None:
        return [sys.executable, "-c", FLOOR_APP, str(port)]
    return [sys.executable, "-m", "antiloop", "serve", "--port", str(port), "--store", store]


def _start(store: str | None) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {**os.environ, "ANTILOOP_TOKEN": TOKEN}
    process = subprocess.Popen(
        _serve_command(store, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return process, port
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"antiloop serve did not start with {store}") from None
            time.sleep(0.005)


def _startup(store: str, rounds: int) -> tuple[float, float]:
    """Median seconds from spawn to the first ``/healthz`` answer: ``antiloop serve``, floor."""
    ours: list[float] = []
    floor: list[float] = []
    for _ in range(rounds):
        for which, into in ((store, ours), (None, floor)):
            t0 = time.perf_counter()
            process, _ = _start(which)
            into.append(time.perf_counter() - t0)
            process.terminate()
            process.wait(timeout=10)
    return sorted(ours)[rounds // 2], sorted(floor)[rounds // 2]


def _request(port: int, body: bytes | None) -> bytes:
    """A POST /v1/steps with ``body``, or a GET /healthz for None."""
    if body is None:
        return f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    head = (
        f"POST /v1/steps HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _connection(
    port: int, payloads: list[bytes], latencies: list[float], errors: list[str]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    clock = time.perf_counter
    try:
        for payload in payloads:
            t0 = clock()
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(clock() - t0)
            if not head.startswith(b"HTTP/1.1 200"):
                errors.append(head.split(b"\r\n", 1)[0].decode())
    finally:
        writer.close()
        await writer.wait_closed()


async def _load(
    port: int, bodies: list[bytes | None], connections: int
) -> tuple[float, list[float], list[str]]:
    payloads = [_request(port, b) for b in bodies]
    shares = [payloads[i::connections] for i in range(connections)]
    latencies: list[float] = []
    errors: list[str] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(_connection(port, share, latencies, errors) for share in shares))
    return time.perf_counter() - t0, latencies, errors


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def _measure(
    port: int, batch: int, requests: int, connections: int, offset: int
) -> dict[str, float]:
    """``requests`` POSTs of ``batch`` steps each (0: GETs of /healthz)."""
    sessions = 500
    bodies: list[bytes | None] = []
    for r in range(requests):
        start = offset + r * batch
        steps = [_step(start + k, sessions) for k in range(batch)]
        bodies.append(json.dumps(steps[0] if batch == 1 else steps).encode() if batch else None)
    took, latencies, errors = asyncio.run(_load(port, bodies, connections))
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    return {
        "requests": requests,
        "steps_per_s": requests * max(batch, 1) / took,
        "requests_per_s": requests / took,
        "p50": _quantile(latencies, 0.50),
        "p99": _quantile(latencies, 0.99),
    }


def _load_rows(port: int, single_n: int, batch_n: int) -> dict[str, dict[str, float]]:
    _measure(port, 1, 200, 4, 10_000_000)  # warm-up
    return {
        "GET /healthz": _measure(port, 0, single_n, 8, 0),
        "single": _measure(port, 1, single_n, 8, 0),
        "batch of 100": _measure(port, 100, batch_n, 4, 1_000_000),
    }


def _met(kind: str, m: dict[str, float]) -> str:
    if kind == "single":
        ok = m["steps_per_s"] >= SINGLE_TARGET and m["p99"] <= P99_TARGET_MS
    elif kind == "batch of 100":
        ok = m["steps_per_s"] >= BATCH_TARGET
    else:
        return "-"
    return "yes" if ok else "**no**"


def run(quick: bool = False) -> str:
    """Run the load and return the markdown section."""
    single_n = 1500 if quick else 6000
    batch_n = 30 if quick else 150
    rows = []
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{Path(tmp) / 'bench.db'}"
        stores: list[tuple[str, str | None]] = [("floor", None), ("sqlite", sqlite)]
        prefix = f"antiloop-bench-{uuid.uuid4().hex[:8]}"
        from bench.capacity import Redis  # a redis-server of the bench's own: no shared load

        own = Redis(Path(tmp))
        stores.append(("redis", f"redis://127.0.0.1:{own.port}/0?prefix={prefix}"))
        floor: dict[str, dict[str, float]] = {}
        for name, url in stores:
            process, port = _start(url)
            try:
                measured = _load_rows(port, single_n, batch_n)
            finally:
                process.terminate()
                process.wait(timeout=10)
            floor = floor or measured
            for kind, m in measured.items():
                if kind == "GET /healthz" and name not in ("floor", "sqlite"):
                    continue  # the store is not touched: once is enough
                ratio = m["p50"] / floor[kind]["p50"]
                rows.append(
                    f"| {name} | {kind} | {m['requests']:,} | {m['steps_per_s']:,.0f} | "
                    f"{m['requests_per_s']:,.0f} | {m['p50']:.1f} | {m['p99']:.1f} | "
                    f"{ratio:.2f}x | {_met(kind, m) if name != 'floor' else '-'} |"
                )
        own.stop()
        up, up_floor = _startup(sqlite, 3 if quick else 7)
    lines = [
        "## serve: POST /v1/steps under load",
        "",
        "A real `antiloop serve` (uvicorn, one worker, default guard config) on loopback; the load "
        "client runs on the same machine (asyncio, keep-alive: 8 connections for single steps, "
        "4 for batches; a fixed number of requests each). 500 sessions, four tools in turn. "
        "Latency is per request (a batch request carries 100 steps). The floor is a bare ASGI "
        "function on the same uvicorn that parses the JSON body and answers a fixed verdict, "
        "under the same load in the same run. Targets: single steps "
        f">= {SINGLE_TARGET:,.0f} steps/s with p99 <= {P99_TARGET_MS:.0f} ms; batches >= "
        f"{BATCH_TARGET:,.0f} steps/s.",
        "",
        "| server | request | requests | steps/s | requests/s | p50 ms | p99 ms | p50 / floor "
        "| target met |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        f"Start-up, spawn to the first `/healthz` answer (median of {3 if quick else 7}, "
        f"interleaved): `antiloop serve` (SQLite) {up * 1000:.0f} ms, the floor "
        f"{up_floor * 1000:.0f} ms: {up / up_floor:.2f}x.",
    ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
