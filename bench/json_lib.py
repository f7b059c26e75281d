"""JSON in the stores: would orjson pay? Stdlib against orjson in one run, on what uses it.

The state codec is ``marshal`` (no JSON). JSON is the audit record body (written per step,
read by ``log show``/``verify``/the dashboard) and the approval request. Measured: the encode
and decode of a realistic audit body alone, ``Guard.record`` of a step with audit on SQLite,
and ``verify_audit`` plus ``audit_records`` over a log, each with the stdlib and with orjson
put in its place (the same bodies: orjson's output is the stdlib's compact form here).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from antiloop import Guard, GuardConfig, Step
from antiloop.audit import AuditEvent
from antiloop.core.verdict import Verdict
from antiloop.stores import auditlog
from antiloop.stores.sqlite import SQLiteStore


@contextmanager
def _library(fast: bool) -> Iterator[None]:
    """The audit log's JSON through orjson (``fast``) or the stdlib, restored after."""
    import orjson

    saved = auditlog._fast
    auditlog._fast = orjson if fast else None
    try:
        yield
    finally:
        auditlog._fast = saved


def _event(i: int) -> AuditEvent:
    return AuditEvent(
        "step",
        "session-1",
        1_700_000_000.0 + i,
        agent="agent",
        index=i,
        tool="Bash",
        args={"command": f"pytest -q tests/test_{i % 7}.py", "timeout": 120},
        output="E   assert 1 == 2\n" * 20,
        exit_code=1,
        verdict=Verdict.stop("repeat", "looped", fingerprint="AGENT::a#ab", evidence=(2, 3)),
    )


def _best(fn: Callable[[], Any], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def _record_p50(store_dir: Path, n: int) -> float:
    store = SQLiteStore(store_dir / f"{time.monotonic_ns()}.db")
    guard = Guard(config=GuardConfig(mode="shadow", embedder="ngram"), store=store, audit=True)
    times = []
    for i in range(n):
        step = Step(tool="Bash", args={"command": f"ls {i}"}, output="a\nb\n" * 10, session="s")
        t0 = time.perf_counter_ns()
        guard.record(step)
        times.append(time.perf_counter_ns() - t0)
    store.close()
    return statistics.median(times) / 1000


def _read_log(store_dir: Path, n: int) -> float:
    store = SQLiteStore(store_dir / f"log-{time.monotonic_ns()}.db")
    for i in range(n):
        store.append_audit(_event(i))
    t0 = time.perf_counter()
    assert store.verify_audit() == []
    assert sum(1 for _ in store.audit_records()) == n
    took = time.perf_counter() - t0
    store.close()
    return took * 1000


def run(quick: bool = False) -> str:
    try:
        import orjson  # noqa: F401 - only to say whether it is there
    except ImportError:
        return "## JSON in the stores: stdlib against orjson\n\norjson is not installed here.\n"
    text = auditlog.build_record(_event(1), 1, auditlog.GENESIS).body
    body = json.loads(text)
    number, steps, records = (2000, 200, 500) if quick else (20000, 1000, 5000)
    rows: list[tuple[str, float, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        found = {}
        for fast in (False, True):
            with _library(fast):
                found[fast] = {
                    "encode": _best(lambda: auditlog._dumps(body), number),
                    "decode": _best(lambda: auditlog.loads(text), number),
                    "record": _record_p50(where, steps),
                    "read": _read_log(where, records),
                }
        plain, fast_ = found[False], found[True]
    names = {
        "encode": ("encode an audit body (µs)", f"{len(text)} bytes"),
        "decode": ("decode an audit body (µs)", ""),
        "record": ("Guard.record p50, audit on SQLite (µs)", f"{steps} steps"),
        "read": ("verify_audit + audit_records (ms)", f"{records} records"),
    }
    for key, (label, note) in names.items():
        rows.append((label, plain[key], fast_[key], note))
    lines = [
        "## JSON in the stores: stdlib against orjson",
        "",
        "| what | stdlib | orjson | stdlib / orjson | |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    lines += [f"| {a} | {b:.1f} | {c:.1f} | {b / c:.2f}x | {d} |" for a, b, c, d in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
