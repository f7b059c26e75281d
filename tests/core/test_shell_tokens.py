"""The shell tokenizer reads words, separators and redirections as bash does (core.shell.tokens).

Each expectation is written out; the words of commands without expansions are also checked
against bash itself (``printf '%s\\0' WORDS`` prints the words bash made). Substitutions
(``$(..)``, ``${..}``, backticks) are kept whole, unexpanded, as one piece of their word.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from tests.conftest import missing

from antiloop.core.shell.tokens import commands, tokenize


def words(text: str) -> list[list[str]]:
    """The words of each simple command of ``text``."""
    return [c.words for c in commands(tokenize(text))]


def flat(text: str) -> list[str]:
    """Every word of ``text``, in order."""
    return [w for c in commands(tokenize(text)) for w in c.words]


def seps(text: str) -> list[str]:
    """The separator after each simple command of ``text``."""
    return [c.sep for c in commands(tokenize(text))]


def redirs(text: str) -> list[list[tuple[str, str, bool, bool]]]:
    """(operator, target or body, heredoc, quoted delimiter) of each command's redirections."""
    return [
        [(r.op, r.target, r.heredoc, r.quoted) for r in c.redirs] for c in commands(tokenize(text))
    ]


# Words bash makes the same way: (text, words).
BASH_WORDS = [
    ("a b\tc", ["a", "b", "c"]),
    ("Xa bX", ["Xa", "bX"]),
    ("a\\ b c", ["a b", "c"]),
    ("a\\bc", ["abc"]),
    ("a\\b", ["ab"]),
    ("x \\$y", ["x", "$y"]),
    ("a\\\nb", ["ab"]),
    ("a \\\nbc", ["a", "bc"]),
    ("\\\nab", ["ab"]),
    ("'a b'c\"d e\"", ["a bcd e"]),
    ("a'b'\"c\"\\d$'e'", ["abcde"]),
    ("'' x", ["", "x"]),
    ('"" x', ["", "x"]),
    ("a''b", ["ab"]),
    ("'a\\b' c", ["a\\b", "c"]),
    ('"a\\"b" "a\\\\b" "a\\$b" "a\\`b"', ['a"b', "a\\b", "a$b", "a`b"]),
    ('"a\\qb" c', ["a\\qb", "c"]),
    ('"a\\Xb" c', ["a\\Xb", "c"]),
    ('"a\\\nb" c', ["ab", "c"]),
    ('"a"b c', ["ab", "c"]),
    ('"ab"c', ["abc"]),
    ('"it\'s" x', ["it's", "x"]),
    ("'say \"hi\"' x", ['say "hi"', "x"]),
    ("$'a\\nb' $'\\t' $'\\'' $'\\\\' $'\\\"'", ["a\nb", "\t", "'", "\\", '"']),
    ("$'\\a\\b\\e\\E\\f\\v\\r'", ["\a\b\x1b\x1b\f\v\r"]),
    ("$'\\q' $'a\\qz'", ["\\q", "a\\qz"]),
    ("$'a b'c d", ["a bc", "d"]),
    ("$'ab'c", ["abc"]),
    ("$'\\tx'", ["\tx"]),
    ("$'a\\x41' $'\\x4a\\x4B' $'\\x7'", ["aA", "JK", "\x07"]),
    ("$'\\101\\60\\0618'", ["A018"]),
    ("$'\\u00e9\\u263A' $'\\U0001F600'", ["\u00e9\u263a", "\U0001f600"]),
    ("$'\\cA\\ca\\c['", ["\x01\x01\x1b"]),
    ("$'\\?'", ["?"]),
    ("$'a101' $'x41'", ["a101", "x41"]),
    ("$'\\c' x", ["\\c", "x"]),
    ("$'\\UFFFFFFFF'x", ["x"]),
    ("$'\\U0010FFFF'", ["\U0010ffff"]),
    ("$'\\x' $'\\u' $'\\U'", ["\\x", "\\u", "\\U"]),
    ("$'\\1010' $'\\x414' $'\\u00411' $'\\U000000411'", ["A0", "A4", "A1", "A1"]),
    ("a$ b", ["a$", "b"]),
    ("a $ b", ["a", "$", "b"]),
    ('"$" "a$"', ["$", "a$"]),
    ("a#b c", ["a#b", "c"]),
    ("a #b c", ["a"]),
    ("a\\", ["a\\"]),
    ("a \\", ["a", "\\"]),
]


@pytest.mark.parametrize(("text", "expected"), BASH_WORDS)
def test_words_are_bash_words(text: str, expected: list[str]) -> None:
    """Quotes and escapes are removed as bash removes them; blanks outside quotes split words."""
    assert flat(text) == expected


@pytest.mark.parametrize(("text", "expected"), BASH_WORDS)
def test_the_expected_words_are_what_bash_makes(text: str, expected: list[str]) -> None:
    """The expectations above are bash's own words (bash prints each word it made)."""
    bash = shutil.which("bash")
    if bash is None:
        missing("bash is not on PATH")
    out = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", "printf '%s\\0' " + text],
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    ).stdout
    assert out.decode().split("\0")[:-1] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("echo $(a b) c", ["echo", "$(a b)", "c"]),
        ("echo x$(a $(b c) d)y z", ["echo", "x$(a $(b c) d)y", "z"]),
        ("echo $(a \\)) c", ["echo", "$(a \\))", "c"]),
        ("echo $(a ')') c", ["echo", "$(a ')')", "c"]),
        ("echo $(a '' ')') c", ["echo", "$(a '' ')')", "c"]),
        ("echo $(a ')') 'b c'", ["echo", "$(a ')')", "b c"]),
        ('echo $(a ")" "\\")") c', ["echo", '$(a ")" "\\")")', "c"]),
        ('echo $(x "\\"") ")"', ["echo", '$(x "\\"")', ")"]),
        ('echo $(a "x\\\\") c', ["echo", '$(a "x\\\\")', "c"]),
        ("'x'$(a) b", ["x$(a)", "b"]),
        ("echo $(a) b", ["echo", "$(a)", "b"]),
        ("echo ${x} y", ["echo", "${x}", "y"]),
        ("echo ${x:-a b} c", ["echo", "${x:-a b}", "c"]),
        ("echo ${x:-{a} b}c d", ["echo", "${x:-{a} b}c", "d"]),
        ("echo ${x:-)} y", ["echo", "${x:-)}", "y"]),
        ("echo $(a }) y", ["echo", "$(a })", "y"]),
        ("echo $((1 + (2 * 3))) x", ["echo", "$((1 + (2 * 3)))", "x"]),
        ("echo $x$y z", ["echo", "$x$y", "z"]),
        ("echo $X y", ["echo", "$X", "y"]),
        ("echo `a b` c", ["echo", "`a b`", "c"]),
        ("echo x`a`y z", ["echo", "x`a`y", "z"]),
        ("echo a``b c", ["echo", "a``b", "c"]),
        ("echo `abc` d", ["echo", "`abc`", "d"]),
        ("echo `a \\` b` c", ["echo", "`a \\` b`", "c"]),
        ("echo `\\`` x", ["echo", "`\\``", "x"]),
        ("echo `a\\\\` x", ["echo", "`a\\\\`", "x"]),
        ('echo "x $(a ")" b) y" z', ["echo", 'x $(a ")" b) y', "z"]),
        ('echo "$(a)" b', ["echo", "$(a)", "b"]),
        ('echo "a $b" c', ["echo", "a $b", "c"]),
        ('echo "x `a "b" c` y" z', ["echo", 'x `a "b" c` y', "z"]),
        ('echo "`a`b" c', ["echo", "`a`b", "c"]),
    ],
)
def test_substitutions_stay_whole(text: str, expected: list[str]) -> None:
    """``$(..)``, ``${..}`` and backticks are one piece of a word, nested groups and quotes too."""
    assert flat(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("echo 'a b", ["echo", "a b"]),
        ('echo "a b', ["echo", "a b"]),
        ('echo "a\\', ["echo", "a\\"]),
        ('echo "a\\"', ["echo", 'a"']),
        ("echo $'a b", ["echo", "a b"]),
        ("echo $'a\\n", ["echo", "a\n"]),
        ("echo $'a\\", ["echo", "a\\"]),
        ("echo $(a b", ["echo", "$(a b"]),
        ("echo $(a 'b) c", ["echo", "$(a 'b) c"]),
        ('echo $(a "b) c', ["echo", '$(a "b) c']),
        ("echo $(a \\", ["echo", "$(a \\"]),
        ("echo ${a b", ["echo", "${a b"]),
        ("echo $(", ["echo", "$("]),
        ("echo `a b", ["echo", "`a b"]),
        ("echo `a \\", ["echo", "`a \\"]),
        ('echo "`a b', ["echo", "`a b"]),
    ],
)
def test_an_unterminated_quote_or_group_runs_to_the_end(text: str, expected: list[str]) -> None:
    """What bash would refuse as unfinished takes the rest of the command as its text."""
    assert flat(text) == expected


def test_a_code_past_the_last_unicode_character_is_dropped() -> None:
    """``$'\\U00110000'`` names no character (bash writes bytes no UTF-8 decoder takes)."""
    assert flat("$'\\U00110000x' $'\\U7FFFFFFF'y") == ["x", "y"]


def test_blanks_bash_keeps_in_a_word_separate_words_here() -> None:
    """A CR of a CRLF line end, a form feed, a vertical tab or a no-break space separates words."""
    assert flat("grep x a.py\r") == ["grep", "x", "a.py"]
    assert flat("a\fb\vc\u00a0d") == ["a", "b", "c", "d"]
    assert flat("a\f 2>f") == ["a"]


@pytest.mark.parametrize(
    ("text", "expected_words", "expected_seps"),
    [
        (
            "a && b || c ; d & e | f |& g",
            [["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"]],
            ["&&", "||", ";", "&", "|", "|&", ""],
        ),
        ("a&&b||c;d", [["a"], ["b"], ["c"], ["d"]], ["&&", "||", ";", ""]),
        ("a;;b", [["a"], ["b"]], [";;", ""]),
        ("(a) && b", [["a"], ["b"]], ["&&", ""]),
        ("(a; b) | c", [["a"], ["b"], ["c"]], [";", "|", ""]),
        ("a; (b) && c", [["a"], ["b"], ["c"]], [";", "&&", ""]),
        ("a\nb", [["a"], ["b"]], [";", ""]),
        ("a\n\n b\n", [["a"], ["b"]], [";", ""]),
        ("a &&\nb", [["a"], ["b"]], ["&&", ""]),
        ("a\n&& b", [["a"], ["b"]], ["&&", ""]),
        ("a; b; c\n&& d", [["a"], ["b"], ["c"], ["d"]], [";", ";", "&&", ""]),
        ("a; b;", [["a"], ["b"]], [";", ""]),
        ("a; b; c;", [["a"], ["b"], ["c"]], [";", ";", ""]),
        ("a &", [["a"]], ["&"]),
        ("; a", [["a"]], [""]),
        ("a # x && y\nb", [["a"], ["b"]], [";", ""]),
        ("# only a comment", [], []),
        ("a # x\nb\nc", [["a"], ["b"], ["c"]], [";", ";", ""]),
        ("a\nb # c\nd", [["a"], ["b"], ["d"]], [";", ";", ""]),
        ("a;# x\nb", [["a"], ["b"]], [";", ""]),
        ("ab cd", [["ab", "cd"]], [""]),
        ("a '&&' b", [["a", "&&", "b"]], [""]),
    ],
)
def test_separators_split_simple_commands(
    text: str, expected_words: list[list[str]], expected_seps: list[str]
) -> None:
    """Each simple command ends at an operator; a newline reads as ``;``; parentheses group."""
    assert (words(text), seps(text)) == (expected_words, expected_seps)


@pytest.mark.parametrize(
    ("text", "expected_words", "expected_redirs"),
    [
        ("a > f", ["a"], [(">", "f", False, False)]),
        ("a >f", ["a"], [(">", "f", False, False)]),
        ("a >  \tf x", ["a", "x"], [(">", "f", False, False)]),
        ("a >> f", ["a"], [(">>", "f", False, False)]),
        ("a >| f", ["a"], [(">|", "f", False, False)]),
        ("a &> f", ["a"], [("&>", "f", False, False)]),
        ("a &>> f", ["a"], [("&>>", "f", False, False)]),
        ("a <> f", ["a"], [("<>", "f", False, False)]),
        ("a < f", ["a"], [("<", "f", False, False)]),
        ("a <<< 'x y'", ["a"], [("<<<", "x y", False, False)]),
        ("a 2> f", ["a"], [("2>", "f", False, False)]),
        ("a 12>f", ["a"], [("12>", "f", False, False)]),
        ("a 2>&1", ["a"], [("2>&", "1", False, False)]),
        ("a 0<&3", ["a"], [("0<&", "3", False, False)]),
        ("a 2 > f", ["a", "2"], [(">", "f", False, False)]),
        ("a x2>f", ["a", "x2"], [(">", "f", False, False)]),
        ("a '2'>f", ["a", "2"], [(">", "f", False, False)]),
        ('a "2">f', ["a", "2"], [(">", "f", False, False)]),
        ("a $'2'>f", ["a", "2"], [(">", "f", False, False)]),
        ("echo fd >f", ["echo", "fd"], [(">", "f", False, False)]),
        ("echo 2", ["echo", "2"], []),
        ("> f a", ["a"], [(">", "f", False, False)]),
        ("a >f >g", ["a"], [(">", "f", False, False), (">", "g", False, False)]),
        ("a 2>f 3>g", ["a"], [("2>", "f", False, False), ("3>", "g", False, False)]),
        ("a > 'my file' b", ["a", "b"], [(">", "my file", False, False)]),
        ("a > Xf", ["a"], [(">", "Xf", False, False)]),
        ("a >$(b c) d", ["a", "d"], [(">", "$(b c)", False, False)]),
    ],
)
def test_redirections_keep_their_fd_and_target(
    text: str, expected_words: list[str], expected_redirs: list[tuple[str, str, bool, bool]]
) -> None:
    """A redirection takes the fd written just before it and the next word as its target."""
    assert (flat(text), redirs(text)) == (expected_words, [expected_redirs])


def test_a_redirection_belongs_to_its_own_command() -> None:
    """Each command of a chain keeps its own redirections."""
    assert redirs("a > f && b 2>/dev/null | c") == [
        [(">", "f", False, False)],
        [("2>", "/dev/null", False, False)],
        [],
    ]
    assert words("> f") == [[]]
    assert seps("> f; a") == [";", ""]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cat <<EOF\nl1\n  l2\nEOF\n", [("<<", "l1\n  l2", True, False)]),
        ("cat <<EOF\na\n\nb\nEOF", [("<<", "a\n\nb", True, False)]),
        ("cat <<EOF\n\tx\nEOF", [("<<", "\tx", True, False)]),
        ("cat <<'EOF'\nx $y\nEOF", [("<<", "x $y", True, True)]),
        ('cat <<"EOF"\nx\nEOF', [("<<", "x", True, True)]),
        ("cat <<E'O'F\nx\nEOF", [("<<", "x", True, True)]),
        ("cat <<\\EOF\nx\nEOF", [("<<", "x", True, False)]),
        ("cat <<$'EOF'\nx\nEOF", [("<<", "x", True, True)]),
        ("cat << EOF\nx\nEOF", [("<<", "x", True, False)]),
        ("cat <<-EOF\n\tl1\t\n\t\tl2\n\tEOF\n", [("<<-", "l1\t\nl2", True, False)]),
        ("cat <<-EOF\n  a\n\tEOF\n", [("<<-", "  a", True, False)]),
        ("cat <<-EOF\n\tXa\nEOF", [("<<-", "Xa", True, False)]),
        ("cat <<EOF\na\nb", [("<<", "a\nb", True, False)]),
        ("cat <<EOF\na\n", [("<<", "a", True, False)]),
        ("cat <<EOF\n a\nEOF \nEOF", [("<<", " a\nEOF ", True, False)]),
        ("cat <<A <<B\na\nA\nb\nB\n", [("<<", "a", True, False), ("<<", "b", True, False)]),
        ("cat 3<<EOF\nx\nEOF", [("3<<", "x", True, False)]),
    ],
)
def test_heredoc_bodies(text: str, expected: list[tuple[str, str, bool, bool]]) -> None:
    """A heredoc's body is the lines after its command up to the delimiter (``<<-``: tabs off)."""
    assert redirs(text)[0] == expected


def test_commands_after_a_heredoc_start_after_its_body() -> None:
    """The body is no command; the rest of its line and the lines after the delimiter are."""
    text = "cat <<EOF | grep x > out\nbody && not\nEOF\necho done"
    assert words(text) == [["cat"], ["grep", "x"], ["echo", "done"]]
    assert seps(text) == ["|", ";", ""]
    assert redirs(text) == [[("<<", "body && not", True, False)], [(">", "out", False, False)], []]
    assert words("cat <<A; cat <<B\n1\nA\n2\nB\nls") == [["cat"], ["cat"], ["ls"]]
    assert redirs("cat <<A; cat <<B\n1\nA\n2\nB\nls")[:2] == [
        [("<<", "1", True, False)],
        [("<<", "2", True, False)],
    ]
