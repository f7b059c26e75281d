"""The Approvals coordinator: asking, answering, expiry, quorum, stops, feedback, loops."""

from __future__ import annotations

import pytest

from antiloop import Action, ApprovalDenied, Step
from antiloop.approval import (
    Answer,
    ApprovalPolicy,
    Approvals,
    ApprovalStatus,
    CallbackChannel,
)
from antiloop.core.errors import ChannelError

RM = {"command": "rm -rf build"}


def test_a_read_runs_without_asking(guard_with, store):
    """A read-only call is allowed by the default policy and no request is stored."""
    asked = []
    approvals = Approvals(store, channels=[CallbackChannel(asked.append)])
    gate = guard_with(approvals).gate("Read", {"file_path": "a.py"}, session="s")
    assert gate.allowed
    assert asked == []


def test_approved_call_goes_on_and_the_record_says_who(guard_with, store):
    """An approved risky call runs; the stored record keeps who decided, when and the comment."""
    channel = CallbackChannel(lambda r: Answer.approve("alice", "fine, once"))
    approvals = Approvals(store, channels=[channel])
    gate = guard_with(approvals).gate("Bash", RM, session="s")
    assert gate.allowed
    assert gate.verdict.hint == "A person says: fine, once"
    record = approvals.ledger.get_approval(gate.request.id)
    assert record.status is ApprovalStatus.APPROVED
    assert (record.decided_by, record.comment, record.risk) == ("alice", "fine, once", "delete")
    assert record.decided_at is not None


def test_denied_call_is_blocked_with_the_comment_as_hint(guard_with, store):
    """A denied call is blocked and the person's comment reaches the model as the hint."""
    channel = CallbackChannel(lambda r: "use git clean instead")
    approvals = Approvals(store, channels=[channel])
    gate = guard_with(approvals).gate("Bash", RM, session="s")
    assert gate.verdict.action is Action.BLOCK
    assert gate.verdict.outcome == "denied"
    assert "use git clean instead" in gate.verdict.hint
    with pytest.raises(ApprovalDenied):
        approvals.enforce(gate, "s")


def test_edited_arguments_are_the_ones_to_run(guard_with, store):
    """An edit approves the call with the person's arguments."""
    channel = CallbackChannel(lambda r: Answer.edit("bob", {"command": "rm -rf build/tmp"}))
    gate = guard_with(Approvals(store, channels=[channel])).gate("Bash", RM, session="s")
    assert gate.allowed
    assert gate.args == {"command": "rm -rf build/tmp"}
    assert gate.request.status is ApprovalStatus.EDITED


def test_edited_arguments_run_as_given_and_are_stored_redacted(guard_with, store):
    """The call runs with the person's arguments; the store keeps them redacted (numbers too
    under a secret-looking key are kept: an edited limit is no secret)."""
    token = "ghp_" + "x9Y8" * 9
    edited = {
        "command": f"git push https://{token}@github.com/o/r",
        "password": "hunter2x",
        "session_hard_tokens": 5000,
    }
    channel = CallbackChannel(lambda r: Answer.edit("bob", edited))
    gate = guard_with(Approvals(store, channels=[channel])).gate("Bash", RM, session="s")
    assert gate.args == edited
    assert gate.request is not None
    stored = store.get_approval(gate.request.id)
    assert stored.edited_args == {
        "command": "git push https://[REDACTED]@github.com/o/r",
        "password": "[REDACTED]",
        "session_hard_tokens": 5000,
    }


def test_policy_deny_blocks_without_asking(guard_with, store):
    """A deny rule blocks the call at once."""
    policy = ApprovalPolicy.from_mapping({"rules": [{"command": "rm -rf", "decision": "deny"}]})
    gate = guard_with(Approvals(store, policy)).gate("Bash", RM, session="s")
    assert gate.verdict.action is Action.BLOCK
    assert gate.request is None


def test_expiry_denies_never_approves(store, clock):
    """A request nobody answers expires when its time is up, and that denies the call."""
    clock.step = 30.0
    policy = ApprovalPolicy(timeout=60)
    approvals = Approvals(store, policy, clock=clock, poll=0)
    request = approvals.ask(session="s", agent="a", tool="Bash", args=RM, risk="delete", reason="r")
    assert request.status is ApprovalStatus.EXPIRED
    late = approvals.answer(request.id, Answer.approve("late"))
    assert late.status is ApprovalStatus.EXPIRED


def test_wait_timeout_denies(store, clock):
    """Waiting past the caller's own timeout ends the request denied by timeout."""
    clock.step = 1.0
    approvals = Approvals(store, ApprovalPolicy(timeout=3600), clock=clock, poll=0)
    request = approvals.create(session="s", agent="a", tool="Bash", args=RM, risk="x", reason="r")
    done = approvals.wait(request.id, timeout=5)
    assert done.status is ApprovalStatus.DENIED
    assert done.decided_by == "timeout"


def test_first_answer_wins_across_channels(store):
    """With two channels answering, the first answer decides and the second changes nothing."""
    answers = []

    def first(request):
        answers.append(approvals.answer(request.id, Answer.deny("first", "no")))

    approvals = Approvals(store, channels=[CallbackChannel(first)])
    request = approvals.create(session="s", agent="a", tool="Bash", args=RM, risk="x", reason="r")
    approvals.deliver(request)
    second = approvals.answer(request.id, Answer.approve("second"))
    assert second.status is ApprovalStatus.DENIED
    assert second.decided_by == "first"


def test_several_channels_run_together(guard_with, store):
    """With several channels, the one that answers decides while the others stay silent."""
    silent = CallbackChannel(lambda r: None, name="silent")
    yes = CallbackChannel(lambda r: True, name="yes")
    gate = guard_with(Approvals(store, channels=[silent, yes])).gate("Bash", RM, session="s")
    assert gate.allowed
    assert gate.request.decided_by == "yes"


def test_k_of_n_needs_k_distinct_approvers(store):
    """With required=2, one approval (or the same person twice) is not enough; two are."""
    approvals = Approvals(store, ApprovalPolicy(required=2))
    request = approvals.create(session="s", agent="a", tool="Bash", args=RM, risk="x", reason="r")
    assert approvals.answer(request.id, Answer.approve("alice")).status is ApprovalStatus.PENDING
    assert approvals.answer(request.id, Answer.approve("alice")).status is ApprovalStatus.PENDING
    done = approvals.answer(request.id, Answer.approve("bob"))
    assert done.status is ApprovalStatus.APPROVED
    assert done.decided_by == "alice, bob"


def test_k_of_n_one_deny_denies(store):
    """With required=2, a single deny decides the request denied."""
    approvals = Approvals(store, ApprovalPolicy(required=2))
    request = approvals.create(session="s", agent="a", tool="Bash", args=RM, risk="x", reason="r")
    approvals.answer(request.id, Answer.approve("alice"))
    assert approvals.answer(request.id, Answer.deny("carol")).status is ApprovalStatus.DENIED


def test_approve_next_n_skips_the_next_asks(guard_with, store):
    """`y -N` approves this call and the next N asks of the session without asking again."""
    asked = []

    def once(request):
        asked.append(request.id)
        return Answer.approve("alice", approve_next=2)

    guard = guard_with(Approvals(store, channels=[CallbackChannel(once)]))
    gates = [guard.gate("Bash", {"command": f"make {i}"}, session="s") for i in range(4)]
    assert all(g.allowed for g in gates)
    assert len(asked) == 2
    assert "approve next" in gates[1].request.decided_by


def test_no_channel_can_deliver_denies(guard_with, store):
    """When every channel fails to reach a person the request ends denied."""

    def broken(request):
        raise ChannelError("no terminal")

    approvals = Approvals(store, channels=[CallbackChannel(broken)])
    gate = guard_with(approvals).gate("Bash", RM, session="s")
    assert gate.verdict.action is Action.BLOCK
    assert gate.request.decided_by == "antiloop"


def test_stop_request_stops_the_session(guard, guard_with, store):
    """A stop asked by a person stops the next call and ends the session in the guard."""
    approvals = Approvals(store)
    approvals.stop("s", "alice")
    gate = guard_with(approvals).gate("Read", {"file_path": "a"}, session="s")
    assert gate.verdict.action is Action.STOP
    assert gate.verdict.reason == "Stopped by alice."
    later = guard.record(Step(tool="Read", args={"file_path": "b"}, session="s", output="x"))
    assert later.detector == "terminated"


def test_feedback_reaches_the_next_step_as_the_hint(guard_with, store):
    """Queued feedback arrives once, as the hint of the session's next verdict."""
    approvals = Approvals(store)
    approvals.feedback("s", "try the staging config")
    guard = guard_with(approvals)
    first = guard.check("Read", {"file_path": "a"}, session="s")
    assert first.action is Action.NUDGE
    assert first.hint == "A person says: try the staging config"
    second = guard.check("Read", {"file_path": "b"}, session="s")
    assert second.hint == ""


def test_quit_stops_the_run(guard_with, store):
    """A `q` answer denies the call and stops the session."""
    channel = CallbackChannel(lambda r: Answer.deny("alice", "stop", stop=True))
    guard = guard_with(Approvals(store, channels=[channel]))
    assert guard.gate("Bash", RM, session="s").verdict.action is Action.BLOCK
    assert guard.gate("Read", {"file_path": "a"}, session="s").verdict.action is Action.STOP


def _loop(guard):
    step = Step(tool="Grep", args={"pattern": "x"}, output="nothing", session="s")
    guard.record(step)
    return step, guard.record(step)


def test_escalated_loop_stop_goes_on_when_a_person_approves(guard, store):
    """A loop stop escalated to a person who approves resets the session and lets it go on."""
    step, verdict = _loop(guard)
    assert verdict.action is Action.STOP
    approvals = Approvals(store, channels=[CallbackChannel(lambda r: Answer.approve("al", "ok"))])
    ruling = approvals.escalate(verdict, step)
    assert ruling.reset == "a person (al) let the run go on"
    assert guard.ended("s") is not None  # the approvals only rule; the guard applies
    after = guard.apply(ruling).verdict
    assert after.action is Action.NUDGE
    assert after.fingerprint == verdict.fingerprint
    assert guard.ended("s") is None
    loops = approvals.ledger.list_approvals(session="s")
    assert loops[0].risk == "loop"
    assert loops[0].fingerprint == verdict.fingerprint


def test_a_guard_with_approvals_escalates_its_own_loop_stops(guard_with, store):
    """Guard(approvals=...).record asks the person itself and applies the answer."""
    approvals = Approvals(store, channels=[CallbackChannel(lambda r: Answer.approve("al", "ok"))])
    guard = guard_with(approvals)
    step, after = _loop(guard)
    assert (after.action, after.hint) == (Action.NUDGE, "A person says: ok")
    assert guard.ended("s") is None
    assert guard.record(step).action is Action.CONTINUE  # the windows started over
    assert [r.risk for r in approvals.ledger.list_approvals(session="s")] == ["loop"]


def test_escalated_loop_stop_stands_when_denied(guard, store):
    """A loop stop stays a stop when the person says no."""
    step, verdict = _loop(guard)
    approvals = Approvals(store, channels=[CallbackChannel(lambda r: False)])
    ruling = approvals.escalate(verdict, step)
    assert ruling.reset is None
    assert guard.apply(ruling).verdict.action is Action.STOP
    assert guard.ended("s") is not None


def test_supervisor_escalation_leaves_the_verdict(guard, store):
    """With escalate_to = supervisor no person is asked."""
    step, verdict = _loop(guard)
    approvals = Approvals(store, ApprovalPolicy(escalate_to="supervisor"))
    ruling = approvals.escalate(verdict, step)
    assert ruling.verdict == verdict
    assert (ruling.request, ruling.end, ruling.reset, ruling.limits) == (None, None, None, None)


def test_approver_for_guard_enforce(store):
    """approvals.approver() plugs into Guard(approver=...) and asks about ask verdicts."""
    from antiloop import Guard, GuardConfig, Verdict

    approvals = Approvals(store, channels=[CallbackChannel(lambda r: r.risk == "loop")])
    guard = Guard(config=GuardConfig(embedder="ngram"), store=store, approver=approvals.approver())
    ask = Verdict.ask("fail-streak", "three failures")
    assert guard.enforce(ask) is ask
