"""The service under load: POST /v1/steps on loopback, single steps and batches of 100.

A bounded load client (asyncio, keep-alive connections, a fixed number of requests each) drives
a real ``antiloop serve`` process (uvicorn, one worker) with the SQLite and the Redis store.
Latency is measured per request, from the first byte sent to the last byte received.
Targets on a 2-core machine: single steps >= 1,000/s with p99 <= 25 ms; batches >= 10,000 steps/s.
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


def _start(store: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {**os.environ, "ANTILOOP_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "antiloop", "serve", "--port", str(port), "--store", store],
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
            time.sleep(0.05)


def _request(port: int, body: bytes) -> bytes:
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
    port: int, bodies: list[bytes], connections: int
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
    sessions = 500
    bodies = []
    for r in range(requests):
        start = offset + r * batch
        steps = [_step(start + k, sessions) for k in range(batch)]
        bodies.append(json.dumps(steps[0] if batch == 1 else steps).encode())
    took, latencies, errors = asyncio.run(_load(port, bodies, connections))
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    return {
        "requests": requests,
        "steps_per_s": requests * batch / took,
        "requests_per_s": requests / took,
        "p50": _quantile(latencies, 0.50),
        "p99": _quantile(latencies, 0.99),
    }


def _cleanup_redis(prefix: str) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i : i + 500])
    client.close()


def _redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1):
            return True
    except OSError:
        return False


def run(quick: bool = False) -> str:
    """Run the load and return the markdown section."""
    single_n = 1500 if quick else 6000
    batch_n = 30 if quick else 150
    rows = []
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = [("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")]
        prefix = f"antiloop-bench-{uuid.uuid4().hex[:8]}"
        if _redis_up():
            stores.append(("redis", f"redis://127.0.0.1:6379/0?prefix={prefix}"))
        else:
            notes.append("Redis was not reachable on 127.0.0.1:6379: its rows are missing.")
        for name, url in stores:
            process, port = _start(url)
            try:
                _measure(port, 1, 200, 4, 10_000_000)  # warm-up
                single = _measure(port, 1, single_n, 8, 0)
                batch = _measure(port, 100, batch_n, 4, 1_000_000)
            finally:
                process.terminate()
                process.wait(timeout=10)
                if name == "redis":
                    _cleanup_redis(prefix)
            for kind, m, ok in (
                (
                    "single",
                    single,
                    single["steps_per_s"] >= SINGLE_TARGET and single["p99"] <= P99_TARGET_MS,
                ),
                ("batch of 100", batch, batch["steps_per_s"] >= BATCH_TARGET),
            ):
                rows.append(
                    f"| {name} | {kind} | {m['requests']:,} | {m['steps_per_s']:,.0f} | "
                    f"{m['requests_per_s']:,.0f} | {m['p50']:.1f} | {m['p99']:.1f} | "
                    f"{'yes' if ok else '**no**'} |"
                )
    lines = [
        "## serve: POST /v1/steps under load",
        "",
        "A real `antiloop serve` (uvicorn, one worker, default guard config) on loopback; the load "
        "client runs on the same machine (asyncio, keep-alive: 8 connections for single steps, "
        "4 for batches; a fixed number of requests each). 500 sessions, four tools in turn. "
        "Latency is per request (a batch request carries 100 steps). Targets: single steps "
        f">= {SINGLE_TARGET:,.0f} steps/s with p99 <= {P99_TARGET_MS:.0f} ms; batches >= "
        f"{BATCH_TARGET:,.0f} steps/s.",
        "",
        "| store | request | requests | steps/s | requests/s | p50 ms | p99 ms | target met |",
        "|---|---|---:|---:|---:|---:|---:|---|",
        *rows,
    ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
