"""The scanner against an independent labeller (bench/labeller.py), which shares no code with it.

The labeller is tested here on runs written for the test; then the scanner must agree with it on
every run of ../shared/corpus it reads, and, when ``$ANTILOOP_SECOND_FAMILY`` names the folder of
the runs of bench/second_family_labels, with the hand-checked labels of those runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SHARED, need_path

from antiloop.config import GuardConfig
from antiloop.scan import Scanner
from antiloop.scan.engine import RunScan, scan_config

BENCH = Path(__file__).resolve().parents[2] / "bench"
LABELS = BENCH / "second_family_labels" / "labels.jsonl"


def _load_labeller() -> Any:
    """bench/labeller.py, loaded by its path (bench/ is no installed package)."""
    spec = importlib.util.spec_from_file_location("_second_family_labeller", BENCH / "labeller.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_labeller = _load_labeller()
first_loop = _labeller.first_loop
runs_of = _labeller.runs_of


def _scanner() -> Scanner:
    return Scanner(scan_config(GuardConfig(detectors=("repeat", "cycle"))))


def _mini(tmp_path: Path, turns: list[tuple[str, str]]) -> Path:
    """A mini-swe-agent v2 run: each turn a bash call and its result text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "you are"},
        {"role": "user", "content": "fix it"},
    ]
    for n, (command, result) in enumerate(turns):
        args = json.dumps({"command": command})
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": args}}
        messages.append({"role": "assistant", "content": "next", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
    doc = {"trajectory_format": "mini-swe-agent-1.1", "info": {}, "messages": messages}
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _ok(text: str, code: int = 0) -> str:
    return f"<returncode>{code}</returncode>\n<output>\n{text}\n</output>"


CASES: dict[str, tuple[list[tuple[str, str]], int | None]] = {
    "same command, same output": ([("ls", _ok("a")), ("ls  ", _ok("a"))], 1),
    "quoting differs only": ([("grep -n 'x' a.py", _ok("")), ('grep -n "x" a.py', _ok(""))], 1),
    "other output": ([("ls", _ok("a")), ("ls", _ok("a b"))], None),
    "other exit code": ([("make", _ok("done", 0)), ("make", _ok("done", 2))], None),
    "durations differ only": (
        [("pytest", _ok("1 failed in 0.52s", 1)), ("pytest", _ok("1 failed in 0.61s", 1))],
        1,
    ),
    "a shell's line counter": (
        [("cd..", _ok("/bin/bash: line 290: cd..: not found", 127))] * 1
        + [("cd..", _ok("/bin/bash: line 303: cd..: not found", 127))],
        1,
    ),
    "a cycle of two": (
        [("ls", _ok("a")), ("cat a", _ok("x")), ("ls", _ok("a")), ("cat a", _ok("x"))],
        3,
    ),
    "sleep may repeat": ([("sleep 5", _ok("")), ("sleep 5", _ok(""))], None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_labeller_reads_the_rule(name: str, tmp_path: Path) -> None:
    turns, expected = CASES[name]
    (calls,) = runs_of(_mini(tmp_path, turns))
    assert first_loop(calls) == expected


@pytest.mark.parametrize("name", list(CASES))
def test_the_scanner_agrees_on_the_labeller_cases(name: str, tmp_path: Path) -> None:
    turns, expected = CASES[name]
    (scan,) = _scanner().scan_paths([_mini(tmp_path, turns)])
    assert isinstance(scan, RunScan)
    assert scan.first_loop == expected


def _swe(tmp_path: Path, turns: list[tuple[str, str, str]]) -> Path:
    """A SWE-agent ``.traj`` written for the test: each turn (agent, action, observation), the
    file ``a.py`` open, the history naming the agent that issued each action."""
    state = json.dumps({"open_file": "/repo/a.py", "working_dir": "/repo"})
    trajectory = [
        {"action": action + "\n", "observation": obs, "state": state, "thought": "next"}
        for _, action, obs in turns
    ]
    history: list[dict[str, Any]] = [{"role": "system", "content": "you are", "agent": "Manager"}]
    for agent, action, obs in turns:
        history.append({"role": "assistant", "content": action, "action": action + "\n",
                        "agent": agent})  # fmt: skip
        history.append({"role": "user", "content": obs, "agent": agent})
    path = tmp_path / "run.traj"
    doc = {"environment": "swe_main", "trajectory": trajectory, "history": history, "info": {}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


_REFUSED = (
    "Your proposed edit has introduced new syntax error(s). Please understand the fixes and "
    "retry your edit commmand.\n\nERRORS:\n- E999 IndentationError: unexpected indent\n"
)
_WINDOW = (  # overlapping windows of a file: the same source lines 350-351 in both
    "[File: /repo/a.py (360 lines total)]\n(%d more lines above)\n%d:    x = 1\n"
    "350:    except ValueError as e:\n351:        # this may raise a formatting error.\n"
)

SWE_CASES: dict[str, tuple[list[tuple[str, str, str]], int | None]] = {
    "one role runs a script twice": (
        [("Programmer", "python r.py", "boom"), ("Programmer", "python r.py", "boom")],
        1,
    ),
    "another role runs it again": (
        [("Programmer", "python r.py", "boom"), ("Tester", "python r.py", "boom")],
        None,
    ),
    "a viewer's windows with error-like lines": (
        [("P", "scroll_down", _WINDOW % (294, 295)), ("P", "scroll_down", _WINDOW % (335, 336))],
        None,
    ),
    "a viewer at the end of the file": (
        [("P", "scroll_down", _WINDOW % (335, 336)), ("P", "scroll_down", _WINDOW % (335, 336))],
        1,
    ),
    "the same refused edit again": (
        [("P", "edit 5:5\n    x = 1\nend_of_edit", _REFUSED)] * 2,
        1,
    ),
    "an edit with other indentation": (
        [
            ("P", "edit 5:5\n    x = 1\nend_of_edit", _REFUSED),
            ("P", "edit 5:5\nx = 1\nend_of_edit", _REFUSED),
        ],
        None,
    ),
    "a body of several lines re-indented": (
        [
            ("P", "edit 5:6\n    x = 1\n    y = 2\nend_of_edit", _REFUSED),
            ("P", "edit 5:6\n  x = 1\n  y = 2\nend_of_edit", _REFUSED),
        ],
        None,
    ),
    "comments only, twice": (
        [("Manager", "# nothing to run yet", ""), ("Manager", "# still nothing to run", "")],
        1,
    ),
    "the same commands under other comments": (
        [
            ("P", "# install it\napt-get install jdk", "\nEXECUTION TIMED OUT"),
            ("P", "# on Debian:\napt-get install jdk", "\nEXECUTION TIMED OUT"),
        ],
        1,
    ),
}


@pytest.mark.parametrize("name", list(SWE_CASES))
def test_the_labeller_reads_swe_agent_runs(name: str, tmp_path: Path) -> None:
    turns, expected = SWE_CASES[name]
    (calls,) = runs_of(_swe(tmp_path, turns))
    assert first_loop(calls) == expected


@pytest.mark.parametrize("name", list(SWE_CASES))
def test_the_scanner_agrees_on_the_swe_agent_cases(name: str, tmp_path: Path) -> None:
    turns, expected = SWE_CASES[name]
    (scan,) = _scanner().scan_paths([_swe(tmp_path, turns)])
    assert isinstance(scan, RunScan)
    assert scan.first_loop == expected


def test_the_scanner_agrees_with_the_labeller_on_the_corpus() -> None:
    """Every corpus run the labeller reads (Claude Code, OpenHands, SWE-agent, mini-swe-agent)."""
    corpus = need_path(SHARED / "corpus", "the shared corpus")
    files = sorted(
        p
        for p in corpus.rglob("*")
        if p.suffix in (".jsonl", ".traj") or p.name.endswith(".traj.json")
    )
    scanner = _scanner()
    loops = 0
    for path in files:
        labels = [first_loop(calls) for calls in runs_of(path)]
        found = [r.first_loop for r in scanner.scan_one(path) if isinstance(r, RunScan)]
        assert found == labels, path
        loops += sum(label is not None for label in labels)
    assert loops >= 20  # the corpus holds loops: the agreement is not on empty ground


def test_the_scanner_agrees_with_the_hand_checked_labels() -> None:
    """Opt-in: the runs of bench/second_family_labels, when $ANTILOOP_SECOND_FAMILY has them."""
    root = os.environ.get("ANTILOOP_SECOND_FAMILY")
    if not root:
        pytest.skip("ANTILOOP_SECOND_FAMILY is not set (bench/second_family_labels/SOURCES.md)")
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]
    scanner = _scanner()
    for row in rows:
        path = Path(root) / row["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"], path
        scans = [r for r in scanner.scan_one(path) if isinstance(r, RunScan)]
        index = row["record"] or 0
        found = scans[index].first_loop if index < len(scans) else None
        assert found == row["first_loop"], path
