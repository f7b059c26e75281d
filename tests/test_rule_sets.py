"""Each guard reads by its own rule set: two guards with different rows in one process.

A config's ``[canonical]`` and ``[readings]`` rows go with the guard built from it (its
``Policy``), never into module globals: a default guard built after it, or beside it, reads by
the built-in rows, whatever order the two are built and used in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from antiloop import Action, Guard, GuardConfig, load_config

ROWS = """
embedder = "ngram"

[[readings.scrubbers]]
name = "build id"
pattern = 'build-[0-9a-f]{8}'
placeholder = "<build>"

[[canonical.runners]]
program = "ward"
kind = "test"
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "antiloop.toml"
    path.write_text(ROWS, encoding="utf-8")
    return path


def _pack(guard: Guard, session: str) -> list[Action]:
    """``make pkg`` twice, the build id different each time."""
    return [
        guard.record(
            {"session": session, "tool": "Bash", "args": {"command": "make pkg"}, "output": out}
        ).action
        for out in ("packed build-1234abcd", "packed build-9999ffff")
    ]


def _ward_op(guard: Guard, session: str) -> str:
    """The operation ``ward tests/`` run twice alike is stopped as, read from its fingerprint."""
    step = {"session": session, "tool": "Bash", "args": {"command": "ward tests/"}, "output": "x"}
    guard.record(step)
    verdict = guard.record(step)
    assert verdict.action is Action.STOP
    return (verdict.fingerprint or "").split("::")[2]


@pytest.mark.parametrize("order", ["config first", "default first"])
def test_two_guards_in_one_process_each_read_by_their_own_rows(
    config_file: Path, order: str
) -> None:
    """The scrubbing guard stops the rerun; the default one sees two different results."""
    if order == "config first":
        scrubbing = Guard.from_config(str(config_file))
        plain = Guard(config=GuardConfig(embedder="ngram"))
    else:
        plain = Guard(config=GuardConfig(embedder="ngram"))
        scrubbing = Guard.from_config(str(config_file))
    for round_ in range(2):  # interleaved, twice: no cache carries one guard's reading over
        assert _pack(plain, f"plain{round_}") == [Action.CONTINUE, Action.CONTINUE]
        assert _pack(scrubbing, f"rows{round_}") == [Action.CONTINUE, Action.STOP]


def test_a_config_placeholder_is_a_word_to_the_model_and_kept_in_the_fingerprint(
    config_file: Path,
) -> None:
    """The stop names the build id ``…`` in its reason, ``<build>`` in its fingerprint."""
    guard = Guard.from_config(str(config_file))
    for out in ("packed build-1234abcd", "packed build-9999ffff"):
        verdict = guard.record({"tool": "Bash", "args": {"command": "make pkg"}, "output": out})
    assert verdict.action is Action.STOP
    assert "(packed …)" in verdict.reason
    assert "::packed <build>#" in (verdict.fingerprint or "")


def test_a_config_runner_row_names_the_operation_for_its_guard_only(config_file: Path) -> None:
    """``ward`` is a test runner for the guard whose rows say so, a plain command otherwise."""
    rows = Guard(config=load_config(config_file))
    plain = Guard(config=GuardConfig(embedder="ngram"))
    for n in range(2):
        assert _ward_op(rows, f"rows{n}") == "test"
        assert _ward_op(plain, f"plain{n}") == "bash"


def test_reading_a_config_file_changes_no_other_guard(config_file: Path) -> None:
    """A guard built before a config file is read keeps reading by the built-in rows."""
    plain = Guard(config=GuardConfig(embedder="ngram"))
    assert load_config(config_file).rules is not GuardConfig().rules
    assert _pack(plain, "s") == [Action.CONTINUE, Action.CONTINUE]
    assert _ward_op(plain, "w") == "bash"


def test_antiloop_serve_reads_the_rows_of_its_config(config_file: Path) -> None:
    """``antiloop serve --config`` holds one guard a process: it judges by the file's rows."""
    from antiloop.commands.serve import load

    config, _policy, _budgets = load(str(config_file))
    assert isinstance(config, GuardConfig)
    served = Guard(config=config)
    assert _pack(served, "s") == [Action.CONTINUE, Action.STOP]
    assert _pack(Guard(config=GuardConfig(embedder="ngram")), "s") == [
        Action.CONTINUE,
        Action.CONTINUE,
    ]
