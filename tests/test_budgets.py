"""Token and cost budgets: a soft limit asks once per allowance, a hard limit stops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from antiloop import ConfigError, Guard, Step
from antiloop.budgets import Budgets, Limit, raise_limits, spent, take_pending
from antiloop.core.errors import BudgetExceeded
from antiloop.core.verdict import Action
from antiloop.stores.sqlite import SQLiteStore


def _step(
    n: int, *, cost: float | None = None, tokens: int | None = None, agent: str = "a"
) -> Step:
    """A step that is new every time (no loop), with the usage given."""
    return Step(
        tool="Read",
        args={"file_path": f"f{n}.py"},
        output=f"content {n}",
        session="s",
        agent=agent,
        cost_usd=cost,
        tokens_in=tokens,
        tokens_out=0 if tokens is not None else None,
    )


def test_hard_cost_limit_stops_the_session_and_refuses_the_next_call() -> None:
    """Past the hard dollar limit the session stops; the next check answers terminated."""
    guard = Guard(budgets=Budgets(session=Limit(hard_usd=1.0)))
    assert guard.record(_step(0, cost=0.6)).action is Action.CONTINUE
    verdict = guard.record(_step(1, cost=0.6))
    assert (verdict.action, verdict.detector, verdict.outcome) == (Action.STOP, "budget", "budget")
    assert "$1.2000" in verdict.reason
    assert guard.check("Read", {"file_path": "g.py"}, session="s").detector == "terminated"
    with pytest.raises(BudgetExceeded):
        guard.enforce(verdict, "s")


def test_soft_limit_asks_once_per_allowance() -> None:
    """A soft limit of 100 tokens asks at 120 and again only past 200, never in between."""
    guard = Guard(budgets=Budgets(session=Limit(soft_tokens=100)))
    actions = [guard.record(_step(i, tokens=40)).action for i in range(8)]
    # spend: 40 80 120* 160 200 240* 280 320*
    assert actions == [
        Action.CONTINUE,
        Action.CONTINUE,
        Action.ASK,
        Action.CONTINUE,
        Action.CONTINUE,
        Action.ASK,
        Action.CONTINUE,
        Action.ASK,
    ]


def test_agent_limit_holds_each_agent_apart() -> None:
    """One agent past its own limit stops; the session limit counts both agents together."""
    budgets = Budgets(session=Limit(soft_usd=1.5), agent=Limit(hard_usd=1.0))
    guard = Guard(budgets=budgets)
    assert guard.record(_step(0, cost=0.8, agent="a")).action is Action.CONTINUE
    assert guard.record(_step(1, cost=0.8, agent="b")).action is Action.ASK  # session 1.6
    stop = guard.record(_step(2, cost=0.3, agent="a"))
    assert stop.action is Action.STOP
    assert "Agent a" in stop.reason
    assert spent(guard.store, "s").cost_usd == pytest.approx(1.9)
    assert spent(guard.store, "s", "B").cost_usd == pytest.approx(0.8)


def test_steps_without_usage_leave_the_spend_alone() -> None:
    """A step that reports no usage neither counts nor makes a state of spend."""
    guard = Guard(budgets=Budgets(session=Limit(hard_usd=0.01)))
    for i in range(3):
        assert guard.record(_step(i)).action is Action.CONTINUE
    state = guard.store.peek("s")
    assert state is not None
    assert state.spend is None


def test_a_loop_stop_outranks_a_soft_ask() -> None:
    """When a loop and a check-in meet on one step the loop's stop is the verdict."""
    guard = Guard(budgets=Budgets(session=Limit(soft_usd=0.1)))
    step = Step(tool="Grep", args={"pattern": "x"}, output="none", session="s", cost_usd=0.06)
    guard.record(step)
    verdict = guard.record(step)
    assert verdict.detector == "repeat"
    assert verdict.action is Action.STOP


def test_spend_survives_the_store_and_a_reset(tmp_path: Path) -> None:
    """Spend is kept in SQLite beside the session; a person's reset does not zero it."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    budgets = Budgets(session=Limit(hard_usd=1.0))
    first = Guard(store=url, budgets=budgets)
    first.record(_step(0, cost=0.7))
    first.reset("s", "a person spoke")
    first.store.close()
    again = Guard(store=SQLiteStore(tmp_path / "a.db"), budgets=budgets)
    assert spent(again.store, "s").cost_usd == pytest.approx(0.7)
    assert again.record(_step(1, cost=0.4)).action is Action.STOP
    again.store.close()


def test_raising_the_hard_limit_lets_a_stopped_run_go_on() -> None:
    """A person who raises the hard limit past the spend ends the budget's stop."""
    budgets = Budgets(session=Limit(hard_usd=1.0))
    guard = Guard(budgets=budgets)
    guard.record(_step(0, cost=1.5))
    assert guard.ended("s") is not None
    assert raise_limits(guard.store, "s", {"session_hard_usd": 3}, budgets) == {
        "session_hard_usd": 3.0
    }
    assert guard.ended("s") is None
    assert guard.record(_step(1, cost=1.0)).action is Action.CONTINUE
    assert guard.record(_step(2, cost=1.0)).action is Action.STOP


def test_pending_check_in_is_taken_once() -> None:
    """The check-in no person answered is there for a host's prompt, once."""
    guard = Guard(budgets=Budgets(session=Limit(soft_usd=0.5)))
    guard.record(_step(0, cost=0.6))
    reason = take_pending(guard.store, "s")
    assert reason is not None
    assert "soft limit $0.5000" in reason
    assert take_pending(guard.store, "s") is None


def test_budgets_come_from_the_config_file(tmp_path: Path) -> None:
    """``[budgets.session]`` and ``[budgets.agent]`` of antiloop.toml make the guard's budgets."""
    path = tmp_path / "antiloop.toml"
    path.write_text(
        "max_steps = 50\n[budgets.session]\nhard_usd = 2\nsoft_tokens = 1000\n"
        "[budgets.agent]\nsoft_usd = 0.5\n"
    )
    guard = Guard.from_config(str(path))
    assert guard.budgets == Budgets(
        session=Limit(hard_usd=2.0, soft_tokens=1000), agent=Limit(soft_usd=0.5)
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"sesion": {"hard_usd": 1}}, "unknown table 'sesion'"),
        ({"session": {"hard_dollars": 1}}, "unknown key 'hard_dollars'"),
        ({"session": {"hard_usd": -1}}, "'hard_usd' must be a number > 0"),
        ({"session": {"soft_tokens": 1.5}}, "whole number of tokens"),
        ({"session": {"hard_usd": "1"}}, "must be a number > 0, not '1'"),
        ({"session": {"hard_usd": float("inf")}}, "must be finite"),
        ({"session": 3}, "[budgets.session]: expected a table"),
    ],
)
def test_a_bad_budget_is_named(table: dict[str, object], message: str) -> None:
    """Each bad key or value is one clear error naming it."""
    with pytest.raises(ConfigError) as err:
        Budgets.from_mapping(table, "antiloop.toml")
    assert message in str(err.value)
    assert str(err.value).startswith("antiloop.toml [budgets")


def test_check_stops_a_stream_over_budget_and_summarises_it(tmp_path: Path) -> None:
    """``antiloop check --config`` applies the budgets; the summary says why the run ended."""
    from antiloop.commands.check import run_check

    config = tmp_path / "c.json"
    config.write_text(json.dumps({"budgets": {"session": {"hard_usd": 1.0}}}))
    stream = tmp_path / "s.jsonl"
    lines = [
        {"tool": "Read", "args": {"file_path": f"{i}.py"}, "output": str(i), "cost_usd": 0.4}
        for i in range(4)
    ]
    stream.write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = tmp_path / "sum.json"
    assert run_check(str(stream), str(config), str(summary)) == 3
    data = json.loads(summary.read_text())
    assert data["ended"] == "stopped"
    assert data["stopped"][0]["detector"] == "budget"
    assert data["spend"]["cost_usd"] == pytest.approx(1.6)
