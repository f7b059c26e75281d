"""The engine: Guard.record() per step and `antiloop check` throughput, against floors."""

from __future__ import annotations

import cProfile
import gc
import hashlib
import io
import json
import pstats
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from antiloop import Guard, GuardConfig, Step, step_from_dict
from antiloop.commands.check import judge_stream
from antiloop.core.deferred import BUDGET
from bench.workload import steps

STEPS = 100_000
SESSIONS = 10_000
ANALYSIS = """What the profiles show (after issue 17's core change). Readings are made only for the
steps whose procedure matches one of the last steps of its stream, and for failures (their
error line alone): about a tenth of the steps here. What is left is canonicalisation
(`procedure_of`: shell commands read by shape, then filled in; flag specs, pattern words),
which every step needs because its key decides sameness, then the error line of failing
steps, the detectors, the step's JSON (orjson where installed) and building the `Step`."""


def _quantiles(samples: list[int]) -> tuple[float, float]:
    samples.sort()
    p50 = samples[len(samples) // 2] / 1000
    p99 = samples[int(len(samples) * 0.99)] / 1000
    return p50, p99


def naive_floor(events: list[Step]) -> list[int]:
    """Hash each step's tool, args and output and compare with its stream's previous step."""
    last: dict[tuple[str, str], bytes] = {}
    times = []
    clock = time.perf_counter_ns
    for step in events:
        t0 = clock()
        h = hashlib.sha256()
        h.update(step.tool.encode())
        h.update(json.dumps(step.args, sort_keys=True).encode())
        h.update((step.output or "").encode())
        digest = h.digest()
        key = (step.session, step.agent)
        _ = last.get(key) == digest
        last[key] = digest
        times.append(clock() - t0)
    return times


def guard_record(events: list[Step]) -> tuple[list[int], Guard]:
    guard = Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
    times = []
    clock = time.perf_counter_ns
    record = guard.record
    for step in events:
        t0 = clock()
        record(step)
        times.append(clock() - t0)
    return times, guard


def naive_check(f: Any) -> None:
    """The naive guard over JSON lines: parse each, hash tool, args and output, compare."""
    last: dict[tuple[str, str], bytes] = {}
    for line in f:
        if not line.strip():
            continue
        event = json.loads(line)
        h = hashlib.sha256()
        h.update(event["tool"].encode())
        h.update(json.dumps(event.get("args"), sort_keys=True).encode())
        h.update((event.get("output") or "").encode())
        digest = h.digest()
        key = (event.get("session", ""), event.get("agent", ""))
        _ = last.get(key) == digest
        last[key] = digest


def check_vs_parse(lines: bytes) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "steps.jsonl")
        path.write_bytes(lines)
        t0 = time.perf_counter()
        with path.open("rb") as f:
            for line in f:
                if line.strip():
                    json.loads(line)
        parse = time.perf_counter() - t0
        t0 = time.perf_counter()
        with path.open("rb") as f:
            naive_check(f)
        naive = time.perf_counter() - t0
        t0 = time.perf_counter()
        with path.open("rb") as f:
            judge_stream(
                f, io.StringIO(), Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
            )
        check = time.perf_counter() - t0
    return parse, naive, check


def idle_session_bytes(events: list[Step]) -> float:
    """Memory per session beyond its windows: one step each, then the windows emptied."""
    gc.collect()
    tracemalloc.start()
    guard = Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
    seen: set[str] = set()
    for step in events:
        if step.session not in seen:
            seen.add(step.session)
            guard.record(step)
    for sid in guard.sessions:
        state = guard.store.peek(sid)
        for stream in state.streams.values() if state else ():
            stream.window.clear()
            stream.messages.clear()
    gc.collect()
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / max(len(seen), 1)


def state_per_session(events: list[Step]) -> tuple[float, float, int]:
    gc.collect()
    tracemalloc.start()
    guard = Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
    for step in events:
        guard.record(step)
    gc.collect()
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    states = [guard.store.peek(sid) for sid in guard.sessions]
    records = sum(len(s.window) for st in states if st for s in st.streams.values())
    sessions = len(states)
    return current / sessions, current / max(records, 1), records


class _Discard(io.StringIO):
    """An output that keeps nothing, so that only the guard's memory is measured."""

    def write(self, text: str) -> int:
        return len(text)


def long_stream(n: int, sessions: int) -> list[tuple[int, float]]:
    """Memory held while `antiloop check` judges a long stream: (steps so far, MB) checkpoints."""
    marks = {n * k // 4 for k in range(1, 5)}
    seen: list[tuple[int, float]] = []

    def lines() -> Any:
        for i, event in enumerate(steps(n, sessions, seed=11), 1):
            yield json.dumps(event).encode() + b"\n"
            if i in marks:
                gc.collect()
                seen.append((i, tracemalloc.get_traced_memory()[0] / 1e6))

    tracemalloc.start()
    judge_stream(lines(), _Discard(), Guard(config=GuardConfig(embedder="ngram", mode="shadow")))
    tracemalloc.stop()
    return seen


def profile(events: list[Step], lines: bytes | None = None) -> str:
    """The top functions by own time: of ``record()`` over ``events``, or of ``check``."""
    guard = Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
    prof = cProfile.Profile()
    if lines is None:
        prof.enable()
        for step in events:
            guard.record(step)
        prof.disable()
    else:
        prof.enable()
        judge_stream(io.BytesIO(lines), _Discard(), guard)
        prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(14)
    rows = [
        line
        for line in out.getvalue().splitlines()
        if line.strip() and line.strip()[0].isdigit() and ("/" in line or "{" in line)
    ]
    table = ["| ncalls | tottime (s) | cumtime (s) | function |", "|---:|---:|---:|---|"]
    for line in rows[:14]:
        parts = line.split(None, 5)
        where = parts[5].replace(str(Path(__file__).parents[1] / "src") + "/", "")
        where = where.replace("/work/main/src/", "").replace("|", "/")
        table.append(f"| {parts[0]} | {parts[1]} | {parts[3]} | `{where[-90:]}` |")
    return "\n".join(table)


def run(quick: bool = False) -> str:
    n, sessions = (10_000, 1_000) if quick else (STEPS, SESSIONS)
    raw: list[dict[str, Any]] = list(steps(n, sessions))
    events = [step_from_dict(e) for e in raw]
    lines = b"".join(json.dumps(e).encode() + b"\n" for e in raw)
    del raw
    gc.collect()
    gc.freeze()  # the input steps are the harness's, not the guard's: keep them out of GC passes

    floor_p50, floor_p99 = _quantiles(naive_floor(events))
    times, _ = guard_record(events)
    rec_p50, rec_p99 = _quantiles(times)
    rec_mean = statistics.fmean(times) / 1000
    parse_s, naive_s, check_s = check_vs_parse(lines)
    per_session, per_record, records = state_per_session(events)
    idle = idle_session_bytes(events)
    prof = profile(events[: min(20_000, n)])
    head = b"".join(lines.splitlines(keepends=True)[: min(20_000, n)])
    check_prof = profile([], head)
    del events
    gc.unfreeze()
    long_n = 100_000 if quick else 1_000_000
    marks = long_stream(long_n, sessions)
    growth = " → ".join(f"{mb:.1f} MB at {i:,}" for i, mb in marks)

    rows = [
        ("Guard.record() p50", f"{rec_p50:.1f} µs", f"{floor_p50:.1f} µs", rec_p50 / floor_p50),
        ("Guard.record() p99", f"{rec_p99:.1f} µs", f"{floor_p99:.1f} µs", rec_p99 / floor_p99),
        (
            "antiloop check",
            f"{n / check_s:,.0f} steps/s",
            f"{n / naive_s:,.0f} steps/s",
            check_s / naive_s,
        ),
        (
            "antiloop check vs JSON parse",
            f"{n / check_s:,.0f} steps/s",
            f"{n / parse_s:,.0f} steps/s",
            check_s / parse_s,
        ),
    ]
    print(f"{'measure':<22} {'antiloop':>18} {'floor':>18} {'ratio':>7}")
    for name, ours, floor, ratio in rows:
        print(f"{name:<22} {ours:>18} {floor:>18} {ratio:>6.2f}x")
    print(f"state kept: {per_session:,.0f} B per session, {per_record:,.0f} B per window record")
    print(f"idle session beyond its windows: {idle:,.0f} B")

    table = "\n".join(
        f"| {name} | {ours} | {floor} | {ratio:.2f}x |" for name, ours, floor, ratio in rows
    )
    held = f"{BUDGET.used / 1e6:.1f} MB in {len(BUDGET):,} texts"
    return f"""## Engine: `Guard.record()` and `antiloop check`

The guard runs in shadow mode so that every step is judged (a stopped session would answer
later steps with a cheap `terminated`).

Workload: {n:,} steps over {sessions:,} interleaved sessions, outputs of about 2 KB, a mix of
Bash (grep, pytest, npm build), Grep, Read and Edit with failures and about 5% repeats
(`bench/workload.py`). Floors, measured in the same run: the naive guard, which hashes each
step's tool, args and output with hashlib and compares the digest with the previous step of its
stream (for `record()` on the parsed steps; for `check` it also parses each JSON line with the
json module, as `check` must), and a bare JSON parse of the lines.

| measure | antiloop | floor | ratio |
|---|---:|---:|---:|
{table}

Mean `record()`: {rec_mean:.1f} µs. Targets (issue 17): `check` <= 1.5x the naive guard,
`record()` p50 <= 2.5x the naive guard, memory per idle session <= 1 KB beyond its windows.

State kept after the run: {per_session:,.0f} bytes per session ({records:,} window records,
{per_record:,.0f} bytes per record, everything included: session and stream objects, windows of
digests and readings, dictionaries). A session idle after one step, its windows emptied,
holds {idle:,.0f} bytes. Result texts are kept only for deferred readings (`antiloop.core.deferred`:
the last steps of each stream, up to the longest cycle period, under one global budget of
{BUDGET.limit / 2**20:.0f} MiB; after the run {held}).

Memory held while `antiloop check` judges a {long_n:,}-step stream over {sessions:,} sessions
(tracemalloc, after a collection; the verdict lines go to a sink that keeps nothing):
{growth}. It levels off once every session's windows are full and the text budget is reached.

### Where the time goes (cProfile, by own time)

{min(20_000, n):,} `record()` calls:

{prof}

`antiloop check` (`judge_stream`) over the first {min(20_000, n):,} lines:

{check_prof}

{ANALYSIS}
"""
