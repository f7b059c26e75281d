"""A soft budget pauses the run for a person, on every store; the record says how it was decided."""

from __future__ import annotations

import threading

from antiloop import Action, Guard, GuardConfig, Step
from antiloop.approval import Answer, Approvals, ApprovalStatus, CallbackChannel
from antiloop.budgets import Budgets, Limit, spent


class Silent:
    """A channel that tells nobody: the answer comes from elsewhere (another thread here)."""

    name = "web"

    def deliver(self, request, answer):
        """Deliver nothing; the store holds the request."""


def _step(n: int, cost: float) -> Step:
    return Step(
        tool="Read", args={"file_path": f"{n}.py"}, output=str(n), session="s", cost_usd=cost
    )


def _guard(store, approvals, **limits) -> Guard:
    return Guard(
        config=GuardConfig(embedder="ngram"),
        store=store,
        approvals=approvals,
        budgets=Budgets(session=Limit(**limits)),
    )


def test_the_run_waits_for_a_person_who_raises_the_soft_limit(store, clock):
    """record() blocks at the check-in until a person edits the limit; then the run goes on."""
    approvals = Approvals(store, channels=[Silent()], clock=clock, poll=0.01)
    created = threading.Event()
    approvals.listeners.append(lambda event, req: event == "created" and created.set())
    guard = _guard(store, approvals, soft_usd=1.0, hard_usd=10.0)
    guard.record(_step(0, 0.8))
    out: list = []
    worker = threading.Thread(target=lambda: out.append(guard.record(_step(1, 0.4))))
    worker.start()
    assert created.wait(30)
    assert out == []  # paused: no verdict before the answer
    pending = approvals.ledger.list_approvals(status="pending")
    assert len(pending) == 1
    request = pending[0]
    assert (request.risk, request.rule, request.args["session_spent_usd"]) == (
        "budget",
        "budget:soft",
        1.2,
    )
    clock.now += 42.0
    edited = Answer.edit("carol", {**request.args, "session_soft_usd": 4.0})
    approvals.answer(request.id, edited)
    worker.join(30)
    assert out[0].action is Action.CONTINUE
    assert "Approved by carol" in out[0].reason
    # the next check-in is the person's 4.0: nothing asks until then
    for n in range(2, 8):
        assert guard.record(_step(n, 0.4)).action is Action.CONTINUE
    assert round(spent(store, "s").cost_usd, 6) == 3.6
    record = approvals.ledger.get_approval(request.id)
    assert record.status is ApprovalStatus.EDITED
    assert (record.decided_by, record.waited) == ("carol", 42.0)


def test_a_denied_check_in_stops_the_session(store, clock):
    """A person who says no to more spending ends the session: the next call is refused."""
    approvals = Approvals(
        store, channels=[CallbackChannel(lambda r: "enough for today")], clock=clock
    )
    guard = _guard(store, approvals, soft_usd=0.5)
    verdict = guard.record(_step(0, 0.6))
    assert (verdict.action, verdict.detector) == (Action.STOP, "budget")
    assert verdict.hint == "A person says: enough for today"
    assert guard.check("Read", {"file_path": "x"}, session="s").action is Action.STOP


def test_an_approved_check_in_goes_on_to_the_next_allowance(store, clock):
    """A plain yes lets the run spend one more allowance before the next question."""
    asked: list = []

    def yes(request):
        asked.append(request.args["session_spent_usd"])
        return True

    approvals = Approvals(store, channels=[CallbackChannel(yes)], clock=clock)
    guard = _guard(store, approvals, soft_usd=1.0)
    actions = [guard.record(_step(n, 0.3)).action for n in range(8)]
    assert set(actions) == {Action.CONTINUE}
    assert [round(a, 6) for a in asked] == [1.2, 2.1]
    records = approvals.ledger.list_approvals(session="s")
    assert [(r.channel, r.rule, r.decided_by) for r in records] == [
        ("callback", "budget:soft", "callback"),
        ("callback", "budget:soft", "callback"),
    ]
