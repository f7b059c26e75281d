"""The store contract: every backend (memory, sqlite, redis, postgres, split) passes these tests.

Collected by tests/stores/conftest.py; the ``backend`` and ``store`` fixtures are parametrised
over the backends (split: state in Redis, records in PostgreSQL).
"""

from __future__ import annotations

import json
import threading
from array import array
from typing import Any

import pytest

from antiloop import Guard, Step
from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.audit import AuditEvent
from antiloop.core.history import MessageRecord, SessionState, StepRecord, StreamState
from antiloop.core.redact import REDACTED
from antiloop.core.result import Readings, SameResult
from antiloop.core.verdict import Action, Verdict
from antiloop.stores import ApprovalStore as ApprovalCapability
from antiloop.stores import AuditLog, Interventions, ResultCache, Store
from antiloop.stores.state import StateStore, judge


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _full_state() -> SessionState:
    readings = Readings(
        "e" * 16,
        1,
        "s" * 16,
        "1 failed",
        None,
        None,
        False,
        "E: x",
        1,
        (
            ("a.py", "f" * 64, 12.5),
            ("b.py", None, None),
        ),
    )
    record = StepRecord(
        3, "bash", "test", "d" * 16, "pytest", readings, (SameResult("1 failing", "abcd1234"), None)
    )
    stream = StreamState(
        [record],
        [MessageRecord(3, "try 2", "try 0", False, array("f", [0.5, -0.25]))],
        run=2,
        fail_tool="bash",
        fails=2,
        fail_steps=(2, 3),
        blanks=0,
        stopped={"d" * 16: "AGENT::a::test::pytest::1 failing#abcd1234"},
        fail_errors=("0badc0de", "0badc0de"),
        chains={  # what the opt-in detectors follow (antiloop.core.extra.detectors)
            "~observed": (3, "step", (("a.py", "f" * 64),), (("r.py", "0badc0de", "c0ffee00"),)),
            "hidden-repeat": (3, "d" * 16, "a.py", ("e" * 16, None), 2, 1, True, (1, 2, 3)),
        },
    )
    return SessionState(
        steps=4,
        goal="fix the test",
        goal_vector=array("f", [1.0, 0.0]),
        streams={"agent": stream},
        ended=Verdict.stop("repeat", "looped", fingerprint="fp", evidence=(2, 3)),
        seen={"call_1": None, "call_2": Verdict.stop("repeat", "looped", fingerprint="fp")},
    )


def test_every_builtin_store_has_every_capability(store: Any) -> None:
    """Each built-in store is a Store with the audit, approval, cache and people capabilities."""
    for protocol in (Store, AuditLog, ApprovalCapability, ResultCache, Interventions):
        assert isinstance(store, protocol), protocol.__name__


def test_unknown_session_is_none_and_new_one_starts_empty(store: Any) -> None:
    """peek of an unknown session is None; a transaction on it starts from an empty state."""
    assert store.peek("nobody") is None
    with store.transaction("new") as state:
        assert state == SessionState()
        state.steps = 1
    assert store.peek("new").steps == 1
    assert "new" in store.sessions()


def test_transaction_round_trips_every_field(backend: Any) -> None:
    """A state saved in one store object reads back equal, every field, in another."""
    a, b = backend.open(), backend.open()
    full = _full_state()
    with a.transaction("s") as state:
        state.steps, state.goal, state.goal_vector = full.steps, full.goal, full.goal_vector
        state.streams.update(full.streams)
        state.ended = full.ended
        state.seen.update(full.seen)
    assert b.peek("s") == full
    with b.transaction("s") as state:
        assert state == full
        assert len(state.streams["agent"].window) == 1


def test_failed_transaction_saves_nothing(backend: Any) -> None:
    """A transaction that raises leaves the saved state and the audit log as they were."""
    store = backend.open()
    with store.transaction("s") as state:
        state.steps = 1

    def fail() -> None:
        with store.transaction("s") as state:
            if backend.kind != "memory":  # memory hands out the live state (documented)
                state.steps = 99
            store.append_audit(AuditEvent("step", "s", 1.0, tool="x"))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail()
    assert store.peek("s").steps == 1
    assert list(store.audit_records("s")) == []
    with store.transaction("s") as state:  # the lock was released
        state.steps = 2
    assert store.peek("s").steps == 2


def test_forget_drops_a_session(store: Any) -> None:
    """forget removes the session's state, feedback and stop flag."""
    with store.transaction("s") as state:
        state.steps = 1
    store.push_feedback("s", "hi")
    store.request_stop("s", "ann")
    store.forget("s")
    assert store.peek("s") is None
    assert "s" not in store.sessions()
    assert store.pop_feedback("s") == []
    assert store.stop_requested("s") is None


def test_threads_on_two_store_objects_never_lose_an_update(backend: Any) -> None:
    """Concurrent read-modify-writes through two store objects all land (no lost update)."""
    stores = [backend.open(), backend.open()]

    def work(store: Any) -> None:
        for _ in range(25):
            with store.transaction("counter") as state:
                state.steps += 1

    threads = [threading.Thread(target=work, args=(stores[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stores[0].peek("counter").steps == 100


def test_two_guards_on_one_store_stop_a_repeat(backend: Any) -> None:
    """A step recorded by one guard and repeated through another is stopped as a loop."""
    one, two = Guard(store=backend.open(), audit=True), Guard(store=backend.open(), audit=True)
    step = Step(
        tool="grep", args={"pattern": "doubleJump"}, output="src/a.ts:3: doubleJump", session="s"
    )
    assert one.record(step).action is Action.CONTINUE
    verdict = two.record(step)
    assert verdict.action is Action.STOP
    assert verdict.detector == "repeat"
    assert one.check("grep", {"pattern": "doubleJump"}, session="s").action is Action.STOP
    assert [r.action for r in backend.open().audit_records("s")] == ["continue", "stop"]


def test_a_step_delivered_twice_is_judged_once(backend: Any) -> None:
    """The same step id through two guards: the first verdict again, nothing recorded twice."""
    one, two = Guard(store=backend.open(), audit=True), Guard(store=backend.open(), audit=True)
    grep = {"tool": "Grep", "args": {"pattern": "x"}, "output": "a.ts:3: x", "session": "s"}
    first = one.record({**grep, "id": "call_1"})
    again = two.record({**grep, "id": "call_1"})
    assert first.action is again.action is Action.CONTINUE
    assert backend.open().peek("s").steps == 1
    stop = two.record({**grep, "id": "call_2"})
    assert (stop.action, stop.detector) == (Action.STOP, "repeat")
    retried = one.record({**grep, "id": "call_2"})  # a retry of the stop answers the stop
    assert (retried.action, retried.detector, retried.fingerprint) == (
        Action.STOP,
        "repeat",
        stop.fingerprint,
    )
    records = list(backend.open().audit_records("s"))
    assert [(r.index, r.action) for r in records] == [(0, "continue"), (1, "stop")]


def test_audit_records_are_chained_redacted_and_capped(backend: Any) -> None:
    """Audit records keep order, redact secrets, cap text with full digests, and verify."""
    store = backend.open(audit_cap=64)
    secret = "sk-ant-api03-" + "A" * 40
    long_output = "line with " + secret + "\n" + "x" * 500
    with store.transaction("s"):
        store.append_audit(
            AuditEvent(
                "step",
                "s",
                10.0,
                agent="a",
                index=0,
                tool="bash",
                args={
                    "command": f"curl -H 'Authorization: Bearer {secret}'",
                    "password": "hunter2",
                },
                output=long_output,
                verdict=Verdict.stop("repeat", "looped", fingerprint="AGENT::a::bash::x::y"),
                detail={"approved_by": "ann"},
            )
        )
    store.append_audit(AuditEvent("reset", "s", 11.0, detail={"reason": "user spoke"}))
    store.append_audit(AuditEvent("step", "other", 12.0, tool="read"))
    records = list(store.audit_records())
    assert [r.seq for r in records] == [1, 2, 3]
    first = records[0]
    assert secret not in (first.args or "") + (first.output or "")
    assert "hunter2" not in (first.args or "")
    assert "[REDACTED]" in (first.output or "")
    assert len((first.output or "").encode()) <= 64
    assert first.output_bytes is not None
    assert first.output_bytes > 64
    assert first.truncated
    assert (first.action, first.detector, first.reason) == ("stop", "repeat", "looped")
    assert first.approved_by == "ann"
    assert records[1].prev == first.hash
    assert records[2].prev == records[1].hash
    assert [r.seq for r in store.audit_records("s")] == [1, 2]
    assert [r.seq for r in store.audit_records(since_seq=2)] == [3]
    assert store.verify_audit() == []
    summaries = {s.session: s for s in store.session_summaries()}
    assert summaries["s"].records == 2
    assert summaries["s"].steps == 1
    assert summaries["s"].stopped == "repeat: looped"


def _edit_second_record(backend: Any) -> None:
    kind = backend.records_kind
    if kind == "memory":
        store = backend.open()
        row = store._rows[1]
        store._rows[1] = type(row)(row.seq, row.body.replace("b", "c"), row.hash)
    elif kind == "sqlite":
        backend.raw().execute(
            "UPDATE audit SET body = replace(body, '\"b\"', '\"c\"') WHERE seq = 2"
        )
    elif kind == "postgres":
        with backend.raw() as conn:
            conn.execute("UPDATE audit SET body = replace(body, '\"b\"', '\"c\"') WHERE seq = 2")
    else:
        client = backend.raw()
        key = f"antiloop-test-{backend.tag}:{{audit}}:log"
        item = client.lindex(key, 1)
        client.lset(key, 1, item.replace(b'"b"', b'"c"'))


def _delete_second_record(backend: Any) -> None:
    kind = backend.records_kind
    if kind == "memory":
        del backend.open()._rows[1]
    elif kind == "sqlite":
        backend.raw().execute("DELETE FROM audit WHERE seq = 2")
    elif kind == "postgres":
        with backend.raw() as conn:
            conn.execute("DELETE FROM audit WHERE seq = 2")
    else:
        client = backend.raw()
        key = f"antiloop-test-{backend.tag}:{{audit}}:log"
        client.lrem(key, 1, client.lindex(key, 1))


def _three_records(store: Any) -> None:
    for tool in ("a", "b", "c"):
        store.append_audit(AuditEvent("step", "s", 1.0, tool=tool))


def test_verify_names_an_edited_record(backend: Any) -> None:
    """Editing a stored record is reported as that record edited."""
    store = backend.open()
    _three_records(store)
    _edit_second_record(backend)
    problems = store.verify_audit()
    assert [(p.kind, p.seq) for p in problems] == [("edited", 2)]


def test_verify_names_a_deleted_record(backend: Any) -> None:
    """Deleting a stored record is reported as that record deleted."""
    store = backend.open()
    _three_records(store)
    _delete_second_record(backend)
    problems = store.verify_audit()
    assert [(p.kind, p.seq) for p in problems] == [("deleted", 2)]


def test_verify_names_an_inserted_record(backend: Any) -> None:
    """A record added behind the store's back (a copy of the last) is reported as inserted."""
    store = backend.open()
    _three_records(store)
    last = list(store.audit_records())[-1]
    body_row = None
    kind = backend.records_kind
    if kind == "memory":
        row = store._rows[-1]
        store._rows.append(type(row)(4, row.body.replace('"seq":3', '"seq":4'), row.hash))
    elif kind == "sqlite":
        backend.raw().execute(
            "INSERT INTO audit (seq, session, kind, at, body, hash) SELECT 4, session, kind, at,"
            " replace(body, '\"seq\":3', '\"seq\":4'), hash FROM audit WHERE seq = 3"
        )
    elif kind == "postgres":
        with backend.raw() as conn:
            conn.execute(
                "INSERT INTO audit (seq, session, kind, at, body, hash) SELECT 4, session, kind,"
                " at, replace(body, '\"seq\":3', '\"seq\":4'), hash FROM audit WHERE seq = 3"
            )
    else:
        client = backend.raw()
        key = f"antiloop-test-{backend.tag}:{{audit}}:log"
        body_row = client.lindex(key, 2)
        client.rpush(key, body_row.replace(b'"seq":3', b'"seq":4'))
    kinds = {(p.kind, p.seq) for p in store.verify_audit()}
    assert ("inserted", 4) in kinds
    assert last.seq == 3


def test_approvals_are_kept_redacted_and_decided_once(store: Any) -> None:
    """A pending request is decided once; a later answer does not change it; args are redacted."""
    req = ApprovalRequest(
        id="r1",
        session="s",
        agent="a",
        tool="bash",
        args={"command": "deploy", "token": "t0ps3cret"},
        risk="exec",
        reason="deploys",
        created_at=100.0,
        expires_at=200.0,
    )
    store.put_approval(req)
    store.put_approval(ApprovalRequest("r2", "t", "a", "read", {}, "read", "r", 50.0))
    got = store.get_approval("r1")
    assert got is not None
    assert got.status is ApprovalStatus.PENDING
    assert got.args["token"] == REDACTED
    assert store.get_approval("nope") is None
    decided = store.decide_approval("r1", "approved", "ann", comment="ok", now=150.0)
    assert (decided.status, decided.decided_by, decided.decided_at) == (
        ApprovalStatus.APPROVED,
        "ann",
        150.0,
    )
    again = store.decide_approval("r1", ApprovalStatus.DENIED, "bob", now=160.0)
    assert again.status is ApprovalStatus.APPROVED
    assert again.decided_by == "ann"
    assert [r.id for r in store.list_approvals()] == ["r2", "r1"]
    assert [r.id for r in store.list_approvals(status="pending")] == ["r2"]
    assert [r.id for r in store.list_approvals(session="s")] == ["r1"]
    with pytest.raises(KeyError):
        store.decide_approval("nope", "approved", "ann", now=1.0)


def test_expired_approval_becomes_expired_and_edits_are_kept(store: Any) -> None:
    """An answer after expires_at yields expired (deny); an edit keeps the edited args."""
    store.put_approval(
        ApprovalRequest("r", "s", "a", "bash", {}, "exec", "x", 0.0, expires_at=10.0)
    )
    late = store.decide_approval("r", "approved", "ann", now=10.0)
    assert (late.status, late.decided_by) == (ApprovalStatus.EXPIRED, "timeout")
    store.put_approval(ApprovalRequest("e", "s", "a", "bash", {"c": 1}, "exec", "x", 0.0))
    edited = store.decide_approval("e", "edited", "ann", edited_args={"c": 2}, now=5.0)
    assert edited.status is ApprovalStatus.EDITED
    assert edited.edited_args == {"c": 2}
    assert store.get_approval("e").edited_args == {"c": 2}


def test_concurrent_decisions_have_one_winner(backend: Any) -> None:
    """N threads on two store objects deciding one request: one winner, its decision stands."""
    stores = [backend.open(), backend.open()]
    stores[0].put_approval(ApprovalRequest("r", "s", "a", "bash", {}, "exec", "x", 0.0))
    results: dict[str, ApprovalRequest] = {}
    start = threading.Barrier(8)

    def decide(i: int) -> None:
        status = "approved" if i % 2 else "denied"
        start.wait()
        results[f"p{i}"] = stores[i % 2].decide_approval("r", status, f"p{i}", now=1.0 + i)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [f"p{i}" for i in range(8)]  # every thread got an answer
    winners = [who for who, got in results.items() if got.decided_by == who]
    assert len(winners) == 1
    winner = int(winners[0][1:])
    want = ApprovalStatus.APPROVED if winner % 2 else ApprovalStatus.DENIED
    for store in stores:
        final = store.get_approval("r")
        assert (final.status, final.decided_by, final.decided_at) == (
            want,
            f"p{winner}",
            1.0 + winner,
        )
    assert all(got == stores[1].get_approval("r") for got in results.values())
    assert [(r.id, r.status) for r in stores[1].list_approvals(status="pending")] == []


def test_the_approval_flow_seen_through_another_store_object(backend: Any) -> None:
    """Requested through one store object, pending in another, decided by one, seen by all."""
    asker, person, watcher = backend.open(), backend.open(), backend.open()
    asker.put_approval(
        ApprovalRequest(
            "q", "s", "a", "bash", {"command": "deploy"}, "exec", "deploys", 100.0, expires_at=400.0
        )
    )
    asker.put_approval(ApprovalRequest("late", "s", "a", "bash", {}, "exec", "x", 120.0, 200.0))
    seen = watcher.get_approval("q")
    assert (seen.status, seen.decided_by, seen.decided_at, seen.comment) == (
        ApprovalStatus.PENDING,
        None,
        None,
        None,
    )
    assert [r.id for r in watcher.list_approvals(status="pending")] == ["q", "late"]
    done = person.decide_approval("q", "denied", "ann", comment="not on a Friday", now=150.0)
    assert (done.status, done.decided_by, done.decided_at, done.comment) == (
        ApprovalStatus.DENIED,
        "ann",
        150.0,
        "not on a Friday",
    )
    for store in (asker, watcher):
        got = store.get_approval("q")
        assert (got.status, got.decided_by, got.decided_at, got.comment) == (
            ApprovalStatus.DENIED,
            "ann",
            150.0,
            "not on a Friday",
        )
        assert (got.session, got.tool, got.args, got.risk, got.reason) == (
            "s",
            "bash",
            {"command": "deploy"},
            "exec",
            "deploys",
        )
    expired = watcher.decide_approval("late", "approved", "bob", now=200.5)
    assert (expired.status, expired.decided_by) == (ApprovalStatus.EXPIRED, "timeout")
    got = asker.get_approval("late")
    assert (got.status, got.decided_by) == (ApprovalStatus.EXPIRED, "timeout")
    assert [r.id for r in person.list_approvals(status="pending")] == []
    assert sorted((r.id, r.status.value) for r in person.list_approvals(session="s")) == [
        ("late", "expired"),
        ("q", "denied"),
    ]


def test_interleaved_steps_through_two_guards_audit_each_step_once(backend: Any) -> None:
    """Two guards on two store objects, steps of one session from threads: the audit keeps
    each step once, numbered 0..n-1 in order (a retried judgement leaves no stale record)."""
    guards = [Guard(store=backend.open(), audit=True), Guard(store=backend.open(), audit=True)]
    per_thread, workers = 20, 4
    start = threading.Barrier(workers)

    def work(g: int) -> None:
        start.wait()
        for i in range(per_thread):
            path = f"g{g}/f{i}.py"
            guards[g % 2].record(
                Step(tool="Read", args={"file_path": path}, output=f"text {g} {i}", session="s")
            )

    threads = [threading.Thread(target=work, args=(g,)) for g in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n = workers * per_thread
    records = [r for r in backend.open().audit_records("s") if r.kind == "step"]
    assert [r.index for r in records] == list(range(n))
    paths = sorted(json.loads(r.args or "{}")["file_path"] for r in records)
    assert paths == sorted(f"g{g}/f{i}.py" for g in range(workers) for i in range(per_thread))
    assert {r.action for r in records} == {"continue"}
    assert backend.open().peek("s").steps == n
    assert backend.open().verify_audit() == []


def test_cache_keeps_values_until_they_expire(backend: Any) -> None:
    """A cached value is returned until its TTL passes (by the store's clock), then None."""
    clock = FakeClock()
    store = backend.open(clock=clock)
    assert store.cache_get("k") is None
    store.cache_put("k", "v1 ünïcode", 60)
    assert store.cache_get("k") == "v1 ünïcode"
    store.cache_put("k", "v2", 60)
    assert store.cache_get("k") == "v2"
    clock.now += 61
    assert store.cache_get("k") is None


def test_feedback_queue_and_stop_flag(store: Any) -> None:
    """Feedback pops in order and empties the queue; a stop request says who asked."""
    store.push_feedback("s", "first")
    store.push_feedback("s", "second")
    store.push_feedback("t", "other")
    assert store.pop_feedback("s") == ["first", "second"]
    assert store.pop_feedback("s") == []
    assert store.stop_requested("s") is None
    store.request_stop("s", "ann")
    assert store.stop_requested("s") == "ann"
    store.clear_stop("s")
    assert store.stop_requested("s") is None
    assert store.pop_feedback("t") == ["other"]


def test_url_never_shows_a_password(store: Any) -> None:
    """The store's url is a URL of its scheme and carries no password."""
    assert "://" in store.url
    assert "secret" not in store.url


def test_the_approval_flow_through_two_processes_leaves_these_records(backend: Any) -> None:
    """Asked through one store object and answered through another (k-of-n, an edit, a stop):
    the stored requests, votes, stop flag and the verdicts all say who decided what, when."""
    from antiloop.approval import Answer, ApprovalPolicy, Approvals

    clock = FakeClock(500.0)
    asking = Approvals(backend.open(), ApprovalPolicy(required=2), clock=clock, wait=False)
    people = Approvals(backend.open(), clock=clock)
    guard = Guard(store=backend.open(), approvals=asking)
    gate = guard.gate("Bash", {"command": "deploy --token t0ps3cret"}, session="s")
    request = gate.request
    assert request is not None
    assert gate.verdict.action is Action.ASK
    clock.now = 510.0
    people.answer(request.id, Answer.approve("alice", "fine by me"))
    people.answer(request.id, Answer.approve(" Alice ", "me again"))  # the same voter
    still = people.ledger.get_approval(request.id)
    assert (still.status, still.decided_by) == (ApprovalStatus.PENDING, None)
    clock.now = 520.0
    done = people.answer(request.id, Answer.approve("bob"))
    assert (done.status, done.decided_by, done.decided_at) == (
        ApprovalStatus.APPROVED,
        "alice, bob",
        520.0,
    )
    stored = asking.ledger.list_approvals(session="s")
    votes = [r for r in stored if r.extra.get("vote_for") == request.id]
    assert sorted((v.decided_by, v.status, v.decided_at, v.comment) for v in votes) == [
        ("alice", ApprovalStatus.APPROVED, 510.0, "fine by me"),
        ("bob", ApprovalStatus.APPROVED, 520.0, None),
    ]
    main = next(r for r in stored if r.id == request.id)
    assert (main.tool, main.risk, main.created_at, main.expires_at) == (
        "Bash",
        "exec",
        500.0,
        500.0 + asking.policy.timeout,
    )
    assert "t0ps3cret" not in json.dumps(main.to_dict())
    assert asking.wait(request.id).status is ApprovalStatus.APPROVED

    edit = guard.gate("Bash", {"command": "rm -rf build"}, session="s").request
    assert edit is not None
    people.answer(edit.id, Answer.deny("carol", "not now", stop=True))
    people.answer(edit.id, Answer.approve("dave"))  # too late: the first answer stands
    got = asking.ledger.get_approval(edit.id)
    assert (got.status, got.decided_by, got.comment) == (ApprovalStatus.DENIED, "carol", "not now")
    assert asking.ledger.stop_requested("s") == "carol"
    stopped = guard.gate("Read", {"file_path": "a.py"}, session="s")
    assert (stopped.verdict.action, stopped.verdict.detector) == (Action.STOP, "person")
    assert backend.open().peek("s").ended == stopped.verdict  # the session ended in the store
    assert asking.ledger.list_approvals(status="pending") == []


def test_concurrent_answers_to_a_two_approver_request_decide_it_once(backend: Any) -> None:
    """Four people approve a 2-of-n request at once through two store objects: it ends
    approved by two or more distinct voters whose votes are kept, nothing left pending."""
    from antiloop.approval import Answer, ApprovalPolicy, Approvals

    sides = [
        Approvals(backend.open(), ApprovalPolicy(required=2), wait=False),
        Approvals(backend.open(), ApprovalPolicy(required=2), wait=False),
    ]
    guard = Guard(store=backend.open(), approvals=sides[0])
    request = guard.gate("Bash", {"command": "make deploy"}, session="s").request
    assert request is not None
    start = threading.Barrier(4)
    answers: dict[str, ApprovalRequest] = {}

    def vote(i: int) -> None:
        start.wait()
        answers[f"p{i}"] = sides[i % 2].answer(request.id, Answer.approve(f"p{i}"))

    threads = [threading.Thread(target=vote, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == ["p0", "p1", "p2", "p3"]
    final = sides[1].ledger.get_approval(request.id)
    assert final.status is ApprovalStatus.APPROVED
    voters = final.decided_by.split(", ")
    assert len(voters) >= 2
    assert set(voters) <= {"p0", "p1", "p2", "p3"}
    assert voters == sorted(voters)
    kept = [r for r in sides[0].ledger.list_approvals() if r.extra.get("vote_for") == request.id]
    assert set(voters) <= {r.decided_by for r in kept}  # a vote after the decision is none
    assert len({r.decided_by for r in kept}) == len(kept)
    assert {r.status for r in kept} == {ApprovalStatus.APPROVED}
    assert {a.status for a in answers.values()} <= {ApprovalStatus.PENDING, ApprovalStatus.APPROVED}
    assert ApprovalStatus.APPROVED in {a.status for a in answers.values()}
    assert sides[0].ledger.list_approvals(status="pending") == []


# -- the state contract (antiloop.stores.state): load, compare-and-set save, forget -----------


def _state_store(backend: Any) -> Any:
    store = backend.open()
    if not isinstance(store, StateStore):
        pytest.skip(f"{backend.kind}: state and records in two stores (the state one's contract)")
    return store


def test_load_of_an_unknown_session_is_a_new_state_and_save_creates_it(backend: Any) -> None:
    """load gives a new state and None; save at None keeps it; load reads it back, versioned."""
    store = _state_store(backend)
    state, version = store.load("s")
    assert (state, version) == (SessionState(), None)
    full = _full_state()
    assert store.save("s", full, None, [AuditEvent("step", "s", 1.0, tool="x")]) is None
    again, saved = store.load("s")
    assert again == full
    assert saved is not None
    assert backend.open().peek("s") == full
    assert "s" in store.sessions()
    assert [r.tool for r in store.audit_records("s")] == ["x"]


def test_a_save_at_a_stale_version_is_a_conflict_that_keeps_nothing(backend: Any) -> None:
    """Two writers load one version: the first save wins, the second gets the winner's state."""
    one, two = _state_store(backend), backend.open()
    assert one.save("s", SessionState(steps=1), None) is None
    a, version = one.load("s")
    b, same = two.load("s")
    a.steps, b.steps = 2, 20
    assert one.save("s", a, version, [AuditEvent("step", "s", 1.0, tool="a")]) is None
    conflict = two.save("s", b, same, [AuditEvent("step", "s", 2.0, tool="b")])
    assert conflict is not None
    current, newer = conflict
    assert current.steps == 2
    assert newer not in (None, same)
    assert two.save("s", SessionState(steps=3), newer) is None  # at the version it was given
    assert one.peek("s").steps == 3
    assert [r.tool for r in one.audit_records("s")] == ["a"]
    assert two.save("t", SessionState(steps=1), newer) is not None  # unknown: only None creates


def test_a_transaction_moves_the_version_on(backend: Any) -> None:
    """A save at a version loaded before a transaction() saved the session is a conflict."""
    store = _state_store(backend)
    with store.transaction("s") as state:
        state.steps = 1
    _, version = store.load("s")
    with backend.open().transaction("s") as state:
        state.steps = 2
    conflict = store.save("s", SessionState(steps=9), version)
    assert conflict is not None
    assert conflict[0].steps == 2


def test_forget_then_load_is_unknown_again(backend: Any) -> None:
    """After forget, load is a new state and None, and a save at the old version conflicts."""
    store = _state_store(backend)
    assert store.save("s", SessionState(steps=1), None) is None
    _, version = store.load("s")
    store.forget("s")
    assert store.load("s") == (SessionState(), None)
    assert store.save("s", SessionState(steps=5), version) == (SessionState(), None)
    assert "s" not in store.sessions()


def test_judge_runs_again_on_the_state_another_writer_saved(backend: Any) -> None:
    """The one compare-and-set loop: a conflict runs ``fn`` again on the winner's state."""
    store, other = _state_store(backend), backend.open()
    assert store.save("s", SessionState(steps=1), None) is None
    seen: list[int] = []

    def fn(state: SessionState) -> tuple[int, list[AuditEvent]]:
        seen.append(state.steps)
        if len(seen) == 1:  # another writer saves between this load and this save
            with other.transaction("s") as theirs:
                theirs.steps = 10
        state.steps += 1
        return state.steps, [AuditEvent("step", "s", 1.0, tool=f"t{state.steps}")]

    assert judge(store, "s", fn) == 11
    assert seen == [1, 10]
    assert store.peek("s").steps == 11
    assert [r.tool for r in store.audit_records("s")] == ["t11"]
