"""The protocol v1.2 (docs/protocol.md), by the general rule behind each public case (p40-p44):
a shell's own line counter is volatile (4), the commands of agent-computer interfaces are
classified like programs (3.1), an editor's body and a command the shell cannot parse compare
verbatim (3.2).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antiloop import Guard
from antiloop.core.procedure import procedure_of
from antiloop.core.result import scrub
from antiloop.core.verdict import Action


def bash(command: str, output: str = "", **more: Any) -> dict[str, Any]:
    return {"tool": "bash", "args": {"command": command}, "output": output, **more}


def actions(*events: dict[str, Any]) -> list[Action]:
    guard = Guard()
    return [guard.record(e).action for e in events]


def key(command: str) -> str:
    return procedure_of("bash", {"command": command}).key


# -- 4: the line counter of a shell's own messages --------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "/bin/bash: line {}: cd..: command not found",  # bash -c, as agents' tools run it
        "bash: line {}: foo: command not found",
        "/usr/bin/bash: -c: line {}: syntax error: unexpected end of file",
        "/bin/sh: {}: cd..: not found",  # dash
        "sh: {}: pytest: not found",
        "zsh:{}: command not found: cd..",
        "ksh: line {}: foo: not found",
    ],
)
def test_a_shell_line_counter_makes_no_new_failure(message: str) -> None:
    """The same failing command, the counter moved on: the same result, a repeat at once."""
    first = bash("cd..", message.format(290) + "\n", exit_code=127)
    again = bash("cd..", message.format(303) + "\n", exit_code=127)
    assert actions(first, again) == [Action.CONTINUE, Action.STOP]
    assert "290" not in scrub(message.format(290))


@pytest.mark.parametrize(
    "line",
    [
        "./run.sh: line {}: foo: command not found",  # a script's own line: where it failed
        "src/app.py:{}: error: bad thing",
        "ssh: connect to host db port {}: Connection refused",
    ],
)
def test_other_numbers_before_a_colon_stay(line: str) -> None:
    """Only a shell's own counter is volatile: a script's line, a file's, a port stay."""
    assert scrub(line.format(12)) != scrub(line.format(13))


# -- 3.1: the commands of agent-computer interfaces --------------------------------------------


@pytest.mark.parametrize(
    ("command", "operation"),
    [
        ("open src/parse.py", "read"),
        ("open src/parse.py 120", "read"),
        ("goto 120", "read"),
        ("scroll_up", "read"),
        ("scroll_down", "read"),
        ("search_file 'def parse' src/parse.py", "grep"),
        ("search_dir SyntaxError src", "grep"),
        ("find_file parse.py src", "list"),
        ("create src/new.py", "edit"),
        ("edit 12:14\n    return x\nend_of_edit", "edit"),
        ("insert 5\nimport os\nend_of_insert", "edit"),
        ("str_replace_editor view /repo/src/parse.py", "read"),
        ("str_replace_editor str_replace /repo/a.py --old_str a --new_str b", "edit"),
    ],
)
def test_interface_commands_are_classified_like_programs(command: str, operation: str) -> None:
    assert procedure_of("bash", {"command": command}).operation == operation


def window(first: int, error_at: int | None = None) -> str:
    rows = [
        f"{n}:    except SyntaxError:" if n == error_at else f"{n}:    x = {n}"
        for n in range(first, first + 100)
    ]
    return "[File: /repo/src/parse.py (600 lines total)]\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize("viewer", ["scroll_down", "scroll_up", "goto 300", "open src/parse.py"])
def test_a_viewer_shows_file_contents_not_an_error_line(viewer: str) -> None:
    """Two windows holding the same error-looking source line are two results."""
    assert actions(bash(viewer, window(295, 354)), bash(viewer, window(346, 354))) == [
        Action.CONTINUE,
        Action.CONTINUE,
    ]


def test_the_same_window_twice_is_a_repeat_of_a_read() -> None:
    guard = Guard()
    guard.record(bash("goto 120", window(71)))
    verdict = guard.record(bash("goto 120", window(71)))
    assert verdict.action is Action.STOP
    assert verdict.fingerprint is not None
    assert verdict.fingerprint.startswith("AGENT::agent::read::")


# -- 3.2: an editor's body and an unparsable command compare verbatim ----------------------------


def test_an_editor_body_keeps_its_indentation_even_on_one_line() -> None:
    deep = "edit 553:553\n        return quantity\nend_of_edit"
    assert key(deep) != key(deep.replace("        ", "    "))
    assert key(deep) == key(deep.replace("quantity\n", "quantity   \n"))  # trailing spaces aside
    assert key(deep) != key(deep.replace("553:553", "553:554"))


@pytest.mark.parametrize(
    "command",
    [
        "python -c print(parse_one(1))",  # an unquoted parenthesis after a word
        "echo it's",  # a quote left open
        'grep -rn "unclosed src',
        "ls )",
    ],
)
def test_an_unparsable_command_compares_verbatim(command: str) -> None:
    assert key(command) != key(command.replace(" ", "  ", 1))
    assert key(command) == key(command + "   ")


@pytest.mark.parametrize(
    "command",
    [
        "arr=(1 2 3) && echo ok",  # an array assignment
        "f() { ls; }",  # a function definition
        "(cd src && ls) | head",  # a subshell
        "diff <(ls a) <(ls b)",  # process substitutions
        'case "$x" in a) ls ;; esac',  # a case pattern's lone ")"
        "for ((i=0; i<3; i++)); do echo $i; done",
        "if (true); then echo y; fi",
    ],
)
def test_parentheses_bash_accepts_keep_the_command_parsed(command: str) -> None:
    """Spacing between words does not matter: the words are known."""
    assert key(command) == key(command.replace(" ", "  "))


_MESSAGES = st.sampled_from(
    [
        *("/bin/bash: line ", "sh: ", "zsh:", "bash: -c: line ", "took ", "pid ", "at 0x7f"),
        *("", "\n", "/tmp/", "2025-11-", ":", "[1] ", "Nov ", " am"),
    ]
)
_TEXTS = st.lists(
    st.one_of(_MESSAGES, st.integers(0, 99999).map(str), st.sampled_from([": ", " ", "s", "ms"])),
    max_size=12,
).map("".join)


@given(_TEXTS)
def test_a_scrubbed_text_scrubbed_again_is_itself(text: str) -> None:
    assert scrub(scrub(text)) == scrub(text)


@given(st.text(alphabet="ab ()'\"=;|&$<>\n", max_size=24))
def test_a_command_reads_the_same_with_trailing_blanks(command: str) -> None:
    """Verbatim or parsed, trailing blanks never make another procedure."""
    assert key(command + "  ") == key(command)
