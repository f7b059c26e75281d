"""Properties of canonicalisation (docs/protocol.md section 3.2), checked with hypothesis."""

from __future__ import annotations

import json
import shlex
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from antiloop.core.procedure import (
    canonical_json,
    canonical_path,
    canonical_value,
    pattern_words,
    procedure_of,
)

SEGMENT = st.text(alphabet="abcXYZ019_-.", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..") and "..." not in s
)
WORD = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
)
JSON_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**9), max_value=10**9)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=20)
)
JSON_VALUE = st.recursive(
    JSON_SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
NO_VALUE_FLAGS = list("nilvHhs")  # no value for any of the seven (rg -r, ls -w take one)


def _path_forms(draw: Any) -> tuple[list[str], str]:
    parts = draw(st.lists(SEGMENT, min_size=1, max_size=4))
    return parts, "/".join(parts)


@st.composite
def messy_paths(draw: st.DrawFn) -> tuple[str, str]:
    """A relative path and a messy spelling of it (./, //, /./, trailing /)."""
    parts, plain = _path_forms(draw)
    messy = ""
    if draw(st.booleans()):
        messy += "./"
    for i, part in enumerate(parts):
        if i:
            messy += draw(st.sampled_from(["/", "//", "/./"]))
        messy += part
    if draw(st.booleans()):
        messy += "/"
    return plain, messy


@given(messy_paths())
def test_path_forms_collapse(pair: tuple[str, str]) -> None:
    """``./a/b``, ``a//b``, ``a/./b`` and ``a/b/`` are all ``a/b``."""
    plain, messy = pair
    assert canonical_path(messy) == canonical_path(plain)


@given(messy_paths())
def test_absolute_path_under_cwd_is_relative(pair: tuple[str, str]) -> None:
    """An absolute path under ``cwd`` is the same as the relative one."""
    plain, _ = pair
    assert canonical_path("/home/dev/w/" + plain, "/home/dev/w") == canonical_path(plain)


@given(st.text(max_size=30))
def test_canonical_path_is_idempotent(text: str) -> None:
    """Canonicalising a canonical path changes nothing."""
    once = canonical_path(text)
    if once is not None:
        assert canonical_path(once) == once


@given(st.text(max_size=40))
def test_pattern_words_are_idempotent(pattern: str) -> None:
    """A word sequence is its own word sequence."""
    once = pattern_words(pattern)
    assert pattern_words(once) == once


@given(st.lists(st.text(alphabet="abcdefXYZ", min_size=1, max_size=6), min_size=1, max_size=4))
def test_pattern_joiners_vanish(words: list[str]) -> None:
    """Joining the same words by ``.*``, ``_``, ``-``, spaces or ``\\s*`` gives one sequence."""
    forms = [".*".join(words), "_".join(words), "-".join(words), " ".join(words)]
    forms.append("\\s*".join(words))
    assert len({pattern_words(f) for f in forms}) == 1


@given(JSON_VALUE)
def test_canonical_value_is_idempotent(value: Any) -> None:
    """Canonicalising a canonical value changes nothing."""
    once = canonical_value(value)
    assert canonical_value(once) == once
    assert canonical_json(once) == canonical_json(value)


@given(JSON_VALUE)
def test_canonical_json_is_json(value: Any) -> None:
    """Canonical JSON is the standard compact, sorted encoding of the canonical value."""
    expected = json.dumps(
        canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert canonical_json(value) == expected


@given(st.dictionaries(st.text(max_size=8), JSON_VALUE, max_size=6), st.randoms())
def test_json_key_order_never_matters(args: dict[str, Any], rnd: Any) -> None:
    """Reordering the arguments' keys never changes the key."""
    items = list(args.items())
    rnd.shuffle(items)
    for tool in ("some_tool", "Read", "Grep", "Glob", "Edit"):
        assert procedure_of(tool, dict(items)).key == procedure_of(tool, args).key


@given(st.dictionaries(st.text(max_size=8), st.integers(-1000, 1000), max_size=5))
def test_number_forms_never_matter(args: dict[str, int]) -> None:
    """``10`` and ``10.0`` are the same argument."""
    floats = {k: float(v) for k, v in args.items()}
    assert procedure_of("some_tool", floats).key == procedure_of("some_tool", args).key


@given(
    st.dictionaries(
        st.text(max_size=8), st.text(max_size=10).filter(lambda s: "\n" not in s), max_size=5
    ),
    st.sampled_from([" ", "  ", "\t", " \t "]),
)
def test_surrounding_white_space_never_matters(args: dict[str, str], pad: str) -> None:
    """Surrounding white space of one-line string arguments never matters.

    (A multi-line body keeps the indentation of its first line: indentation is content.)
    """
    padded = {k: pad + v + pad for k, v in args.items()}
    assert procedure_of("some_tool", padded).key == procedure_of("some_tool", args).key


def _double_quoted(word: str) -> str:
    escaped = "".join("\\" + c if c in '"\\$`' else c for c in word)
    return '"' + escaped + '"'


def _backslashed(word: str) -> str:
    return "".join(c if c.isalnum() else "\\" + c for c in word)


@given(
    st.lists(WORD.filter(lambda w: "\n" not in w and "\r" not in w), min_size=1, max_size=5),
    st.lists(st.sampled_from([" ", "  ", "\t", " \t"]), min_size=6, max_size=6),
)
def test_shell_quoting_and_spacing_never_matter(words: list[str], gaps: list[str]) -> None:
    """Single quotes, double quotes, backslashes and spacing give the same words."""
    program = ["printf"]
    plain = shlex.join(program + words)
    styles = [shlex.quote, _double_quoted, _backslashed]
    spelled = []
    for style in styles:
        parts = [style(w) for w in words]
        text = "printf"
        for gap, part in zip(gaps, parts, strict=False):
            text += gap + part
        spelled.append(text)
    key = procedure_of("Bash", {"command": plain}).key
    for text in spelled:
        assert procedure_of("Bash", {"command": text}).key == key


@given(
    st.lists(st.sampled_from(NO_VALUE_FLAGS), min_size=1, max_size=5, unique=True),
    st.randoms(),
    st.sampled_from(["grep", "rg", "ag", "ack", "git grep", "ls", "fd"]),
)
def test_flag_bundles_commute(flags: list[str], rnd: Any, program: str) -> None:
    """For search and list programs, bundles split and flags sort: ``-rn`` = ``-nr`` = ``-r -n``."""
    bundled = f"{program} -{''.join(flags)} foo src"
    shuffled = flags[:]
    rnd.shuffle(shuffled)
    split = f"{program} " + " ".join("-" + f for f in shuffled) + " foo src"
    assert (
        procedure_of("Bash", {"command": bundled}).key
        == procedure_of("Bash", {"command": split}).key
    )


@given(st.sampled_from(["-A", "-B", "-C", "-m"]), st.integers(0, 99))
def test_flag_values_stay_with_their_flags(flag: str, n: int) -> None:
    """``-A3`` = ``-A 3``, and the value stays with its flag when flags move."""
    a = procedure_of("Bash", {"command": f"grep -n {flag}{n} x src"}).key
    b = procedure_of("Bash", {"command": f"grep {flag} {n} -n x src"}).key
    assert a == b


@given(st.text(max_size=60))
def test_any_command_gives_a_procedure(command: str) -> None:
    """Any text at all parses to a procedure (no exception), the same one each time."""
    a = procedure_of("Bash", {"command": command})
    assert a == procedure_of("Bash", {"command": command})
    assert a.paths == tuple(sorted(set(a.paths)))


@given(st.text(max_size=40), st.text(max_size=40))
def test_multi_line_bodies_lose_trailing_spaces_only(first: str, second: str) -> None:
    """A multi-line editor text compares verbatim except trailing spaces on its lines."""
    body = first.replace("\n", " ").rstrip() + "\n" + second.replace("\n", " ").rstrip()
    trailing = body.replace("\n", "   \n") + " \t"
    a = procedure_of("Edit", {"file_path": "a", "old_string": body, "new_string": "x"})
    b = procedure_of("Edit", {"file_path": "a", "old_string": trailing, "new_string": "x"})
    assert a.key == b.key


LINE_TEXT = st.text(alphabet=" \t\r\f\v\n\x0bab", max_size=40)


@given(LINE_TEXT)
def test_line_ends_are_stripped_as_the_regex_strips_them(text: str) -> None:
    """``strip_line_ends`` removes what the trailing-space regex of section 3.2 removes, and a
    stripped text stripped again is itself."""
    import re

    from antiloop.core.forms import strip_line_ends

    want = re.sub(r"[ \t\r\f\v]+(?=\n|\Z)", "", text)
    assert strip_line_ends(text) == want
    assert strip_line_ends(want) == want
