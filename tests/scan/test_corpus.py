"""``antiloop scan`` on the 100 real runs of the shared corpus, with hand-checked loops pinned."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED, need_path

from antiloop.cli import main
from antiloop.traces import iter_paths, read_runs

CORPUS = SHARED / "corpus"


@pytest.fixture(scope="module", autouse=True)
def _corpus() -> None:
    """The shared corpus is needed (skip on a laptop without it, fail under CI=true)."""
    need_path(CORPUS, "the shared corpus beside the repository")


# the issue's shape, then the spend and the spend inside loops (issue 18)
RUN_KEYS = ["file", "record", "format", "steps", "loops", "waste", "spend", "loop_spend", "partial"]
LOOP_KEYS = ["step", "detector", "fingerprint", "evidence"]
WASTE_KEYS = ["from_step", "steps", "input_tokens", "output_tokens", "cost_usd"]
USAGE_KEYS = ["steps", "input_tokens", "output_tokens", "cost_usd"]


@pytest.fixture(scope="module")
def scanned() -> tuple[int, list[dict[str, Any]], str]:
    """``antiloop scan CORPUS --json`` run once: exit status, the JSON lines, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["scan", str(CORPUS), "--json"])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return code, lines, err.getvalue()


def _runs(scanned: tuple[int, list[dict[str, Any]], str]) -> dict[tuple[str, int | None], Any]:
    return {
        (str(Path(r["file"]).relative_to(CORPUS)), r["record"]): r
        for r in scanned[1]
        if "summary" not in r
    }


def test_every_run_is_scanned_with_its_step_count(scanned: Any) -> None:
    """All 100 runs of the 98 trace files get a line, with the readers' step count."""
    runs = _runs(scanned)
    assert len(runs) == 100
    expected = {}
    for path in iter_paths([CORPUS]):
        if path.suffix == ".md":
            continue
        for run in read_runs(path):
            expected[(str(path.relative_to(CORPUS)), run.record)] = len(run.steps)
    assert {key: r["steps"] for key, r in runs.items()} == expected


def test_json_lines_have_exactly_the_issue_shape(scanned: Any) -> None:
    """Each run line has file, record, format, steps, loops, waste, spends; then the summary."""
    lines = scanned[1]
    assert list(lines[-1]) == ["summary"]
    for line in lines[:-1]:
        assert list(line) == RUN_KEYS
        assert list(line["waste"]) == WASTE_KEYS
        assert list(line["spend"]) == list(line["loop_spend"]) == USAGE_KEYS
        assert line["loop_spend"]["steps"] <= line["spend"]["steps"] == line["steps"]
        for loop in line["loops"]:
            assert list(loop) == LOOP_KEYS
            assert loop["step"] in loop["evidence"]
    summary = lines[-1]["summary"]
    assert summary["runs"] == 100
    assert summary["files"] == 98
    assert summary["unreadable"] == []  # its two .md files are documentation, not traces


def test_loops_exit_1_and_strict_passes_when_every_trace_is_read(
    scanned: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Loops found make the exit status 1; every trace is read, so --strict says the same."""
    code, _, err = scanned
    assert code == 1
    assert "unreadable" not in err
    assert main(["scan", str(CORPUS), "--strict", "--json"]) == 1
    assert "--strict" not in capsys.readouterr().err
    assert main(["scan", str(CORPUS / "FORMATS.md")]) == 2  # named alone: nothing readable


def test_summary_counts(scanned: Any) -> None:
    """The summary counts runs with loops by kind and the waste after the first loop point."""
    summary = scanned[1][-1]["summary"]
    runs = _runs(scanned).values()
    with_loops = [r for r in runs if r["loops"]]
    assert summary["runs_with_loops"] == len(with_loops)
    assert summary["loops"] == sum(len(r["loops"]) for r in runs)
    assert summary["waste"]["steps"] == sum(r["waste"]["steps"] for r in runs)
    kinds = summary["runs_with_loops_by_kind"]
    assert set(kinds) <= {"repeat", "cycle", "fail-streak", "stagnation"}
    assert kinds["repeat"] >= 20
    assert kinds["cycle"] >= 1


# --- hand-checked loops ------------------------------------------------------------------------
#
# Each was checked by opening the run and reading the steps: the same procedure, the same result.

PINNED_LOOPS = {
    # `nl -ba query_utils.py | sed -n '91p'` twice in a row, printing the same unchanged line 91
    # (the sed -i before it had not matched).
    ("mini-swe-agent-gemini-3-pro/django__django-14017.traj.json", None): [
        (40, "repeat", [39, 40]),
    ],
    # The same heredoc writing fix.patch (identical text, no output) at 57 and 58, then again at
    # 60 and 61 after one read: one loop that comes back, counted once.
    ("mini-swe-agent-deepseek/deepseek_chat_test_1-100/django__django-11620.traj.json", None): [
        (58, "repeat", [57, 58, 60, 61]),
    ],
    # Edit line 97 with sed, print it, the same sed edit again (quoted differently, the same argv
    # after shell parsing), print the same unchanged line: a period-2 cycle.
    ("mini-swe-agent-gemini-3-pro/django__django-10097.traj.json", None): [
        (14, "cycle", [11, 12, 13, 14]),
    ],
    # `submit flag{People always ...}` four times, "Wrong flag!" each time (one loop, steps 9-12);
    # submit failing three times running (8-10) is also a failure streak.
    ("swe-agent/demo_ctf__crypto__eps.traj", None): [
        (10, "repeat", [9, 10, 11, 12]),
        (10, "fail-streak", [8, 9, 10]),
    ],
    # The same rejected edit of lines 287-295 twice ("E999 SyntaxError: unmatched ')'"); edits
    # rejected three times running (5-7) are a failure streak.
    ("swe-agent/test_data__pydicom__pydicom-1458.traj", None): [
        (7, "repeat", [6, 7]),
        (7, "fail-streak", [5, 6, 7]),
    ],
    # OpenHands: view cli.pony twice (same listing); str_replace without old_str twice (same
    # error); the same str_replace whose old_str is not in the file twice (same error).
    ("openhands/multi_swe_bench_examples_output.jsonl", 1): [
        (12, "repeat", [11, 12]),
        (21, "repeat", [20, 21]),
        (31, "repeat", [30, 31]),
    ],
    # Three different bash commands failing in a row (pytest missing, `django test` error, a
    # script's ImportError): a failure streak, not a repeat, so no loop point and no waste.
    ("mini-swe-agent-deepseek/deepseek_chat_test_1-100/django__django-10914.traj.json", None): [
        (24, "fail-streak", [22, 23, 24]),
    ],
}

PINNED_WASTE = {
    # 22 steps, loop point at 14: steps 15-21 wasted; v1 records tokens and cost per turn.
    ("mini-swe-agent-gemini-3-pro/django__django-10097.traj.json", None): (14, 7),
    # 14 steps, loop point 10: steps 11-13 wasted; SWE-agent .traj records no per-step cost.
    ("swe-agent/demo_ctf__crypto__eps.traj", None): (10, 3),
    ("mini-swe-agent-deepseek/deepseek_chat_test_1-100/django__django-10914.traj.json", None): (
        None,
        0,
    ),
}

# Runs where no loop is found, each read by hand.
PINNED_CLEAN = {
    # 12 steps: run ./rock, decompile five different functions, write and run solve.py, one
    # wrong flag followed by a different (accepted) flag: nothing repeats.
    ("swe-agent/demo_ctf__rev__rock.traj", None),
    # 14 steps: `cat locks.py` at 1, 5 and 11 and `python3 reproduce_issue.py` at 3 and 8, each
    # time with an edit of the file in between, so never the same step twice in a row.
    ("mini-swe-agent-gemini-3-pro/django__django-13410.traj.json", None),
    # 2 steps, different commands.
    ("openhands/runtime_trajs_basic.json", None),
}


@pytest.mark.parametrize("key", sorted(PINNED_LOOPS, key=str), ids=lambda k: f"{k[0]}#{k[1]}")
def test_hand_checked_loops(scanned: Any, key: tuple[str, int | None]) -> None:
    """The loops read by hand in these runs are found, each once, with its evidence."""
    run = _runs(scanned)[key]
    found = [(loop["step"], loop["detector"], loop["evidence"]) for loop in run["loops"]]
    assert found == PINNED_LOOPS[key]
    assert all(loop["fingerprint"] for loop in run["loops"])


@pytest.mark.parametrize("key", sorted(PINNED_WASTE, key=str), ids=lambda k: f"{k[0]}#{k[1]}")
def test_hand_checked_waste(scanned: Any, key: tuple[str, int | None]) -> None:
    """The first loop point and the wasted steps after it are right for these runs."""
    waste = _runs(scanned)[key]["waste"]
    assert (waste["from_step"], waste["steps"]) == PINNED_WASTE[key]


def test_waste_tokens_and_cost_where_recorded(scanned: Any) -> None:
    """mini-swe-agent records tokens and cost per turn, so its waste has them; .traj has none."""
    runs = _runs(scanned)
    v1 = runs[("mini-swe-agent-gemini-3-pro/django__django-10097.traj.json", None)]["waste"]
    assert v1["input_tokens"] > 0
    assert v1["output_tokens"] > 0
    assert v1["cost_usd"] > 0
    swe = runs[("swe-agent/demo_ctf__crypto__eps.traj", None)]["waste"]
    assert (swe["input_tokens"], swe["output_tokens"], swe["cost_usd"]) == (None, None, None)


@pytest.mark.parametrize("key", sorted(PINNED_CLEAN, key=str), ids=lambda k: f"{k[0]}#{k[1]}")
def test_hand_checked_clean_runs(scanned: Any, key: tuple[str, int | None]) -> None:
    """No loop is found in these runs, read by hand."""
    assert _runs(scanned)[key]["loops"] == []


def test_every_verbatim_repeat_is_found(scanned: Any) -> None:
    """Each pair of consecutive steps identical in tool, arguments and result is in a repeat."""
    runs = _runs(scanned)
    for path in iter_paths([CORPUS]):
        if path.suffix == ".md":
            continue
        for run in read_runs(path):
            steps = run.steps

            def same(a: Any, b: Any) -> bool:
                keys = ("tool", "output", "error", "exit_code")
                return all(getattr(a, k) == getattr(b, k) for k in keys) and dict(a.args) == dict(
                    b.args
                )

            pairs = {i for i in range(1, len(steps)) if same(steps[i - 1], steps[i])}
            found = runs[(str(path.relative_to(CORPUS)), run.record)]["loops"]
            repeats = [loop for loop in found if loop["detector"] == "repeat"]
            covered = {i for loop in repeats for i in loop["evidence"]}
            assert pairs <= covered, (path, run.record, sorted(pairs - covered))
