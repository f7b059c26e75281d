"""The opt-in detectors hidden-repeat and cosmetic-rerun: positives, near misses, config, state."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from antiloop import Action, Guard, GuardConfig, Repeat
from antiloop.config import DETECTOR_NAMES
from antiloop.core.errors import ConfigError
from antiloop.core.extra.detectors import CosmeticRerun, HiddenRepeat
from antiloop.guard import default_detector
from antiloop.stores.codec import decode_state, encode_state
from antiloop.testing import ScriptedEmbedder, verdicts_of

READ = {"tool": "Read", "args": {"file_path": "a.py"}, "output": "1\tx = 1\n"}
RUN = {"tool": "Bash", "args": {"command": "python repro.py"}, "output": "42\n", "exit_code": 0}
SLEEP = {"tool": "Bash", "args": {"command": "sleep 2"}, "output": ""}


def failed_edit(i: int) -> dict[str, Any]:
    """An Edit that was refused (its old string is not in the file)."""
    return {
        "tool": "Edit",
        "args": {"file_path": "a.py", "old_string": f"x = {i}0", "new_string": "x = 2"},
        "error": "String to replace not found in file.",
    }


def edit(old: str, new: str, path: str = "repro.py") -> dict[str, Any]:
    """An Edit that was applied."""
    return {
        "tool": "Edit",
        "args": {"file_path": path, "old_string": old, "new_string": new},
        "output": f"The file {path} has been updated.",
    }


def fired(detector: Any, steps: list[dict[str, Any]]) -> list[tuple[int, str, Action]]:
    """(step, detector, action) of every verdict that fired."""
    return [
        (i, v.detector or "", v.action)
        for i, v in enumerate(verdicts_of(Guard(detector), steps))
        if v.action is not Action.CONTINUE
    ]


# --- hidden-repeat -------------------------------------------------------------------------------


def test_a_read_three_times_over_failed_edits_stops() -> None:
    """read, failed edit, read, failed edit, read: the third read stops, with its fingerprint."""
    steps = [READ, failed_edit(1), READ, failed_edit(2), READ]
    verdicts = verdicts_of(Guard(HiddenRepeat()), steps)
    last = verdicts[4]
    assert [v.action for v in verdicts[:4]] == [Action.CONTINUE] * 4
    assert (last.action, last.detector, last.outcome) == (Action.STOP, "hidden-repeat", "loop")
    assert last.evidence == (0, 1, 2, 3, 4)
    assert last.fingerprint is not None
    assert last.fingerprint.startswith("AGENT::agent::hidden-repeat::a.py::1 x = 1#")
    assert "changed nothing" in last.reason
    assert "changed nothing" in last.hint


def test_one_re_read_after_a_failed_edit_is_recovery() -> None:
    """read, failed edit, read (to copy the exact text) is not flagged at the default 3."""
    assert fired(HiddenRepeat(), [READ, failed_edit(1), READ]) == []
    assert fired(HiddenRepeat(2), [READ, failed_edit(1), READ]) == [
        (2, "hidden-repeat", Action.STOP)
    ]


@pytest.mark.parametrize(
    "noop",
    [
        {  # OpenHands' editor answers with its error as output
            "tool": "str_replace_editor",
            "args": {"command": "str_replace", "path": "a.py", "old_str": "y", "new_str": "z"},
            "output": "ERROR:\nNo replacement was performed, old_str `y` did not appear verbatim.",
        },
        {  # SWE-agent's rejected edit (the reader puts it in error)
            "tool": "edit",
            "args": {"start_line": 2, "end_line": 2, "replacement_text": "  x = ("},
            "output": "Your proposed edit has introduced new syntax error(s). ...",
        },
        edit("x = 1", "x = 1", "a.py"),  # old and new are the same text
        {"tool": "Bash", "args": {"command": "sed -i 's/(/[/' a.py"}, "exit_code": 1},
        {"tool": "Bash", "args": {"command": "git apply fix.patch"}, "exit_code": 1},
    ],
    ids=["editor-error-output", "swe-agent-rejected", "same-text", "sed-failed", "git-apply"],
)
def test_every_way_of_knowing_an_edit_changed_nothing(noop: dict[str, Any]) -> None:
    """Failed atomic edits, refusals in the output and equal old/new text are no-ops."""
    assert fired(HiddenRepeat(), [READ, noop, READ, noop, READ]) == [
        (4, "hidden-repeat", Action.STOP)
    ]


def test_file_hashes_equal_to_the_last_known_state_are_a_no_op() -> None:
    """An edit that succeeded but left the file's sha256 as the stream last saw it did nothing."""
    state = {"a.py": {"sha256": "ab" * 32, "mtime": 1.0}}
    read = {**READ, "file_states": state}
    same = {**edit("x = 1", "x =  1 ", "a.py"), "file_states": state}
    other = {**same, "file_states": {"a.py": {"sha256": "cd" * 32, "mtime": 2.0}}}
    assert fired(HiddenRepeat(), [read, same, read, same, read]) == [
        (4, "hidden-repeat", Action.STOP)
    ]
    assert fired(HiddenRepeat(), [read, same, read, other, read]) == []


def test_a_run_repeated_over_failed_edits_is_a_hidden_repeat_too() -> None:
    """Any step that is not an edit can be the repeated one: a test run over refused edits."""
    test = {"tool": "Bash", "args": {"command": "pytest -q"}, "output": "1 failed", "exit_code": 1}
    assert fired(HiddenRepeat(), [test, failed_edit(1), test, failed_edit(2), test]) == [
        (4, "hidden-repeat", Action.STOP)
    ]


def test_allowed_steps_between_are_invisible() -> None:
    """A sleep (allowed to repeat) neither counts nor breaks the chain."""
    steps = [READ, failed_edit(1), SLEEP, READ, failed_edit(2), READ]
    assert fired(HiddenRepeat(), steps) == [(5, "hidden-repeat", Action.STOP)]


@pytest.mark.parametrize(
    ("steps", "why"),
    [
        ([READ, failed_edit(1), READ, edit("x = 1", "x = 2", "a.py"), READ], "a real edit"),
        (
            [READ, failed_edit(1), {**READ, "output": "1\tx = 2\n"}, failed_edit(2), READ],
            "another result",
        ),
        (
            [READ, failed_edit(1), READ, {**READ, "args": {"file_path": "b.py"}}, READ],
            "another step between",
        ),
        ([READ, READ, READ], "adjacent reads are the plain repeat's"),
        (
            [
                READ,
                {
                    "tool": "Bash",
                    "args": {"command": "cat > t.py <<'EOF'\nimport a\nEOF\npython t.py"},
                    "exit_code": 1,
                },
                READ,
                failed_edit(2),
                READ,
            ],
            "a failed chain that wrote a file first",
        ),
        (
            [
                READ,
                {"tool": "Bash", "args": {"command": "cat missing > a.py"}, "exit_code": 1},
                READ,
                failed_edit(2),
                READ,
            ],
            "a failed redirection empties its file",
        ),
        (
            [READ, {"tool": "Bash", "args": {"command": "patch -p1 < f.diff"}, "exit_code": 1}] * 2
            + [READ],
            "a failed patch may have applied some hunks",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_hidden_repeat_near_misses(steps: list[dict[str, Any]], why: str) -> None:
    """Each of these breaks the chain: no hidden repeat."""
    assert fired(HiddenRepeat(), steps) == [], why


# --- cosmetic-rerun ------------------------------------------------------------------------------


def test_a_rerun_after_a_comment_only_edit_asks() -> None:
    """python repro.py, add a comment, python repro.py with the same output: ask."""
    verdicts = verdicts_of(Guard(CosmeticRerun()), [RUN, edit("x = 1", "x = 1  # set x"), RUN])
    last = verdicts[2]
    assert (last.action, last.detector) == (Action.ASK, "cosmetic-rerun")
    assert last.evidence == (0, 1, 2)
    assert last.fingerprint is not None
    assert last.fingerprint.startswith("AGENT::agent::cosmetic-rerun::python repro.py::42#")
    assert "comments or white space" in last.reason


@pytest.mark.parametrize(
    "cosmetic",
    [
        edit("x = 1\ny = 2", "x = 1\n\n\ny = 2"),
        {
            "tool": "MultiEdit",
            "args": {
                "file_path": "repro.py",
                "edits": [
                    {"old_string": "a = 1", "new_string": "a = 1  # a"},
                    {"old_string": "b = 2 ", "new_string": "b = 2"},
                ],
            },
            "output": "ok",
        },
        {
            "tool": "apply_patch",
            "args": {"input": "*** Begin Patch\n*** Update File: repro.py\n@@\n-x = 1\n+x = 1 \n"},
            "output": "Done!",
        },
        {
            "tool": "str_replace_editor",
            "args": {"command": "insert", "path": "repro.py", "insert_line": 3, "new_str": "# x"},
            "output": "The file repro.py has been edited.",
        },
        {"tool": "Bash", "args": {"command": "cat >> repro.py <<'EOF'\n\n# done\nEOF"}},
    ],
    ids=["blank-lines", "multi-edit", "apply-patch", "insert-comment", "append-comment"],
)
def test_every_edit_form_that_only_touches_comments(cosmetic: dict[str, Any]) -> None:
    """Editor strings, MultiEdit, apply_patch bodies, inserts and appends are all read."""
    assert fired(CosmeticRerun(), [RUN, cosmetic, RUN]) == [(2, "cosmetic-rerun", Action.ASK)]


def test_a_whole_file_rewritten_with_only_comments_changed() -> None:
    """A heredoc rewrite compared with the content the stream saw written last."""
    body = "import sys\nprint(42)\n"

    def write(text: str) -> dict[str, Any]:
        return {"tool": "Bash", "args": {"command": f"cat > repro.py <<'EOF'\n{text}EOF"}}

    commented = "import sys\n# the answer\nprint(42)\n"
    assert fired(CosmeticRerun(), [write(body), RUN, write(commented), RUN]) == [
        (3, "cosmetic-rerun", Action.ASK)
    ]
    changed = "import sys\nprint(43)\n"
    assert fired(CosmeticRerun(), [write(body), RUN, write(changed), RUN]) == []
    # an edit of the file in between: the last whole write no longer tells its content
    between = edit("print(42)", "print(42)  # x")
    steps = [write(body), between, RUN, write(commented), RUN]
    assert fired(CosmeticRerun(), steps) == []


@pytest.mark.parametrize(
    ("steps", "why"),
    [
        ([RUN, edit("x = 1", "    x = 1"), RUN], "indentation is Python syntax"),
        ([RUN, edit('s = "# a"', 's = "# b"'), RUN], "a string changed"),
        ([RUN, edit("x = 1", "x = 1  # type: ignore"), RUN], "a pragma comment"),
        ([RUN, edit("x = 1", "x = 1  # c"), {**RUN, "output": "43\n"}], "another result"),
        ([READ, edit("x = 1", "x = 1  # c", "a.py"), READ], "a read is no run"),
        ([RUN, failed_edit(1), RUN], "no cosmetic edit: hidden-repeat's kind"),
        ([RUN, edit("x = 1", "x = 1  # c"), edit("y = 1", "y = 2"), RUN], "a real change too"),
        ([RUN, RUN], "no edit between: the plain repeat's"),
        ([RUN, edit("a # b", "a", "notes.txt"), RUN], "no known language: '#' is text"),
        (
            [
                RUN,
                {
                    "tool": "Bash",
                    "args": {
                        "command": "cat > p.diff <<'EOF'\n+++ b/repro.py\n@@ -1 +1 @@\n-x = 1\n"
                        "+x = 1  # c\nEOF\ngit apply p.diff && python setup.py develop"
                    },
                },
                RUN,
            ],
            "the patching step also ran something",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_cosmetic_rerun_near_misses(steps: list[dict[str, Any]], why: str) -> None:
    """None of these is a re-run after a cosmetic-only edit."""
    assert fired(CosmeticRerun(), steps) == [], why


def test_the_two_detectors_never_fire_on_one_chain() -> None:
    """Gaps of only no-op edits are hidden-repeat's, gaps with a cosmetic edit cosmetic-rerun's."""
    both = HiddenRepeat(2) | CosmeticRerun(2)
    assert fired(both, [RUN, failed_edit(1), RUN]) == [(2, "hidden-repeat", Action.STOP)]
    assert fired(both, [RUN, edit("x = 1", "x = 1 # c"), RUN]) == [
        (2, "cosmetic-rerun", Action.ASK)
    ]


# --- config, composition, state -----------------------------------------------------------------


def test_opt_in_detectors_are_off_by_default() -> None:
    """The default config names neither: the loops pass, and no chain is kept."""
    assert "hidden-repeat" not in DETECTOR_NAMES
    assert "cosmetic-rerun" not in GuardConfig().detectors
    guard = Guard()
    steps = [READ, failed_edit(1), READ, failed_edit(2), READ]
    assert all(v.action is Action.CONTINUE for v in verdicts_of(guard, steps))
    state = guard.store.peek("default")
    assert state is not None
    assert state.streams["agent"].chains is None  # nothing kept, nothing paid


def test_named_in_config_they_run_with_their_thresholds() -> None:
    """``detectors`` takes their names; the thresholds have their own keys, at least 2."""
    config = GuardConfig.from_mapping(
        {
            "detectors": ["repeat", "hidden-repeat", "cosmetic-rerun"],
            "hidden_repeat_threshold": 2,
            "cosmetic_rerun_threshold": 3,
        }
    )
    parts = default_detector(config, ScriptedEmbedder()).detectors
    assert [repr(p) for p in parts] == [
        "Repeat(threshold=2)",
        "HiddenRepeat(threshold=2)",
        "CosmeticRerun(threshold=3)",
    ]
    verdicts = verdicts_of(Guard(config=config), [READ, failed_edit(1), READ])
    assert verdicts[2].detector == "hidden-repeat"
    with pytest.raises(ConfigError, match="hidden_repeat_threshold"):
        GuardConfig.from_mapping({"hidden_repeat_threshold": 1})
    with pytest.raises(ConfigError, match="hidden-repeats"):
        GuardConfig.from_mapping({"detectors": ["hidden-repeats"]})


def test_they_compose_with_the_rule() -> None:
    """With the repeat rule: each loop is named by the detector that sees it."""
    policy = Repeat(2) | HiddenRepeat(3)
    assert fired(policy, [READ, failed_edit(1), READ, failed_edit(2), READ]) == [
        (4, "hidden-repeat", Action.STOP)
    ]
    assert fired(policy, [READ, READ]) == [(1, "repeat", Action.STOP)]


def test_the_chain_survives_a_store_round_trip_between_steps() -> None:
    """What a detector follows is in the stream state: encoded, decoded, it goes on."""
    steps = [READ, failed_edit(1), READ, failed_edit(2), READ]
    guard = Guard(HiddenRepeat())
    for step in steps[:4]:
        guard.record(step)
    state = guard.store.peek("default")
    assert state is not None
    chains = state.streams["agent"].chains
    assert chains is not None
    assert set(chains) == {"~observed", "hidden-repeat"}
    back = decode_state(encode_state(state))
    assert back == state
    fresh = Guard(HiddenRepeat())
    with fresh.store.transaction("default") as loaded:
        loaded.steps, loaded.streams = back.steps, back.streams
    assert fresh.record(steps[4]).detector == "hidden-repeat"


def test_kept_state_stays_small_on_a_long_chain() -> None:
    """200 failed edits between reads keep at most 32 evidence steps; no output is kept."""
    big = {**READ, "output": "x" * 100_000}
    steps = [big] + [failed_edit(i) for i in range(200)] + [big]
    guard = Guard(HiddenRepeat(2))
    verdicts = verdicts_of(guard, steps)
    assert verdicts[-1].detector == "hidden-repeat"
    assert len(verdicts[-1].evidence) == 32
    state = guard.store.peek("default")
    assert state is not None
    assert len(encode_state(state)) < 8_000


_FINGERPRINT_SCRIPT = """
from antiloop import Guard
from antiloop.core.extra.detectors import CosmeticRerun, HiddenRepeat
read = {"tool": "Read", "args": {"file_path": "a.py"}, "output": "x"}
bad = {"tool": "Edit", "args": {"file_path": "a.py", "old_string": "q", "new_string": "r"},
       "error": "String to replace not found in file."}
run = {"tool": "Bash", "args": {"command": "python r.py"}, "output": "42", "exit_code": 0}
note = {"tool": "Edit", "args": {"file_path": "r.py", "old_string": "a", "new_string": "a # n"},
        "output": "ok"}
g = Guard(HiddenRepeat() | CosmeticRerun())
print([g.record(s).fingerprint for s in (read, bad, read, bad, read)][-1])
g = Guard(HiddenRepeat() | CosmeticRerun())
print([g.record(s).fingerprint for s in (run, note, run)][-1])
"""


def test_fingerprints_are_the_same_in_another_process() -> None:
    """No salted hash, no time: a fresh interpreter gives the same fingerprints."""
    out = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
    ).stdout.splitlines()
    here = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "7"},
    ).stdout.splitlines()
    pinned = [  # a digest over anything volatile would change them
        "AGENT::agent::hidden-repeat::a.py::x#62d0dcbb",
        "AGENT::agent::cosmetic-rerun::python r.py::42#b22dcfff",
    ]
    assert out == here == pinned


def test_scan_with_a_config_naming_them_reports_their_loops(tmp_path: Any) -> None:
    """``antiloop scan --config`` runs the opt-in detectors it names; a hidden repeat stops,
    so the waste starts there."""
    import contextlib
    import io
    import json

    from antiloop.cli import main

    trace = tmp_path / "run.jsonl"
    steps = [READ, failed_edit(1), READ, failed_edit(2), READ, RUN, RUN | {"output": "43\n"}]
    trace.write_text("".join(json.dumps(s) + "\n" for s in steps), encoding="utf-8")
    config = tmp_path / "antiloop.toml"
    config.write_text('[guard]\ndetectors = ["repeat", "hidden-repeat"]\n', encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["scan", str(trace), "--config", str(config), "--json"])
    run = json.loads(out.getvalue().splitlines()[0])
    assert code == 1
    assert [(loop["step"], loop["detector"]) for loop in run["loops"]] == [(4, "hidden-repeat")]
    assert (run["waste"]["from_step"], run["waste"]["steps"]) == (4, 2)
