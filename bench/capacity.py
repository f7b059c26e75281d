"""Fleet capacity: 1, 2 and 3 `antiloop serve` replicas over one Redis (and PostgreSQL records).

Each replica is a real ``antiloop serve`` (uvicorn, one worker) on loopback; the clients run in
processes of their own (two, asyncio, keep-alive connections spread over the replicas). Single
steps and batches of 100 ``POST /v1/steps``; the HTTP floor is the same server stack answering
a fixed verdict (``bench/capacity_floor.py``), measured in the same run. Redis is a
redis-server of the bench's own (its statistics reset before each run): round trips per step
are its read events per step (``INFO stats`` ``total_reads_processed``: one per request a
client sends, a pipeline being one), with the commands per step beside them. Memory: Redis
``MEMORY USAGE`` of each session's keys after 30 steps each, and the bytes of PostgreSQL's
audit table (with its indexes) per record. Stores: ``redis`` (all in Redis) and ``split``
(state in Redis, records in a PostgreSQL schema of the bench's own on 127.0.0.1:5432).

Targets: a replica's single-step throughput >= 50% of the floor; batches of 100 >= 10x
single steps (steps/s); <= 2 Redis round trips per step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.serve import TOKEN, _load, _quantile, _step

FLOOR_SHARE = 0.5
BATCH_GAIN = 10.0
ROUND_TRIPS = 2.0
CLIENTS = 2
_RUNNING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """Start a uvicorn process on port 0 and wait for its port and /healthz."""
    import urllib.request

    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while True:
        found = _RUNNING.search(log.read_bytes())
        if found:
            port = int(found[1])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                    return process, port
            except OSError:
                pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{argv[2:5]} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)


def _client(args: tuple[list[int], int, int, int, int, int, int]) -> dict[str, Any]:
    """One client process: ``requests`` requests of ``batch`` steps over the ports."""
    ports, batch, requests, connections, offset, sessions, me = args
    bodies: list[list[bytes]] = [[] for _ in ports]
    for r in range(requests):
        start = offset + r * batch
        steps = [_step(start + k, sessions) for k in range(batch)]
        body = json.dumps(steps[0] if batch == 1 else steps).encode()
        bodies[(r + me) % len(ports)].append(body)

    async def all_ports() -> list[tuple[float, list[float], list[str]]]:
        per = max(connections // len(ports), 1)
        return await asyncio.gather(*(_load(p, b, per) for p, b in zip(ports, bodies, strict=True)))

    started = time.monotonic()
    results = asyncio.run(all_ports())
    ended = time.monotonic()
    return {
        "started": started,
        "ended": ended,
        "latencies": [x for _, lat, _ in results for x in lat],
        "errors": [e for _, _, err in results for e in err],
    }


def _drive(pool: Any, ports: list[int], batch: int, requests: int, offset: int) -> dict[str, Any]:
    """Run the clients; steps/s over the span from the first start to the last end."""
    share = requests // CLIENTS
    jobs = [(ports, batch, share, 8, offset + c * share * batch, 2000, c) for c in range(CLIENTS)]
    got = pool.map(_client, jobs)
    errors = [e for g in got for e in g["errors"]]
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    took = max(g["ended"] for g in got) - min(g["started"] for g in got)
    latencies = [x for g in got for x in g["latencies"]]
    return {
        "steps": share * CLIENTS * batch,
        "steps_per_s": share * CLIENTS * batch / took,
        "p50": _quantile(latencies, 0.5),
        "p99": _quantile(latencies, 0.99),
    }


class Redis:
    """A redis-server of the bench's own on a free port (no persistence: memory is measured)."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        import redis

        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.port = port or int(os.environ.get("BENCH_REDIS_PORT", 0)) or _free_port()
        self.process = subprocess.Popen(
            [
                *(binary, "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--dir", str(directory), "--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)

    def reset(self) -> None:
        self.client.config_resetstat()

    def counts(self) -> tuple[int, dict[str, int]]:
        """Read events since the reset (less this call's own) and calls per command."""
        reads = int(self.client.info("stats")["total_reads_processed"]) - 1
        commands = {
            name.removeprefix("cmdstat_"): int(v["calls"])
            for name, v in self.client.info("commandstats").items()
            if name not in ("cmdstat_info", "cmdstat_config|resetstat")
        }
        return reads, commands

    def session_bytes(self, prefix: str, sessions: list[str]) -> float:
        """Mean ``MEMORY USAGE`` of a session's keys, with its entry in the session index."""
        total = 0
        for s in sessions:
            for key in self.client.scan_iter(match=f"{prefix}:{{{s}}}:*"):
                total += int(self.client.memory_usage(key, samples=0) or 0)
        index = int(self.client.memory_usage(f"{prefix}:sessions", samples=0) or 0)
        count = int(self.client.zcard(f"{prefix}:sessions")) or 1
        return total / len(sessions) + index / count

    def stop(self) -> None:
        self.client.close()
        self.process.kill()
        self.process.wait()


def _cpu_ms(processes: list[subprocess.Popen[bytes]]) -> float:
    """CPU time (user + system) the processes used so far, in ms (Linux ``/proc``)."""
    total = 0
    for process in processes:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def _postgres() -> str | None:
    try:
        import psycopg
    except ImportError:
        return None
    for user in ("root", "postgres"):
        url = f"postgresql://{user}@127.0.0.1:5432/test"
        try:
            with psycopg.connect(url, connect_timeout=3):
                return url
        except psycopg.Error:
            continue
    return None


def _record_bytes(base: str, schema: str) -> tuple[float, int]:
    """Bytes of the audit table and its indexes per record, and the record count."""
    import psycopg

    with psycopg.connect(base, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute("VACUUM ANALYZE audit")
        row = conn.execute("SELECT count(*), pg_total_relation_size('audit') FROM audit").fetchone()
    assert row is not None
    count, size = int(row[0]), int(row[1])
    return size / max(count, 1), count


def _drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def run(quick: bool = False) -> str:
    """Run the fleet capacity bench and return the markdown section."""
    single_n = 1200 if quick else 2400
    batch_n = 20 if quick else 40
    env = {**os.environ, "ANTILOOP_TOKEN": TOKEN}
    rows: list[str] = []
    notes: list[str] = []
    figures: dict[str, float] = {}
    pool = multiprocessing.get_context("spawn").Pool(CLIENTS)
    load = os.getloadavg()[0]
    begun = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        redis = Redis(here)
        base = _postgres()
        schema = f"bench_capacity_{uuid.uuid4().hex[:8]}"
        try:
            floor_process, floor_port = _spawn(
                [sys.executable, "-m", "bench.capacity_floor"], here / "floor.log", env
            )
            try:
                _drive(pool, [floor_port], 1, 400, 9_000_000)  # warm-up
                before = _cpu_ms([floor_process])
                floor = _drive(pool, [floor_port], 1, single_n, 0)
                floor["cpu"] = (_cpu_ms([floor_process]) - before) / floor["steps"]
            finally:
                floor_process.terminate()
                floor_process.wait(timeout=10)
            figures["floor"] = floor["steps_per_s"]
            rows.append(
                f"| floor (fixed verdict) | 1 | single | {floor['steps']:,} | "
                f"{floor['steps_per_s']:,.0f} | {floor['p50']:.1f} | {floor['p99']:.1f} | "
                f"{floor['cpu']:.2f} | - | - |"
            )
            stores = [("redis", ["--store", f"redis://127.0.0.1:{redis.port}/0?prefix=cap"])]
            if base is not None:
                records = f"{base}?schema={schema}"
                state = f"redis://127.0.0.1:{redis.port}/0?prefix=caps"
                stores.append(("split", ["--store", state, "--records", records]))
            else:
                notes.append("PostgreSQL was not reachable on 127.0.0.1:5432: no split rows.")
            offset = 10_000_000
            for name, args in stores:
                for count in (1, 2, 3):
                    started = [
                        _spawn(
                            [
                                *(sys.executable, "-m", "antiloop", "serve", "--port", "0"),
                                *("--log-level", "info", *args),
                            ],
                            here / f"{name}-{count}-{i}.log",
                            env,
                        )
                        for i in range(count)
                    ]
                    ports = [p for _, p in started]
                    try:
                        _drive(pool, ports, 1, 300, offset)  # warm-up
                        offset += 1_000_000
                        for kind, batch, n in (
                            ("single", 1, single_n),
                            ("batch of 100", 100, batch_n),
                        ):
                            redis.reset()
                            before = _cpu_ms([p for p, _ in started])
                            m = _drive(pool, ports, batch, n, offset)
                            cpu = (_cpu_ms([p for p, _ in started]) - before) / m["steps"]
                            offset += 1_000_000
                            reads, commands = redis.counts()
                            per = reads / m["steps"]
                            top = sorted(commands.items(), key=lambda kv: -kv[1])[:4]
                            said = ", ".join(f"{c} {v / m['steps']:.2f}" for c, v in top)
                            figures[f"{name}-{count}-{batch}"] = m["steps_per_s"]
                            figures[f"{name}-{count}-{batch}-rt"] = per
                            rows.append(
                                f"| {name} | {count} | {kind} | {m['steps']:,} | "
                                f"{m['steps_per_s']:,.0f} | {m['p50']:.1f} | {m['p99']:.1f} | "
                                f"{cpu:.2f} | {per:.2f} | {said} |"
                            )
                    finally:
                        for process, _ in started:
                            process.terminate()
                            process.wait(timeout=10)
            memory = _memory(redis, here, env, pool, base, schema)
        finally:
            pool.close()
            redis.stop()
            if base is not None:
                _drop_schema(base, schema)
    notes.append(
        f"Load average (1 min) {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end of "
        f"{time.time() - begun:.0f} s on {os.cpu_count()} cores: the machine was shared, so "
        "compare ratios within this run (the floor is measured in it), and the replicas' CPU "
        "per step, which the load does not change much."
    )
    return _section(rows, notes, figures, memory)


def _memory(
    redis: Redis, here: Path, env: dict[str, str], pool: Any, base: str | None, schema: str
) -> dict[str, float]:
    """300 sessions of 30 steps through one split (or Redis) replica: bytes per session/record."""
    prefix = "capm"
    args = ["--store", f"redis://127.0.0.1:{redis.port}/0?prefix={prefix}"]
    if base is not None:
        args += ["--records", f"{base}?schema={schema}_m"]
    process, port = _spawn(
        [sys.executable, "-m", "antiloop", "serve", "--port", "0", "--log-level", "info", *args],
        here / "mem.log",
        env,
    )
    used_before = int(redis.client.info("memory")["used_memory"])
    try:
        sessions = 300
        jobs = []
        for c in range(CLIENTS):  # steps i with i % 300 == session: 30 steps each
            share = sessions * 30 // 100 // CLIENTS
            jobs.append(([port], 100, share, 2, c * share * 100, sessions, 0))
        pool.map(_client, jobs)
    finally:
        process.terminate()
        process.wait(timeout=10)
    used = int(redis.client.info("memory")["used_memory"]) - used_before
    names = [f"bench-{i}" for i in range(sessions)]
    found: dict[str, float] = {
        "session_bytes": redis.session_bytes(prefix, names),
        "used_per_session": used / sessions,
    }
    if base is not None:
        found["record_bytes"], found["records"] = _record_bytes(base, f"{schema}_m")
        _drop_schema(base, f"{schema}_m")
    return found


def _section(
    rows: list[str], notes: list[str], f: dict[str, float], memory: dict[str, float]
) -> str:
    floor = f["floor"]
    checks = []
    for name in ("redis", "split"):
        if f"{name}-1-1" not in f:
            continue
        share = f[f"{name}-1-1"] / floor
        gain = f[f"{name}-1-100"] / f[f"{name}-1-1"]
        trips = max(f[f"{name}-{c}-1-rt"] for c in (1, 2, 3))
        checks.append(
            f"| {name} | {share:.0%} of the floor | {'yes' if share >= FLOOR_SHARE else '**no**'} "
            f"| {gain:.1f}x | {'yes' if gain >= BATCH_GAIN else '**no**'} | {trips:.2f} | "
            f"{'yes' if trips <= ROUND_TRIPS else '**no**'} |"
        )
    lines = [
        "## capacity: replicas over one Redis (and PostgreSQL records)",
        "",
        "Real `antiloop serve` replicas (uvicorn, one worker each) on loopback, over a "
        "redis-server of the bench's own (and, for `split`, records in PostgreSQL on "
        f"127.0.0.1:5432); {CLIENTS} client processes (asyncio, 8 keep-alive connections "
        "each, spread over the replicas), 2,000 sessions of distinct steps (four tools in "
        "turn). The floor: the same server stack (Starlette on uvicorn with serve's protocol "
        "and limits) answering a fixed verdict, no guard, no store. Redis round trips per step: "
        "its read events (`total_reads_processed`) per step (a request larger than Redis's 16 KiB "
        "read buffer, a batch's, is several); the commands per step beside them (those a "
        "script runs included). The replicas' CPU: user + system time of their processes. "
        "Everything (replicas, clients, Redis, PostgreSQL) shares this machine's cores, so more "
        "replicas add no cores: read the 2- and 3-replica rows as the cost of spreading, not "
        "as scaling.",
        "",
        "| store | replicas | request | steps | steps/s | p50 ms | p99 ms | replicas' CPU ms / "
        "step | Redis round trips / step | commands / step (top 4) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        "| store | single step, 1 replica (>= 50%) | met | batch of 100 vs single (>= 10x) | met "
        "| round trips / single step, worst of 1-3 replicas (<= 2) | met |",
        "|---|---|---|---:|---|---:|---|",
        *checks,
        "",
        "Memory (300 sessions of 30 steps, through one "
        f"`{'split' if 'records' in memory else 'redis'}` replica): Redis `MEMORY USAGE` "
        f"of a session's keys {memory['session_bytes']:,.0f} bytes "
        f"(used_memory grew {memory['used_per_session']:,.0f} bytes per session)"
        + (
            f"; PostgreSQL audit table with its indexes {memory['record_bytes']:,.0f} bytes per "
            f"record ({memory['records']:,.0f} records)."
            if "records" in memory
            else "."
        ),
    ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
