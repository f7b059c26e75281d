"""Group commit: requests in flight together are judged as one batch, each as if alone.

Many ``POST /v1/steps`` requests queued in the same moment (``StepGroups.judge`` from one
event loop) are judged in groups; every session's verdicts must be those of one in-process
guard fed that session's steps in order, on SQLite, Redis and memory, and a store that hangs
still costs each request the store timeout at most.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.stores.test_fleet_equivalence import FIELDS, _step

from antiloop import Guard, GuardConfig
from antiloop.core.redact import redact_value
from antiloop.core.step import step_from_dict
from antiloop.server.limits import Limits
from antiloop.server.service import Service
from antiloop.stores.memory import MemoryStore

TOKEN = "groups-token"  # noqa: S105 - a test token


def _requests(sessions: int, steps: int) -> list[list[dict[str, Any]]]:
    """Requests of one step each (every third a batch of two), sessions interleaved."""
    out: list[list[dict[str, Any]]] = []
    for n in range(steps):
        for s in range(sessions):
            step = _step(s, n)
            if (s + n) % 5 == 0:  # sent again with its id: the first verdict, counted once
                step["id"] = f"call-{s}-{n}"
                out.append([step])
                out.append([dict(step)])
            elif (s + n) % 3 == 0:
                out.append([step, _step(s, n + 100)])
            else:
                out.append([step])
    return out


def _expected(requests: list[list[dict[str, Any]]]) -> dict[str, list[list[Any]]]:
    guard = Guard(config=GuardConfig(embedder="ngram"))
    found: dict[str, list[list[Any]]] = {}
    for request in requests:
        for step in request:
            verdict = guard.record(step_from_dict(dict(step)))
            wire = redact_value({**verdict.to_wire(0), "hint": verdict.hint})
            found.setdefault(step["session"], []).append([wire[f] for f in FIELDS])
    return found


@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)]
)
def test_requests_in_flight_together_are_judged_as_one_guard_would(
    kind: str, tmp_path: Path
) -> None:
    """Every request queued at once: fewer groups than requests, the same verdicts."""
    from tests.stores.conftest import Backend

    backend = Backend(kind, tmp_path)
    try:
        service = Service(backend.open(), TOKEN, config=GuardConfig(embedder="ngram"))
        requests = _requests(sessions=12, steps=10)

        async def all_at_once() -> list[list[dict[str, Any]]]:
            return await asyncio.gather(*(service.groups.judge(r) for r in requests))

        answers = asyncio.run(all_at_once())
        got: dict[str, list[list[Any]]] = {}
        for request, answer in zip(requests, answers, strict=True):
            assert [w["index"] for w in answer] == list(range(len(request)))  # its own numbers
            for step, wire in zip(request, answer, strict=True):
                assert wire["session"] == step["session"]
                got.setdefault(step["session"], []).append([wire[f] for f in FIELDS])
        assert got == _expected(requests)
        assert 1 < service.groups.judged < len(requests)  # grouped, within MAX_GROUP steps
        actions = {row[0] for rows in got.values() for row in rows}
        assert actions == {"continue", "ask", "stop"}
    finally:
        backend.cleanup()


class _Hanging(MemoryStore):
    """A memory store whose transactions block while ``hung`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hung = threading.Event()
        self.released = threading.Event()

    def transaction(self, session: str) -> Any:
        if self.hung.is_set():
            self.released.wait(30)
        return super().transaction(session)


def test_a_hung_store_costs_each_queued_request_the_timeout_then_the_next_group_goes() -> None:
    """The group in the hung store and the requests queued behind it answer by on_store_error
    after store_timeout; once the store is back, new requests are judged."""
    store = _Hanging()
    limits = Limits(store_timeout=0.5)
    service = Service(store, TOKEN, config=GuardConfig(embedder="ngram"), limits=limits)

    async def run() -> tuple[list[list[dict[str, Any]]], float, list[dict[str, Any]]]:
        store.hung.set()
        started = time.monotonic()
        stuck = await asyncio.gather(
            *(
                service.groups.judge([{"session": f"h{n}", "tool": "Read", "args": {"p": n}}])
                for n in range(5)
            ),
            return_exceptions=True,
        )
        took = time.monotonic() - started
        store.hung.clear()
        store.released.set()
        later = await service.groups.judge([{"session": "h9", "tool": "Read", "args": {}}])
        return stuck, took, later  # type: ignore[return-value]

    from antiloop.server.limits import StoreTimeout

    stuck, took, later = asyncio.run(run())
    assert all(isinstance(answer, StoreTimeout) for answer in stuck), stuck
    assert took < 5  # each waited its own 0.5 s, not one after another
    assert later[0]["action"] == "continue"
    assert later[0]["reason"] == ""


@pytest.mark.parametrize(
    "wire",
    [
        {"index": 0, "action": "continue", "detector": None, "reason": "", "hint": "", "n": 1.5},
        {"reason": "ran `mysql -phunter2 -e x` twice", "fingerprint": "AGENT::a::b::c::d"},
        {"session": "sk-abcdefghijklmnopqrstuvwx1234", "token": "t0k3n", "password": None},
        {
            "evidence": ["AKIAABCDEFGHIJKLMNOP", 3],
            "session_key": "x9Qz7Lp2Vr8Kt4Wm6Ny1",
            "ok": True,
        },
    ],
)
def test_an_answer_is_redacted_as_redact_value_redacts_it(wire: dict[str, Any]) -> None:
    """The verdict's own redaction (its keys' checks made once) equals ``redact_value``."""
    from antiloop.server.service import _redacted

    assert _redacted(dict(wire)) == redact_value(wire)
    assert _redacted(dict(wire)) == redact_value(wire)  # a second time: from the key memo


def test_a_fault_in_one_request_is_its_own_not_its_groups(tmp_path: Path) -> None:
    """A step whose judgement raises fails its own request; the others queued with it are
    judged again alone (the failed group kept nothing) and get their verdicts, once."""
    service = Service(f"sqlite:///{tmp_path / 'f.db'}", TOKEN, config=GuardConfig(embedder="ngram"))
    judge = service.judge

    def faulty(raw: Any, index: int, seen: Any) -> dict[str, Any]:
        if (raw.get("session") if isinstance(raw, dict) else raw.session) == "bad":
            raise RuntimeError("a fault in one step")
        return judge(raw, index, seen)

    service.judge = faulty  # type: ignore[method-assign]
    steps = [
        {"session": s, "tool": "Read", "args": {"path": p}}
        for s, p in (("a", "x"), ("a", "y"), ("bad", "x"), ("c", "x"))
    ]

    async def together() -> list[Any]:
        return await asyncio.gather(
            *(service.groups.judge([dict(s)]) for s in steps), return_exceptions=True
        )

    first, a, bad, c = asyncio.run(together())  # the first alone, the other three a group
    assert isinstance(bad, RuntimeError)
    assert [first[0]["action"], a[0]["action"], c[0]["action"]] == ["continue"] * 3
    assert [service.store.peek(s).steps for s in ("a", "c")] == [2, 1]  # each judged once
    assert service.groups.judged == 5  # [a], [a, bad, c] failed whole, then [a], [bad], [c]
    assert service.store.peek("bad") is None
