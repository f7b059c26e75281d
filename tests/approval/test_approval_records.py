"""Approval records say how a call was approved: who, channel, when, how long, which rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from antiloop import Guard, GuardConfig
from antiloop.approval import Answer, Approvals, ApprovalStatus, CallbackChannel
from antiloop.approval.request import ApprovalRequest
from antiloop.cli import main

RM = {"command": "rm -rf build"}


class Silent:
    """A channel that tells nobody (the dashboard's way): the answer comes from elsewhere."""

    name = "web"

    def deliver(self, request, answer):
        """Nothing to do: the request is in the store."""


def test_the_record_keeps_rule_channel_and_wait(store, clock):
    """A callback's yes is recorded with its channel, the policy rule and the seconds waited."""

    def slow_yes(request):
        clock.now += 7.5
        return Answer.approve("alice")

    approvals = Approvals(store, channels=[CallbackChannel(slow_yes)], clock=clock)
    guard = Guard(config=GuardConfig(embedder="ngram"), store=store, approvals=approvals)
    gate = guard.gate("Bash", RM, session="s")
    record = approvals.ledger.get_approval(gate.request.id)
    assert record.status is ApprovalStatus.APPROVED
    assert (record.decided_by, record.channel, record.rule) == ("alice", "callback", "tier:delete")
    assert record.waited == 7.5
    assert record.created_at == clock.now - 7.5


def test_expiry_is_recorded_as_the_timeout_channel(store, clock):
    """No answer in time: expired by timeout, through no channel but the clock."""
    approvals = Approvals(store, channels=[Silent()], clock=clock, poll=0.01)
    request = approvals.create(
        session="s", agent="a", tool="Bash", args=RM, risk="delete", reason="r", rule="tier:delete"
    )
    clock.now += 400
    decided = approvals.expire(request.id)
    assert (decided.status, decided.decided_by, decided.channel) == (
        ApprovalStatus.EXPIRED,
        "timeout",
        "timeout",
    )


def test_records_of_an_older_or_newer_antiloop_still_read():
    """A record without the new fields reads; one with fields unknown here reads too."""
    old = {
        "id": "x",
        "session": "s",
        "agent": "a",
        "tool": "Bash",
        "args": {},
        "risk": "exec",
        "reason": "r",
        "created_at": 1.0,
    }
    assert ApprovalRequest.from_dict(old).rule is None
    newer = ApprovalRequest.from_dict({**old, "rule": "tier:exec", "signed_by": "k1"})
    assert newer.rule == "tier:exec"


def test_log_approvals_lists_and_exports_every_decision(tmp_path: Path, capsys: Any) -> None:
    """``antiloop log --approvals`` shows who, channel, wait and rule; the audit export has them."""
    url = f"sqlite:///{tmp_path / 'antiloop.db'}"
    now = [1_700_000_000.0]
    guard = Guard(config=GuardConfig(embedder="ngram"), store=url)
    store = guard.store
    approvals = Approvals(store, channels=[Silent()], clock=lambda: now[0], wait=False)
    guard.approvals = approvals
    asked = guard.gate("Bash", RM, session="s1").request
    guard.gate("WebFetch", {"url": "https://example.com"}, session="s2")
    now[0] += 12.0
    approvals.answer(asked.id, Answer(ApprovalStatus.APPROVED, "alice", channel="terminal"))
    store.close()

    assert main(["log", "--approvals", "--store", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["DECIDED", "(UTC)", "SESSION", "TOOL"]
    assert len(lines) == 3
    decided = lines[1].split()
    assert decided[2:] == ["s1", "Bash", "approved", "alice", "terminal", "12.0s", "tier:delete"]
    assert lines[2].split()[:4] == ["-", "s2", "WebFetch", "pending"]

    assert main(["log", "--approvals", "--jsonl", "--store", url, "s1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert (row["decided_by"], row["channel"], row["rule"], row["risk"]) == (
        "alice",
        "terminal",
        "tier:delete",
        "delete",
    )
    assert (row["asked_at"], row["decided_at"], row["waited_s"]) == (
        1_700_000_000.0,
        1_700_000_012.0,
        12.0,
    )

    assert main(["log", "--jsonl", "--store", url]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kept = [r for r in exported if r["kind"] == "approval"]
    assert [(r["approved_by"], r["detail"]["channel"], r["detail"]["rule"]) for r in kept] == [
        ("alice", "terminal", "tier:delete")
    ]
    assert main(["log", "verify", "--store", url]) == 0
