"""Behaviour pinned by the mutation run (`make mutation`): each test kills mutants of the core.

Written through the public API where it can be (``antiloop check``'s stream, Guard.record,
fingerprints), with expectations written out literally.
"""

from __future__ import annotations

import io
import json
from typing import Any

from antiloop import Guard
from antiloop.commands.check import judge_stream
from antiloop.fingerprint import build, digest8, escape
from antiloop.verdict import Action, Verdict, worst

GREP = {"tool": "grep", "args": {"pattern": "x"}, "output": "a\n"}


def check(*lines: str) -> list[dict[str, Any]]:
    """``antiloop check`` on these lines, in this process: the verdict lines."""
    out = io.StringIO()
    judge_stream(io.BytesIO("\n".join(lines).encode()), out, Guard())
    return [json.loads(line) for line in out.getvalue().splitlines()]


# -- verdict lines (PROTOCOL.md section 7) ----------------------------------------------------


def test_check_prints_every_field_of_every_verdict_line() -> None:
    """Each line has exactly index, action, detector, outcome, fingerprint, reason."""
    assert check(json.dumps(GREP), "[1]", json.dumps(GREP)) == [
        {
            "index": 0,
            "action": "continue",
            "detector": None,
            "outcome": None,
            "fingerprint": None,
            "reason": "",
        },
        {
            "index": 1,
            "action": "invalid",
            "detector": None,
            "outcome": None,
            "fingerprint": None,
            "reason": "line 2: not a JSON object but list",
        },
        {
            "index": 2,
            "action": "stop",
            "detector": "repeat",
            "outcome": "loop",
            "fingerprint": "AGENT::agent::grep::x::1 match#3cd0b1f8",
            "reason": "grep 'x' ran twice in a row with the same result (1 match).",
        },
    ]


def test_verdict_constructors_keep_what_they_are_given() -> None:
    """ok, nudge and block keep their detector, reason and extra fields."""
    assert Verdict.ok() == Verdict(Action.CONTINUE, None, None, None, "")
    assert Verdict.ok("fine").reason == "fine"
    nudge = Verdict.nudge("goal", "done?", hint="say so", evidence=(1, 2))
    assert (nudge.action, nudge.detector, nudge.outcome, nudge.reason, nudge.hint) == (
        Action.NUDGE,
        "goal",
        "goal",
        "done?",
        "say so",
    )
    assert nudge.evidence == (1, 2)
    block = Verdict.block("repeat", "again")
    assert (block.action, block.detector, block.outcome, block.reason) == (
        Action.BLOCK,
        "repeat",
        "loop",
        "again",
    )


def test_worst_keeps_the_first_of_equals_and_is_ok_for_none() -> None:
    """Among verdicts of the same action and detector the first is kept; none is ok."""
    first, second = Verdict.stop("repeat", "first"), Verdict.stop("repeat", "second")
    assert worst([first, second]).reason == "first"
    assert worst([Verdict.ok("a"), Verdict.ok("b")]).reason == "a"
    assert worst([]) == Verdict.ok()


# -- fingerprint parts (PROTOCOL.md section 6) ------------------------------------------------


def test_a_part_at_its_limit_is_kept_whole() -> None:
    """A context of exactly 80 characters is not cut; 81 are cut to 79 and an ellipsis."""
    exact = "c" * 80
    assert build("a", "bash", exact, "ok", "0" * 8).split("::")[3] == exact
    assert build("a", "bash", exact + "d", "ok", "0" * 8).split("::")[3] == "c" * 79 + "…"


def test_a_cut_part_loses_its_trailing_space() -> None:
    """White space left at the cut is dropped before the ellipsis."""
    assert escape("a" * 78 + " bc", 80) == "a" * 78 + "…"


def test_an_empty_part_is_a_dash() -> None:
    """A part that escapes to nothing is written ``-``."""
    assert escape("") == "-"
    assert escape(" :: ") == "-"
    assert build("", "bash", "", "", "0" * 8) == "AGENT::-::bash::-::-#00000000"


def test_a_lone_surrogate_has_a_digest() -> None:
    """Text from JSON may hold a lone surrogate: it is digested, not an error."""
    assert digest8("\ud800") == "38da57e7"
    assert digest8("x") == "b1ba07e5"
