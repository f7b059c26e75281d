"""The rows engine (core.shell.engine, core.rules.programs): fast paths, config rows, one cache."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antiloop.config import read_settings
from antiloop.core import procedure
from antiloop.core.errors import ConfigError
from antiloop.core.rules.programs import Program, Runner, Wrapper, rows_of_table
from antiloop.core.rules.ruleset import BUILTIN, Rules
from antiloop.core.shell.tokens import tokenize, tokens_of


def _plain(tokens: list[object]) -> list[object]:
    return [t if isinstance(t, tuple) else ("redirect", t.op, t.target) for t in tokens]  # type: ignore[attr-defined]


@given(st.text(alphabet="ab -.'/;&|_\t", max_size=24))
def test_the_fast_paths_tokenize_as_the_tokenizer_does(command: str) -> None:
    """Words, single quotes and ``; & |`` separators read the same on the fast path."""
    assert _plain(tokens_of(command)) == _plain(tokenize(command))


@pytest.mark.parametrize(
    "command",
    ["cd src && pytest t.py -k 'a and b' | tail -n 5", "a&&b||c;;d|&e", "grep 'x;y' a & b"],
)
def test_separators_without_quotes_skip_the_tokenizer(command: str) -> None:
    """A chain of plain words reads as the full tokenizer reads it."""
    assert tokens_of(command) == tokenize(command)


def sh(command: str, rules: Rules = BUILTIN) -> procedure.Procedure:
    return procedure.procedure_of("Bash", {"command": command}, rules=rules)


def test_a_runner_row_makes_a_new_test_runner() -> None:
    """A config row names a test runner the built-in rows do not know."""
    assert sh("ward tests/").operation == "bash"
    assert sh("ward tests/", BUILTIN.extend(runners=[Runner("ward", "test")])).operation == "test"
    assert sh("ward tests/").operation == "bash"


def test_a_wrapper_row_is_looked_through() -> None:
    """``sudo`` is its own program until a wrapper row says it runs the command after it."""
    assert sh("sudo -u me grep -rn x src").programs == ("sudo",)
    proc = sh("sudo -u me grep -rn x src", BUILTIN.extend(wrappers=[Wrapper("sudo", short="u")]))
    assert (proc.programs, proc.operation, proc.context) == (("grep",), "grep", "x@src")


def test_a_program_row_reads_flags() -> None:
    """A search program row: its flags commute and its pattern is read as words."""
    rules = BUILTIN.extend([Program("ug", short="e", commute=True, search=True)])
    a, b = sh("ug -n -i fooBar src/", rules), sh("ug -i -n 'foo.*bar' ./src", rules)
    assert a.key == b.key
    assert a.context == "foo bar@src"


def test_the_canonical_table_of_a_config_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``[[canonical.runners]]`` in antiloop.toml is read, validated and used where passed."""
    path = tmp_path / "antiloop.toml"
    path.write_text(
        'max_steps = 50\n[[canonical.runners]]\nprogram = "ward"\nkind = "test"\n'
        '[[canonical.wrappers]]\nname = "chronic"\n'
    )
    rules = read_settings(path).rules
    assert sh("chronic ward", rules).operation == "test"
    assert sh("chronic ward").operation == "bash"  # reading the file installed nothing


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"runner": []}, "unknown key 'runner' (did you mean 'runners'?)"),
        ({"runners": [{"program": "w", "knd": "test"}]}, "unknown key 'knd'"),
        ({"runners": [{"program": "w", "kind": "lint"}]}, "'kind' must be one of"),
        ({"runners": [{"kind": "test"}]}, "needs 'program'"),
        ({"programs": [{"name": "x", "short": 1}]}, "'short' must be a string"),
        ({"programs": [{"name": "x", "long": "a b"}]}, "'long' must be a list of strings"),
        ({"programs": [{"name": "x", "op": "run"}]}, "'op' must be one of"),
        ({"wrappers": [{"name": "x", "operands": -1}]}, "'operands' must be an integer >= 0"),
        ({"wrappers": {"name": "x"}}, "'wrappers' must be an array of tables"),
    ],
)
def test_a_bad_row_is_named_in_one_line(table: dict[str, object], message: str) -> None:
    """An unknown key or a value of the wrong kind is a one-line ConfigError naming it."""
    with pytest.raises(ConfigError) as err:
        rows_of_table(table, "f.toml")
    assert str(err.value).startswith("f.toml: ")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_one_cache_with_a_typed_key() -> None:
    """Repeats are answered from one cache keyed by (tool, cwd, paths, typed arguments, rules)."""
    a = procedure.procedure_of("Bash", {"command": "ls src"}, cwd="/w")
    assert procedure.procedure_of("Bash", {"command": "ls src"}, cwd="/w") is a
    assert ("Bash", "/w", (), (("command", str, "ls src"),), BUILTIN) in procedure._known
    other = BUILTIN.extend()
    b = procedure.procedure_of("Bash", {"command": "ls src"}, cwd="/w", rules=other)
    assert b is not a
    assert b == a
    assert ("Bash", "/w", (), (("command", str, "ls src"),), other) in procedure._known
