"""Ctrl+C in a guarded run: the first finishes the step and stops, the second quits at once."""

from __future__ import annotations

import io
import signal

import pytest

from antiloop import Action, Step
from antiloop.approval import Approvals, Interruptible


def test_first_ctrl_c_finishes_the_step_then_stops(guard, guard_with, store):
    """The first Ctrl+C lets the step finish; the next call is stopped and the store flushed."""
    flushed = []
    store.flush = lambda: flushed.append(True)
    approvals = Approvals(store)
    done = []
    with Interruptible(store, session="s", out=io.StringIO()) as run:
        for i in range(5):
            gate = guard_with(approvals).gate("Read", {"file_path": f"f{i}"}, session="s")
            if not gate.allowed:
                break
            if i == 1:
                signal.raise_signal(signal.SIGINT)  # the person presses Ctrl+C mid-step
            guard.record(Step(tool="Read", args={"file_path": f"f{i}"}, session="s", output="x"))
            done.append(i)
    assert done == [0, 1]
    assert run.stopping
    assert gate.verdict.action is Action.STOP
    assert gate.verdict.reason == "Stopped by ctrl-c."
    assert flushed == [True]


def test_second_ctrl_c_quits_at_once(store):
    """A second Ctrl+C raises KeyboardInterrupt, and the old handler is back afterwards."""
    before = signal.getsignal(signal.SIGINT)
    with Interruptible(store, out=io.StringIO()) as run:
        signal.raise_signal(signal.SIGINT)
        assert run.stopping
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before
