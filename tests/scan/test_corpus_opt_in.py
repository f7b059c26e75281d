"""The opt-in detectors over the 100 real runs of the shared corpus, read with the trace readers.

What they find there was judged by reading the runs (bench/RESULTS.md, "Opt-in detectors on the
corpus"): no run holds either loop, so they flag nothing, at their defaults and below them; what
they see is the edits, whose effects were checked one by one.
"""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED, need_path

from antiloop import Guard, GuardConfig
from antiloop.core.extra.detectors import CosmeticRerun, HiddenRepeat, _observe
from antiloop.core.history import History
from antiloop.scan.engine import SCAN_DETECTORS, RunScan, Scanner
from antiloop.traces import Run, iter_paths, read_runs

# skips on a laptop without the shared corpus, fails under CI=true
CORPUS = need_path(SHARED / "corpus", "the shared corpus")

OPT_IN = ("hidden-repeat", "cosmetic-rerun")


def _runs() -> list[Run]:
    return [run for path in iter_paths([CORPUS]) if path.suffix != ".md" for run in read_runs(path)]


def _key(run: Any) -> tuple[str, int | None]:
    return str(Path(run.file).relative_to(CORPUS)), run.record


@pytest.fixture(scope="module")
def runs() -> list[Run]:
    """Every run of the corpus, read once."""
    return _runs()


@pytest.fixture(scope="module")
def scans(runs: list[Run]) -> dict[str, dict[tuple[str, int | None], RunScan]]:
    """Each run scanned with the scan defaults, and with the opt-in detectors added."""
    base = GuardConfig(detectors=SCAN_DETECTORS, embedder="ngram")
    out = {}
    for name, config in (
        ("default", base),
        ("opt-in", dataclasses.replace(base, detectors=SCAN_DETECTORS + OPT_IN)),
    ):
        scanner = Scanner(config)
        out[name] = {_key(run): scanner.scan_run(run) for run in runs}
    return out


@pytest.fixture(scope="module")
def effects(runs: list[Run]) -> dict[tuple[str, int | None, int], str]:
    """The effect of every edit step that changed nothing or only comments, by run and step."""
    found: dict[tuple[str, int | None, int], str] = {}
    for run in runs:

        def probe(history: History, run: Run = run) -> None:
            effect = _observe(history)
            if effect in ("noop", "cosmetic"):
                found[(*_key(run), history.count - 1)] = effect

        guard = Guard(probe, audit=False)
        for step in run.steps:
            guard.record(dataclasses.replace(step, session="run"))
    return found


def test_the_opt_in_detectors_flag_no_corpus_run(scans: Any) -> None:
    """Read by hand, no run repeats a step over no-op or cosmetic edits: nothing is flagged."""
    assert len(scans["opt-in"]) == 100
    flagged = [
        (key, loop.step, loop.detector)
        for key, scan in scans["opt-in"].items()
        for loop in scan.loops
        if loop.detector in OPT_IN
    ]
    assert flagged == []


def test_switching_them_on_changes_no_other_finding(scans: Any) -> None:
    """The loops, evidence and waste of every run are the same with the opt-in detectors on."""
    for key, scan in scans["default"].items():
        other = scans["opt-in"][key]
        assert (other.loops, other.waste) == (scan.loops, scan.waste), key


def test_not_even_below_their_default_thresholds(runs: list[Run]) -> None:
    """At threshold 2 they still find nothing: the corpus' re-reads after refused edits view
    other line ranges (OpenHands #1 steps 23 and 26), or a real edit comes between."""
    for run in runs:
        guard = Guard(HiddenRepeat(2) | CosmeticRerun(2), audit=False)
        verdicts = [guard.record(dataclasses.replace(s, session="run")) for s in run.steps]
        assert [v.detector for v in verdicts if v.fired] == [], _key(run)


# Edits checked by reading the runs: each changed nothing, or only comments or white space.
HAND_CHECKED = {
    # OpenHands' str_replace_editor answering "ERROR: No replacement was performed..." or
    # "ERROR: Parameter `old_str` is required": nothing was written.
    ("openhands/multi_swe_bench_examples_output.jsonl", 1, 20): "noop",
    ("openhands/multi_swe_bench_examples_output.jsonl", 1, 22): "noop",
    ("openhands/multi_swe_bench_examples_output.jsonl", 1, 24): "noop",
    # inserting the line "// Correctly handle parent default options" into a .pony file
    ("openhands/multi_swe_bench_examples_output.jsonl", 1, 29): "cosmetic",
    # SWE-agent: "Your proposed edit has introduced new syntax error(s)": not applied
    ("swe-agent/demo_ctf__crypto__BabyEncryption.traj", None, 7): "noop",
    ("swe-agent/test_data__pydicom__pydicom-1458.traj", None, 6): "noop",
    # a patch whose only change is trailing spaces on one line (git apply warns, applies it)
    ("mini-swe-agent-deepseek/deepseek_chat_dev/sqlfluff__sqlfluff-1625.traj.json", None, 34): (
        "cosmetic"
    ),
    # the same patch with its removed and added lines equal (git apply refuses it)
    ("mini-swe-agent-deepseek/deepseek_chat_dev/sqlfluff__sqlfluff-1625.traj.json", None, 35): (
        "noop"
    ),
    # `sed -i '2042,2043c\ ...'` that bash refused for a quoting error: sed never ran
    (
        "mini-swe-agent-deepseek/deepseek_chat_test_1-100/django__django-13710.traj.json",
        None,
        26,
    ): "noop",
    # `cat <<'EOF' > reproduce_issue.py` with exactly the text written at step 5
    ("mini-swe-agent-gemini-3-pro/django__django-14534.traj.json", None, 39): "noop",
}


def test_what_they_see_of_the_corpus_edits(effects: dict[Any, str]) -> None:
    """Of 1025 edit steps, 33 changed nothing and 2 only touched white space or comments."""
    assert collections.Counter(effects.values()) == {"noop": 33, "cosmetic": 2}
    assert {key: effects.get(key) for key in HAND_CHECKED} == HAND_CHECKED


def test_failed_write_and_run_chains_are_real_edits(
    runs: list[Run], effects: dict[Any, str]
) -> None:
    """mini-swe-agent's `cat > t.py <<EOF ... EOF` then `python t.py`, failing, wrote the file:
    none of the 25 such failing steps is taken for a no-op edit."""
    chains = 0
    for run in runs:
        for index, step in enumerate(run.steps):
            command = step.args.get("command")
            if step.failed and isinstance(command, str) and "<<" in command and "python" in command:
                chains += 1
                assert effects.get((*_key(run), index)) is None, (_key(run), index)
    assert chains >= 25
