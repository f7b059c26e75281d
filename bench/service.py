"""One replica at its floor: ``antiloop serve`` on SQLite, Redis and split against the HTTP floor.

One run, side by side: the floor (``bench/capacity_floor.py``: the same Starlette/uvicorn stack
and limits answering a fixed verdict, no guard, no store), then one real ``antiloop serve``
replica (uvicorn, one worker) on each store: ``sqlite`` (a file of the bench's own), ``redis``
(a redis-server of the bench's own) and ``split`` (state in that Redis, records in PostgreSQL:
``BENCH_POSTGRES``, default ``postgresql://root@127.0.0.1:5432/test``, a schema of the
bench's own). The clients run in two processes of their own (asyncio, keep-alive: 8
connections in all for single steps, 4 for batches of 100), 2,000 sessions of distinct steps
(four tools in turn). For each: steps/s, p50/p99 per request, the replica's CPU per step
(user + system time of its process, from ``/proc``; the load of a shared machine changes it
less than the wall-clock figures) and, on Redis, round trips per step (the server's read
events, ``total_reads_processed``, per step).

Then where the time goes: ``py-spy`` samples each replica under the single-step load (its
threads' stacks, idle ones left out) and the samples are sorted into what they were doing.

Targets (issue 26): single steps >= 50% of the floor's steps/s on Redis and SQLite (split
>= 25%); batches of 100 >= 10x single steps; <= 2 Redis round trips a step; a replica's CPU
<= 0.3 ms a step; p99 <= 25 ms at 8 concurrent clients.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.capacity import Redis, _client, _cpu_ms, _drop_schema, _spawn
from bench.serve import TOKEN, _quantile

SHARE = {"sqlite": 0.5, "redis": 0.5, "split": 0.25}
BATCH_GAIN = 10.0
ROUND_TRIPS = 2.0
CPU_MS = 0.3
P99_MS = 25.0
CLIENTS = 2
SESSIONS = 2000

# What a sampled stack was doing: a wait, by its innermost frame; else the kind of the innermost
# frame that names one (py-spy writes a frame as "function (path/inside/site-packages.py:line)").
WAITS = (
    "Condition.wait (",
    "Lock.acquire",
    "Event.wait (",
    "Queue.get (",
    "read_from_socket (",
    "psycopg/waiting",
    "(psycopg/connection.py:479",
    "Runner.run (asyncio/runners.py",
    "select (",
    "_worker (concurrent/futures/thread.py",
    "poll (",
)
KINDS: list[tuple[str, tuple[str, ...]]] = [
    ("Redis client (redis-py)", ("(redis/",)),
    ("PostgreSQL client (psycopg)", ("(psycopg/", "(psycopg_binary/")),
    ("SQLite (sqlite3 calls)", ("(antiloop/stores/sqlite.py", "(antiloop/stores/_sqlite_link.py")),
    ("state codec", ("(antiloop/stores/codec.py",)),
    ("audit records (build, redact, hash)", ("(antiloop/stores/auditlog.py", "(antiloop/audit.py")),
    ("redaction", ("(antiloop/redact.py", "(antiloop/core/redact.py")),
    (
        "judging (decide, detectors, canonical, readings)",
        tuple(
            f"(antiloop/{m}"
            for m in (
                "decide.py",
                "detectors",
                "canonical.py",
                "_shell",
                "readings",
                "deferred.py",
                "fingerprint.py",
                "history.py",
                "semantic.py",
                "_rules.py",
                "_patterns.py",
                "_shapes.py",
                "stagnation.py",
                "verdict.py",
                "events.py",
                "budgets.py",
                "core/",  # the pure core's home since this round (antiloop.core)
            )
        ),
    ),
    (
        "stores, guard and service (glue)",
        (
            "(antiloop/stores/",
            "(antiloop/guard.py",
            "(antiloop/server/service.py",
            "(antiloop/fleet/",
            "(antiloop/server/groups.py",
        ),
    ),
    (
        "threads (anyio, threading, executor)",
        ("(anyio/", "(threading.py", "(queue.py", "(concurrent/"),
    ),
    (
        "HTTP (uvicorn, starlette, fastapi, routes, JSON)",
        (
            "(uvicorn/",
            "(starlette/",
            "(fastapi/",
            "(httptools/",
            "(antiloop/server/",
            "(json/",
            "(pydantic",
            "(asyncio/",
            "(sniffio/",
            "(contextlib.py",
        ),
    ),
]
OTHER = "other (interpreter, stdlib)"
WAITING = "waiting (a lock, a socket, the event loop idle)"


WHY = [
    "What stands in the way of the targets missed: *batches of 100 against single steps*: "
    "single steps are judged in groups (the requests in flight together), so a batch saves "
    "only its HTTP requests and a group's fixed costs; a step of either costs its judgement "
    "and records (the result's readings, the audit record, its record in the state, the "
    "answer's redaction), which no batching shares, so a batch of 100 gains what the HTTP "
    "request and the group cost a single step (2-4x in CPU here), not 10x. *CPU per single "
    "step*: that judgement, plus the HTTP request (the floor's own CPU) and a group's thread "
    "hand-off, transaction and round trips, shared by the few steps of a group at 8 clients. "
    "*Split*: a replica judges one group at a time, and each group waits for a Redis script "
    "to lock and read its sessions, one PostgreSQL statement for their interventions, one "
    "PostgreSQL transaction for the records (psycopg's pipeline costs more CPU than the "
    "rest of the step) and a Redis script to save: the replica is bound by PostgreSQL's "
    "latency and psycopg. *p99*: the machine's load (below) delays every process, the "
    "floor's too.",
]


def _postgres() -> str | None:
    url = os.environ.get("BENCH_POSTGRES", "postgresql://root@127.0.0.1:5432/test")
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return url
    except Exception:
        return None


def _drive(
    pool: Any, port: int, batch: int, requests: int, connections: int, offset: int
) -> dict[str, Any]:
    """Two client processes, ``connections`` in all; steps/s over the whole span."""
    share = requests // CLIENTS
    per = max(connections // CLIENTS, 1)
    jobs = [
        ([port], batch, share, per, offset + c * share * batch, SESSIONS, c) for c in range(CLIENTS)
    ]
    got = pool.map(_client, jobs)
    errors = [e for g in got for e in g["errors"]]
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    took = max(g["ended"] for g in got) - min(g["started"] for g in got)
    latencies = [x for g in got for x in g["latencies"]]
    steps = share * CLIENTS * batch
    return {
        "steps": steps,
        "steps_per_s": steps / took,
        "p50": _quantile(latencies, 0.5),
        "p99": _quantile(latencies, 0.99),
    }


def _measure(
    pool: Any,
    process: subprocess.Popen[bytes],
    port: int,
    redis: Redis | None,
    n: int,
    nb: int,
    offset: int,
) -> dict[str, dict[str, Any]]:
    _drive(pool, port, 1, 400, 8, offset)  # warm-up: imports, connections, first sessions
    out = {}
    for kind, batch, requests, connections in (("single", 1, n, 8), ("batch", 100, nb, 4)):
        offset += 1_000_000
        if redis is not None:
            redis.reset()
        before = _cpu_ms([process])
        m = _drive(pool, port, batch, requests, connections, offset)
        m["cpu"] = (_cpu_ms([process]) - before) / m["steps"]
        if redis is not None:
            m["trips"] = redis.counts()[0] / m["steps"]
        out[kind] = m
    return out


def _profile(
    pool: Any, process: subprocess.Popen[bytes], port: int, here: Path, n: int, offset: int
) -> collections.Counter[str] | None:
    """py-spy samples of the replica under single steps, by what they were doing."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return None
    keep = os.environ.get("BENCH_SPY_DIR")  # keep the raw stacks there (for a flame graph)
    out = (Path(keep) if keep else here) / f"spy-{process.pid}.txt"
    sampler = subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(process.pid),
            "--format",
            "raw",
            "--rate",
            "250",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # attached
    _drive(pool, port, 1, n, 8, offset)
    sampler.send_signal(signal.SIGINT)
    sampler.wait(timeout=60)
    counts: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit() or not stack.endswith(")"):  # a frame's name held a newline
            continue
        frames = stack.split(";")
        counts[_kind(frames)] += int(number)
    return counts


def _kind(frames: list[str]) -> str:
    """A wait, or the kind of the innermost frame that names one (py-spy: outermost first)."""
    if any(w in frames[-1] for w in WAITS):
        return WAITING
    for frame in reversed(frames):
        for kind, marks in KINDS:
            if any(m in frame for m in marks):
                return kind
    return OTHER


def run(quick: bool = False) -> str:
    """Run the load on the floor and each store; return the markdown section."""
    n = 2000 if quick else 6000
    nb = 20 if quick else 60
    env = {**os.environ, "ANTILOOP_TOKEN": TOKEN}
    load = os.getloadavg()
    begun = time.time()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    profiles: dict[str, collections.Counter[str]] = {}
    notes: list[str] = []
    pool = multiprocessing.get_context("spawn").Pool(CLIENTS)
    base = _postgres()
    schema = f"bench_service_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        redis = Redis(here)
        try:
            stores: list[tuple[str, list[str] | None]] = [
                ("floor", None),
                ("sqlite", ["--store", f"sqlite:///{here / 'bench.db'}"]),
                ("redis", ["--store", f"redis://127.0.0.1:{redis.port}/0?prefix=svc"]),
            ]
            if base is not None:
                stores.append(
                    (
                        "split",
                        [
                            "--store",
                            f"redis://127.0.0.1:{redis.port}/0?prefix=svcs",
                            "--records",
                            f"{base}?schema={schema}",
                        ],
                    )
                )
            else:
                notes.append("PostgreSQL was not reachable (BENCH_POSTGRES): no split rows.")
            before = os.environ.get("BENCH_BEFORE")  # "<commit>=<its src directory>"
            if before:  # the same replicas on an earlier antiloop, in the same run
                commit, _, src = before.partition("=")
                stores += [  # a Redis prefix, file and schema of their own
                    (
                        f"{name}, before ({commit})",
                        [
                            *(
                                a.replace("prefix=svc", "prefix=old")
                                .replace("bench.db", "before.db")
                                .replace(f"schema={schema}", f"schema={schema}_old")
                                for a in args
                            ),
                            "--before",
                            src,
                        ],
                    )
                    for name, args in stores
                    if args is not None
                ]
            offset = 10_000_000
            for name, args in stores:
                run_env = env
                if args is not None and "--before" in args:
                    run_env = {**env, "PYTHONPATH": args[-1]}
                    args = args[:-2]
                argv = (
                    [sys.executable, "-m", "bench.capacity_floor"]
                    if args is None
                    else [
                        sys.executable,
                        "-m",
                        "antiloop",
                        "serve",
                        "--port",
                        "0",
                        "--log-level",
                        "info",
                        *args,
                    ]
                )
                log = here / f"{name.split(',')[0]}-{len(results)}.log"
                process, port = _spawn(argv, log, run_env)
                try:
                    watch = redis if name.startswith(("redis", "split")) else None
                    results[name] = _measure(pool, process, port, watch, n, nb, offset)
                    offset += 10_000_000
                    if args is not None:
                        found = _profile(pool, process, port, here, n // 2, offset)
                        offset += 10_000_000
                        if found is not None:
                            profiles[name] = found
                finally:
                    process.terminate()
                    process.wait(timeout=10)
        finally:
            pool.close()
            redis.stop()
            if base is not None:
                for name in (schema, f"{schema}_old"):
                    with contextlib.suppress(Exception):
                        _drop_schema(base, name)
    end = os.getloadavg()
    notes.append(
        f"Load average (1, 5, 15 min) {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the "
        f"start, {end[0]:.1f} / {end[1]:.1f} / {end[2]:.1f} at the end of "
        f"{time.time() - begun:.0f} s on {os.cpu_count()} cores, shared with other work: "
        "compare within this run, and read CPU per step, which the load changes least."
    )
    return _section(results, profiles, notes)


def _section(
    results: dict[str, dict[str, dict[str, Any]]],
    profiles: dict[str, collections.Counter[str]],
    notes: list[str],
) -> str:
    floor = results["floor"]
    rows = []
    for name, got in results.items():
        for kind in ("single", "batch"):
            m = got[kind]
            share = m["steps_per_s"] / floor[kind]["steps_per_s"]
            trips = f"{m['trips']:.2f}" if "trips" in m else "-"
            label = "single" if kind == "single" else "batch of 100"
            rows.append(
                f"| {name} | {label} | {m['steps']:,} | {m['steps_per_s']:,.0f} | {share:.0%} | "
                f"{m['p50']:.1f} | {m['p99']:.1f} | {m['cpu']:.3f} | {trips} |"
            )
    checks = []
    for name, got in results.items():
        if name == "floor" or "before" in name:
            continue
        single, batch = got["single"], got["batch"]
        share = single["steps_per_s"] / floor["single"]["steps_per_s"]
        gain = batch["steps_per_s"] / single["steps_per_s"]
        rt: float | None = single.get("trips")

        def met(ok: bool) -> str:
            return "yes" if ok else "**no**"

        checks.append(
            f"| {name} | {share:.0%} (>= {SHARE[name]:.0%}) {met(share >= SHARE[name])} | "
            f"{gain:.1f}x {met(gain >= BATCH_GAIN)} | "
            + (f"{rt:.2f} {met(rt <= ROUND_TRIPS)}" if rt is not None else "-")
            + f" | {single['cpu']:.3f} {met(single['cpu'] <= CPU_MS)} | "
            f"{single['p99']:.1f} {met(single['p99'] <= P99_MS)} |"
        )
    lines = [
        "## service: one replica against the HTTP floor (SQLite, Redis, split)",
        "",
        "One run, side by side (`python -m bench service`): the floor is the same Starlette/"
        "uvicorn stack with serve's limits answering a fixed verdict, no guard, no store "
        "(`bench/capacity_floor.py`); each store is one real `antiloop serve` replica (uvicorn, "
        "one worker, default guard config). Clients in two processes of their own (asyncio, "
        "keep-alive; 8 connections in all for single steps, 4 for batches of 100), "
        f"{SESSIONS:,} sessions of distinct steps, four tools in turn. CPU: user + system time "
        "of the replica's process per step. Round trips: Redis's read events per step "
        "(a redis-server of the bench's own).",
        "",
        "| server | request | steps | steps/s | of the floor | p50 ms | p99 ms | CPU ms / step "
        "| Redis round trips / step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "| store | single steps, of the floor | batch of 100 / single (>= 10x) | round trips / "
        "single step (<= 2) | CPU ms / single step (<= 0.3) | p99 ms, 8 clients (<= 25) |",
        "|---|---|---|---|---|---|",
        *checks,
    ]
    lines += ["", *WHY]
    if profiles:
        kinds = [WAITING] + [k for k, _ in KINDS] + [OTHER]
        names = list(profiles)
        lines += [
            "",
            "### Where a replica's time goes (py-spy, single steps)",
            "",
            "`py-spy record --format raw --rate 250 --nonblocking` on the replica under the "
            "single-step load (half as many requests again), every thread py-spy takes for "
            "active. Each sample is counted once: as `waiting` when its innermost frame waits "
            "(a lock, a condition, a socket read, the event loop with nothing to do), else under "
            "the innermost frame that names a kind below (so `judging` is the core's own time, "
            "`HTTP` what a request costs outside the store and the guard). Shares of the "
            "samples:",
            "",
            "| what | " + " | ".join(names) + " |",
            "|---|" + "---:|" * len(names),
        ]
        totals = {name: sum(profiles[name].values()) or 1 for name in names}
        for kind in kinds:
            cells = [f"{profiles[name][kind] / totals[name]:.0%}" for name in names]
            if any(c != "0%" for c in cells):
                lines.append(f"| {kind} | " + " | ".join(cells) + " |")
        lines.append("| samples | " + " | ".join(f"{totals[n]:,}" for n in names) + " |")
    lines += ["", *notes]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
