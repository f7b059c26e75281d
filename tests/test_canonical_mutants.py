"""Procedure canonicalisation pinned at its edges (PROTOCOL §3.1-§3.2), through the public API.

Every expectation is written out: the operation, the context, the paths, or which commands are
the same procedure and which are not.
"""

from __future__ import annotations

import pytest

from antiloop.canonical import Procedure, pattern_words, procedure_of


def sh(command: str, cwd: str | None = None) -> Procedure:
    """The procedure of a Bash call running ``command``."""
    return procedure_of("Bash", {"command": command}, cwd=cwd)


def test_a_trailing_backslash_is_a_word_of_its_own() -> None:
    """``echo \\`` prints a backslash (bash reads a final ``\\`` as itself), not ``echo ''``."""
    assert sh("echo \\").key == sh("echo '\\'").key != sh("echo ''").key


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("foo\\.\\.", "foo \\.\\."),
        ("foo.\\.", "foo .\\."),
        ("foo\\", "foo \\"),
        ("foo[ab]", "foo [ab]"),
        ("foo[a]", "foo [a]"),
        ("foo[x[]", "foo [x[]"),
        ("foo[a]x[b]", "foo x [b]"),
        ("foo.[ab]", "foo .[ab]"),
        ("foo[[:alpha:]]", "foo [[:alpha:]]"),
        ("foo[^]]", "foo [^]]"),
        ("[a]foo]", "[a] foo ]"),
        ("x]", "x ]"),
        ("foo|", "foo |"),
        ("|foo", "| foo"),
        ("(foo|bar)", "( foo | bar )"),
        ("foo|bar|", "foo | bar |"),
        ("a\\|b", "a | b"),
    ],
)
def test_pattern_edges_are_words_of_their_own(pattern: str, words: str) -> None:
    """A leading or trailing run of regex syntax is one word (an escape or a class whole)."""
    assert pattern_words(pattern) == words


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("xÉcole", "x école"),
        ("éDF", "é df"),
        ("ÉTATServeur", "état serveur"),
        ("ÀBCd", "àb cd"),
        ("ÉcoleNormale", "école normale"),
        ("naïveBayes2Go", "naïve bayes2 go"),
    ],
)
def test_words_split_at_case_boundaries_beyond_ascii(pattern: str, words: str) -> None:
    """Letters outside ASCII split at case boundaries as ASCII ones do (``HTTPServer`` rule)."""
    assert pattern_words(pattern) == words


@pytest.mark.parametrize(
    ("command", "cwd", "paths"),
    [
        ("find -L src -name '*.py'", None, ("*.py", "src")),
        ("find -H src", None, ("src",)),
        ("find -P src", None, ("src",)),
        ("find -O3 src", None, ("src",)),
        ("find -H -L src -type f", None, ("src",)),
        ("find src", None, ("src",)),
        ("find a b c", None, ("a", "b", "c")),
        ("find src \\( -name '*.py' -o -name '*.ts' \\)", None, ("*.py", "*.ts", "src")),
        ("find src ! -name x", None, ("src", "x")),
        ("find src \\)", None, ("src",)),
        ("find /w/src -name x", "/w", ("src", "x")),
        ("cd pkg && find src -name x", None, ("pkg/src", "x")),
        ("cd / && find w/src", "/w", ("src",)),
        ("find . -path './src/*.ts'", None, (".", "src/*.ts")),
        ("find /w -path '/w/src/*'", "/w", (".", "src/*")),
        ("find . -name 'x...'", None, (".", "x...")),
        ("find . -name '...' -print", None, (".", "...")),
        ("find -L", None, ()),
    ],
)
def test_find_paths_are_its_start_points_and_name_patterns(
    command: str, cwd: str | None, paths: tuple[str, ...]
) -> None:
    """``find``'s start points (after -H/-L/-P/-O) and its -name/-path patterns are its paths."""
    proc = sh(command, cwd)
    assert (proc.operation, proc.paths) == ("list", paths)


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("time -p", ()),
        ("time -- -x a", ("-x",)),
        ("xargs - grep", ("-",)),
        ("time -p grep x a", ("grep",)),
        ("env -- grep x a", ("grep",)),
    ],
)
def test_wrapper_options_end_at_the_first_operand(command: str, programs: tuple[str, ...]) -> None:
    """A wrapper's options end at ``--``, ``-`` or the first word that is no option."""
    assert sh(command).programs == programs


def test_a_list_of_patterns_compares_by_words() -> None:
    """A grep tool's list of patterns is a list of word sequences; other values stay values."""
    a = procedure_of("grep_search", {"pattern": ["fooBar", "x_y"], "path": "src"})
    b = procedure_of("grep_search", {"pattern": ["foo.*bar", "x y"], "path": "./src"})
    c = procedure_of("grep_search", {"pattern": ["foo.*bar", "y x"], "path": "src"})
    assert a.key == b.key != c.key
    assert a.context == "foo bar | x y@src"
    ten = procedure_of("grep_search", {"pattern": 10.0})
    assert ten.key == procedure_of("grep_search", {"pattern": 10}).key
    assert ten.key != procedure_of("grep_search", {"pattern": 11}).key
