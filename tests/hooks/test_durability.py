"""Acknowledged means recorded: the hook daemon and in-process hooks on one SQLite file.

16 agents (12 through the hook daemon, 4 with ``ANTILOOP_HOOKD=0``) send PostToolUse events
as fresh hook processes, with and without SIGKILLs of the daemon, with the hook failing open
and closed (the hook's ``on_store_error``: ``allow`` is ``ANTILOOP_FAIL=open``, ``block`` is
``closed``). Every event the hook acknowledged (exit 0, nothing printed but the line of an
event judged again after its daemon was killed) must have its step
record in the audit log, and the file must pass ``PRAGMA integrity_check``. See
``tests/hooks/durability.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.hooks.durability import run_fleet

AGENTS = {"daemon_agents": 12, "local_agents": 4, "steps": 10}


@pytest.mark.slow
@pytest.mark.parametrize("fail", ["open", "closed"])
def test_no_acknowledged_step_is_lost_without_kills(tmp_path: Path, fail: str) -> None:
    """No kills: every event is acknowledged, every one is in the log, the file is sound."""
    result = run_fleet(tmp_path, **AGENTS, fail=fail)
    assert result.sent == 16 * 10
    assert result.daemon_seen > 0  # the daemon agents did go through it
    assert result.lost == [], f"{len(result.lost)} of {result.acknowledged} lost"
    assert result.integrity == ["ok"]
    assert result.unacknowledged == {}, result.unacknowledged
    assert result.acknowledged == result.sent


@pytest.mark.slow
@pytest.mark.parametrize("fail", ["open", "closed"])
def test_no_acknowledged_step_is_lost_when_the_daemon_is_killed(tmp_path: Path, fail: str) -> None:
    """SIGKILLs of the daemon mid-load: an event it held is judged again by its hook process
    (once: the step id), so none is lost; the only events not acknowledged are those the
    overloaded machine kept past the hook's deadline (answered "not checked", its policy)."""
    result = run_fleet(tmp_path, **AGENTS, kill_every=2.0, max_kills=3, min_kills=2, fail=fail)
    assert result.kills >= 2  # the daemon was running, and was killed, at least twice
    late = [line for line in result.unacknowledged if "hook's deadline" in line]
    assert set(result.unacknowledged) == set(late), result.unacknowledged
    assert sum(result.unacknowledged.values()) <= result.sent // 20, result.unacknowledged
    assert result.lost == [], f"{len(result.lost)} of {result.acknowledged} lost"
    assert result.integrity == ["ok"]
    store_errors = [line for line in result.unacknowledged if "store" in line]
    assert store_errors == []  # the kills cost answers, never the store
