"""Shell readings by shape (``core.shell.shapes``) are the engine's readings, word for word."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from antiloop.core.forms import canonical_path
from antiloop.core.procedure import procedure_of
from antiloop.core.rules.programs import Runner
from antiloop.core.rules.ruleset import BUILTIN
from antiloop.core.shell import engine
from antiloop.core.shell import shapes as memo


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


NAMES = _words(
    "grep rg ag ls find fd cat head sed tee cp mv rm git npm npx pnpm yarn python python3"
    " python3.11 pytest make cd timeout env nice xargs bash sh uv exec run build test install"
    " echo printf go cargo mvn gradle node tsc"
)
FLAGS = _words("-rn -n -e -A -A3 -i -l -q -x -m -c -name -type -o --include --exec -- -")
VALUES = st.text(alphabet="abXY019_./-@,+%", min_size=1, max_size=9)
SEPARATORS = (" ", " ", " ", " && ", " | ", "; ", " || ")


@st.composite
def shapes(draw: st.DrawFn) -> list[tuple[str, str]]:
    """A command's shape: (kind, text) per word, kind "value" a word drawn again per command."""
    out: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(("name", "flag", "value", "value")))
        text = draw(st.sampled_from(NAMES if kind == "name" else FLAGS)) if kind != "value" else ""
        sep = draw(st.sampled_from(SEPARATORS)) if out else ""
        out.append((kind, sep + text))
    return out


def _command(draw: st.DrawFn, shape: list[tuple[str, str]]) -> str:
    parts = []
    for kind, text in shape:
        if kind == "value":
            word = draw(VALUES)
            quote = draw(st.booleans())
            parts.append(text + (f"'{word}'" if quote else word))
        else:
            parts.append(text)
    return "".join(parts)


def _same(command: str, cwd: str | None) -> None:
    assert memo.shell(command, cwd, BUILTIN) == engine.shell(command, cwd, BUILTIN), command


@settings(max_examples=400)
@given(st.data(), shapes(), st.sampled_from([None, "/w", "/"]))
def test_a_shape_filled_with_other_words_reads_as_the_engine_reads_it(
    data: st.DataObject, shape: list[tuple[str, str]], cwd: str | None
) -> None:
    first = _command(data.draw, shape)
    _same(first, cwd)  # seen once
    _same(first, cwd)  # seen again: learnt
    for _ in range(3):
        _same(_command(data.draw, shape), cwd)  # filled in


@given(VALUES | st.sampled_from(NAMES + FLAGS), st.sampled_from([None, "/w", "/"]))
def test_a_slot_is_its_own_canonical_path_and_looks_like_a_path_by_its_flavour(
    word: str, cwd: str | None
) -> None:
    flavour = memo._flavour(word, memo._names(BUILTIN))
    if flavour >= 0:
        assert canonical_path(word, cwd) == word
        assert engine._pathlike(word) == (flavour > 0)
        assert ("/" in word) == (flavour == 2)


def test_same_shape_other_values() -> None:
    for n in range(3):
        got = memo.shell(f"grep -rn 'value_{n}' src/mod{n}", "/w", BUILTIN)
        assert got[1:4] == (
            f'[["grep","-n","-r","\\u0002","\\u0001value {n}","src/mod{n}"]]',
            f"value {n}@src/mod{n}",
            [f"src/mod{n}"],
        )


def test_values_that_merge_paths_are_read_by_the_engine() -> None:
    for a, b in (("x.py", "y.py"), ("z.py", "w.py"), ("q.py", "q.py")):
        _same(f"cat {a} {b}", None)
        _same(f"ls {a}; ls {b}", None)


def test_each_rule_set_reads_by_its_own_shapes() -> None:
    """A shape learnt under one rule set is never filled in under another."""
    ward = BUILTIN.extend(runners=[Runner("ward", "test")])
    for n in range(3):
        assert procedure_of("Bash", {"command": f"ward tests/t{n}.py"}).operation == "bash"
        assert procedure_of("Bash", {"command": f"ward tests/u{n}.py"}, rules=ward).operation == (
            "test"
        )
    assert procedure_of("Bash", {"command": "ward tests/t9.py"}, rules=ward).operation == "test"
    assert procedure_of("Bash", {"command": "ward tests/t8.py"}).operation == "bash"
