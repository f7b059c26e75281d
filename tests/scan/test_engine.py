"""The scan engine on small hand-made runs: loops counted once, waste, config."""

from __future__ import annotations

from antiloop.config import GuardConfig
from antiloop.core.step import Step
from antiloop.scan import SCAN_DETECTORS, Scanner, scan_config
from antiloop.traces import Run, StepCost


def _run(steps: list[Step], costs: tuple[StepCost, ...] = ()) -> Run:
    return Run(file="run.jsonl", record=None, format="jsonl", steps=tuple(steps), costs=costs)


def _grep(pattern: str, output: str = "no matches") -> Step:
    return Step(tool="Grep", args={"pattern": pattern}, output=output)


def test_long_repeat_is_one_loop_with_all_its_steps() -> None:
    """A repeat that goes on for 30 steps is one loop whose evidence is every step of it."""
    steps = [_grep("a"), *[_grep("x") for _ in range(30)], _grep("b")]
    result = Scanner().scan_run(_run(steps))
    assert [(loop.step, loop.detector) for loop in result.loops] == [(2, "repeat")]
    assert result.loops[0].evidence == tuple(range(1, 31))
    assert result.loops[0].last == 30


def test_two_different_loops_are_two_loops() -> None:
    """Two repeats of different procedures are reported separately, in order."""
    steps = [_grep("x"), _grep("x"), _grep("y"), _grep("y")]
    result = Scanner().scan_run(_run(steps))
    assert [(loop.step, loop.evidence) for loop in result.loops] == [(1, (0, 1)), (3, (2, 3))]
    assert result.loops[0].fingerprint != result.loops[1].fingerprint


def test_loop_that_comes_back_is_the_same_loop() -> None:
    """The same repeat again later in the run (same fingerprint) extends the first loop."""
    steps = [_grep("x"), _grep("x"), _grep("y"), _grep("x"), _grep("x")]
    result = Scanner().scan_run(_run(steps))
    assert len(result.loops) == 1
    assert result.loops[0].evidence == (0, 1, 3, 4)


def test_cycle_is_found_once() -> None:
    """A two-step cycle that keeps going is one cycle loop."""
    steps = [_grep("a", "1"), _grep("b", "2")] * 4
    result = Scanner().scan_run(_run(steps))
    assert [(loop.step, loop.detector) for loop in result.loops] == [(3, "cycle")]
    assert result.loops[0].evidence == tuple(range(8))


def test_fail_streak_unbroken_is_one_loop_broken_is_two() -> None:
    """Six failures running make one fail-streak loop; a success in between makes two."""

    def fail(n: int, error: str = "Error: boom") -> Step:
        return Step(tool="Bash", args={"command": f"make t{n}"}, output=error, exit_code=2)

    ok = Step(tool="Bash", args={"command": "ls"}, output="a", exit_code=0)
    running = Scanner().scan_run(_run([fail(n) for n in range(6)]))
    assert [(loop.step, loop.evidence) for loop in running.loops] == [(2, tuple(range(6)))]
    other = [fail(n, "Error: bang") for n in (7, 8, 9)]
    broken = Scanner().scan_run(_run([*[fail(n) for n in range(3)], ok, *other]))
    assert [(loop.step, loop.evidence) for loop in broken.loops] == [(2, (0, 1, 2)), (6, (4, 5, 6))]


def test_waste_counts_steps_and_costs_after_the_first_loop_point() -> None:
    """Waste is the steps after the first stopping loop, with their recorded tokens and cost."""
    steps = [_grep("a"), _grep("x"), _grep("x"), _grep("b"), _grep("c")]
    costs = tuple(StepCost(10 * i, i, 0.5) for i in range(5))
    result = Scanner().scan_run(_run(steps, costs))
    waste = result.waste
    assert (waste.from_step, waste.steps) == (2, 2)
    assert (waste.input_tokens, waste.output_tokens, waste.cost_usd) == (70, 7, 1.0)


def test_no_loop_no_waste_and_unrecorded_costs_stay_none() -> None:
    """Without a loop the waste is zero; a format without costs reports None, not 0."""
    result = Scanner().scan_run(_run([_grep("a"), _grep("b")]))
    assert result.loops == ()
    assert result.waste.to_json() == {
        "from_step": None,
        "steps": 0,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
    }


def test_fail_streak_alone_starts_no_waste() -> None:
    """A failure streak asks rather than stops, so it is a loop without a loop point."""
    steps = [Step(tool="Bash", args={"command": f"c{n}"}, exit_code=1) for n in range(3)]
    result = Scanner().scan_run(_run(steps))
    assert [loop.detector for loop in result.loops] == ["fail-streak"]
    assert result.waste.from_step is None


def test_scan_config_has_no_goal_and_no_budget_by_default() -> None:
    """The scan drops the goal check, and max-steps unless the config names a budget."""
    assert scan_config().detectors == SCAN_DETECTORS
    assert "max-steps" not in scan_config(GuardConfig()).detectors
    assert "goal" not in scan_config(GuardConfig()).detectors
    assert "max-steps" in scan_config(GuardConfig(max_steps=3)).detectors


def test_budget_named_in_config_is_one_loop() -> None:
    """With max_steps set, the budget fires once as a loop at the step that reaches it."""
    config = scan_config(GuardConfig(max_steps=3, embedder="ngram"))
    result = Scanner(config).scan_run(_run([_grep(str(n)) for n in range(6)]))
    assert [(loop.step, loop.detector) for loop in result.loops] == [(2, "max-steps")]
    assert result.waste.steps == 3


def test_steps_of_mixed_sessions_are_numbered_by_the_run() -> None:
    """Steps carrying different session ids are still judged as one run, in run order."""
    steps = [
        Step(tool="Grep", args={"pattern": "x"}, output="0", session="a"),
        Step(tool="Grep", args={"pattern": "x"}, output="0", session="b"),
    ]
    result = Scanner().scan_run(_run(steps))
    assert [loop.evidence for loop in result.loops] == [(0, 1)]


def test_views_are_kept_only_when_asked() -> None:
    """Per-step views (for the HTML timeline) are empty unless the scanner keeps them."""
    run = _run([_grep("a"), Step(tool="Bash", args={"command": "false"}, exit_code=1)])
    assert Scanner().scan_run(run).views == ()
    views = Scanner(views=True).scan_run(run).views
    assert [(v.operation, v.failed, v.tool) for v in views] == [
        ("grep", False, "Grep"),
        ("bash", True, "Bash"),
    ]
    assert views[1].command == "false"


def test_spend_of_the_run_and_inside_its_loops() -> None:
    """A run's spend is every step's usage; the loops' spend is that of their evidence steps."""
    steps = [_grep("a"), _grep("x"), _grep("x"), _grep("x"), _grep("b")]
    costs = tuple(StepCost(10 * i, i, 0.25 * i) for i in range(5))
    result = Scanner().scan_run(_run(steps, costs))
    assert [loop.evidence for loop in result.loops] == [(1, 2, 3)]
    assert result.spend.to_json() == {
        "steps": 5,
        "input_tokens": 100,
        "output_tokens": 10,
        "cost_usd": 2.5,
    }
    assert result.loop_spend.to_json() == {
        "steps": 3,
        "input_tokens": 60,
        "output_tokens": 6,
        "cost_usd": 1.5,
    }


def test_spend_unrecorded_stays_none() -> None:
    """A format that records no usage has a spend of steps only."""
    result = Scanner().scan_run(_run([_grep("x"), _grep("x")]))
    assert (result.spend.steps, result.spend.cost_usd, result.loop_spend.steps) == (2, None, 2)
