"""Where approvals live when a store keeps none of them."""

from __future__ import annotations

import logging

import pytest

from antiloop.approval.ledger import Ledger, ledger_of
from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.stores.memory import MemoryStore


class StateOnly:
    """A third party's store: session state, nothing else."""


def test_a_store_with_approvals_is_its_own_ledger():
    """A built-in store keeps approvals itself."""
    store = MemoryStore()
    assert ledger_of(store) is store


def test_a_store_without_them_falls_back_to_this_process(caplog: pytest.LogCaptureFixture):
    """Approvals, feedback and stops still work in one process, with a warning saying so."""
    with caplog.at_level(logging.WARNING, logger="antiloop"):
        ledger = ledger_of(StateOnly())
    assert isinstance(ledger, Ledger)
    assert "live in this process only" in caplog.text
    ledger.put_approval(
        ApprovalRequest("r1", "s", "a", "Bash", {}, "exec", "why", created_at=0.0, expires_at=10.0)
    )
    decided = ledger.decide_approval("r1", "approved", "ana", now=5.0)
    assert decided.status is ApprovalStatus.APPROVED
    assert ledger.decide_approval("r1", "denied", "bob", now=6.0).decided_by == "ana"
    ledger.push_feedback("s", "use staging")
    assert ledger.pop_feedback("s") == ["use staging"]
    ledger.request_stop("s", "ana")
    assert ledger.stop_requested("s") == "ana"
    ledger.clear_stop("s")
    assert ledger.stop_requested("s") is None
