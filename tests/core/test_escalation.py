"""The escalation ladder: a nudge the agent ignores (it runs the procedure again) asks, then stops.

It lives in the core's decision (``antiloop.decide.escalated``), so the guard, ``antiloop
check``, the hooks, the service and the framework adapters all follow it; it is tested here
through the guard and through ``antiloop check`` as a process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from antiloop import Guard, GuardConfig
from antiloop.core.errors import ConfigError
from antiloop.core.step import Step
from antiloop.core.verdict import Action

NUDGING = GuardConfig(repeat_action="nudge", detectors=("repeat", "cycle"), embedder="ngram")


def _pytest(output: str = "1 failed") -> Step:
    return Step(tool="Bash", args={"command": "pytest"}, output=output, exit_code=1)


def _other() -> Step:
    return Step(tool="Read", args={"file_path": "src/a.py"}, output="x = 1")


def _actions(config: GuardConfig, steps: list[Step]) -> list[Action]:
    guard = Guard(config=config, audit=False)
    return [guard.record(step).action for step in steps]


def test_an_ignored_nudge_asks_then_stops() -> None:
    guard = Guard(config=NUDGING, audit=False)
    verdicts = [guard.record(_pytest()) for _ in range(4)]
    assert [v.action for v in verdicts] == [
        Action.CONTINUE,
        Action.NUDGE,
        Action.ASK,
        Action.STOP,
    ]
    nudge, ask, stop = verdicts[1:]
    assert ask.detector == stop.detector == "repeat"
    assert ask.fingerprint == stop.fingerprint == nudge.fingerprint
    assert ask.escalate_to == "human"
    assert ask.reason.startswith("The nudge was ignored: the same procedure ran again.")
    assert 2 in ask.evidence
    assert 3 in stop.evidence


def test_running_the_procedure_again_with_another_result_still_ignores_the_nudge() -> None:
    steps = [_pytest(), _pytest(), _pytest("2 failed")]
    assert _actions(NUDGING, steps)[-1] is Action.ASK


def test_another_step_in_between_heeds_the_nudge() -> None:
    steps = [_pytest(), _pytest(), _other(), _pytest(), _pytest()]
    assert _actions(NUDGING, steps) == [
        Action.CONTINUE,
        Action.NUDGE,
        Action.CONTINUE,
        Action.CONTINUE,
        Action.NUDGE,  # a new nudge: the first was heeded
    ]


def test_a_step_allowed_to_repeat_neither_breaks_nor_forgets_it() -> None:
    sleep = Step(tool="Bash", args={"command": "sleep 5"}, output="")
    steps = [_pytest(), _pytest(), sleep, _pytest()]
    assert _actions(NUDGING, steps)[-1] is Action.ASK


def test_the_ladder_is_configurable_and_can_be_off() -> None:
    steps = [_pytest() for _ in range(5)]
    loops = {"repeat_action": "nudge", "detectors": ["repeat", "cycle"]}  # no failure streak
    off = GuardConfig.from_mapping({**loops, "escalation": []})
    assert _actions(off, steps) == [Action.CONTINUE] + [Action.NUDGE] * 4
    block = GuardConfig.from_mapping({**loops, "escalation": ["block", "stop"]})
    assert _actions(block, steps)[:4] == [
        Action.CONTINUE,
        Action.NUDGE,
        Action.BLOCK,
        Action.STOP,
    ]


def test_a_bad_ladder_is_named() -> None:
    with pytest.raises(ConfigError, match="'escalation' must be one of ask, block, stop"):
        GuardConfig.from_mapping({"escalation": ["nudge"]})
    with pytest.raises(ConfigError, match="'escalation' must be a list"):
        GuardConfig.from_mapping({"escalation": "ask"})


def test_verdicts_the_protocol_fixes_do_not_change() -> None:
    """On by default, the ladder changes nothing where no nudge is given: a repeat stops."""
    assert GuardConfig().escalation == ("ask", "stop")
    assert _actions(GuardConfig(embedder="ngram"), [_pytest(), _pytest()])[-1] is Action.STOP


def test_antiloop_check_follows_the_ladder(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"repeat_action": "nudge", "detectors": ["repeat", "cycle"]}))
    step = {"tool": "Bash", "args": {"command": "pytest"}, "output": "1 failed", "exit_code": 1}
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "check", "--config", str(config)],
        input=json.dumps(step) + "\n" + json.dumps(step) + "\n" + json.dumps(step) + "\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    verdicts = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [v["action"] for v in verdicts] == ["continue", "continue", "ask"]
    assert verdicts[1]["detector"] == "repeat"  # the nudge (check writes it as a continue)
    assert proc.returncode == 0, proc.stderr  # an ask stops no session
