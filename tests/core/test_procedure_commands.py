"""Procedure canonicalisation pinned where mutation testing found it unpinned (PROTOCOL §3).

Each expectation is written out: the operation, the context, the paths, the programs, or which
commands are the same procedure and which are not. The working directory matters throughout:
an absolute path under ``cwd`` is the relative one, wherever the path stands (§3.2).
"""

from __future__ import annotations

from typing import Any

import pytest

from antiloop.core.procedure import Procedure, canonical_value, pattern_words, procedure_of

W = "/w"  # the working directory of the cwd cases


def sh(command: str, cwd: str | None = None) -> Procedure:
    """The procedure of a Bash call running ``command``."""
    return procedure_of("Bash", {"command": command}, cwd=cwd)


def seen(command: str, cwd: str | None = None) -> tuple[str, str, tuple[str, ...]]:
    """``(operation, context, paths)`` of a Bash call."""
    proc = sh(command, cwd)
    return proc.operation, proc.context, proc.paths


# --------------------------------------------------------------------------------------------
# Multi-line bodies and long texts
# --------------------------------------------------------------------------------------------


def test_a_multi_line_body_keeps_its_first_and_last_characters() -> None:
    """Only trailing spaces and blank lines around a body vanish, never a letter at its edge."""
    assert canonical_value("X\nY") == "X\nY"
    assert canonical_value("\nX  \nY\n\n") == "X\nY"


def test_a_long_multi_line_body_is_canonical_too() -> None:
    """A body beyond 16 KB loses its trailing spaces as a short one does."""
    body = "a  \n" * 5000
    assert canonical_value(body) == "\n".join(["a"] * 5000)
    long = procedure_of("Write", {"file_path": "a.py", "content": body})
    assert long.key == procedure_of("Write", {"file_path": "a.py", "content": "a\n" * 5000}).key
    assert long.key != procedure_of("Write", {"file_path": "a.py", "content": "a\n" * 4999}).key


def test_an_argument_of_201_characters_is_cut_in_the_context() -> None:
    """The context of a tool outside the table cuts strings longer than 200 characters."""
    proc = procedure_of("my_tool", {"b": "x" * 201})
    assert proc.context == '{"b":"' + "x" * 200 + '"}'


@pytest.mark.parametrize(
    ("command", "same"),
    [
        ("echo 'a  \nb'", "echo 'a\nb'"),
        ("cat 'a \t\nb'", "cat 'a\nb'"),
        ("A='x  \ny' make", "A='x\ny' make"),
        ("find . -name 'a  \nb'", "find . -name 'a\nb'"),
    ],
)
def test_a_multi_line_word_loses_its_trailing_spaces(command: str, same: str) -> None:
    """A quoted multi-line argument compares verbatim, trailing spaces aside (§3.2): as an
    argument, a wrapper's assignment or a ``find`` test."""
    assert sh(command).key == sh(same).key


@pytest.mark.parametrize(
    ("command", "other"),
    [
        ("A='x ' make", "A=x make"),
        ("find . -name 'a '", "find . -name a"),
        ("echo 'a '", "echo a"),
    ],
)
def test_a_one_line_word_keeps_its_trailing_spaces(command: str, other: str) -> None:
    """A quoted space at the end of a one-line word is part of the word."""
    assert sh(command).key != sh(other).key


def test_a_long_command_sees_the_working_directory() -> None:
    """A command too long for the cache (a big heredoc) still makes paths under cwd relative."""
    body = "x\n" * 5000
    long = sh(f"cat > /w/a.py <<EOF\n{body}EOF", W)
    assert (long.operation, long.context, long.paths) == ("edit", "a.py", ("a.py",))
    assert long.key == sh(f"cat > a.py <<EOF\n{body}EOF", W).key


# --------------------------------------------------------------------------------------------
# Search patterns
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "words"), [("-|-", "-|-"), ("(|)", "(|)")])
def test_a_pattern_of_syntax_only_is_one_word_even_with_a_bar(pattern: str, words: str) -> None:
    """A pattern without a letter or digit is itself, an alternation bar inside it too."""
    assert pattern_words(pattern) == words


# --------------------------------------------------------------------------------------------
# Wrappers and their options
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("npm exec", ()),
        ("pnpm dlx", ()),
        ("uv run", ()),
        ("A='a/b c' grep x a", ("grep",)),
        ("A=x/y=z grep x a", ("grep",)),
        ("A=a/b grep x a", ("grep",)),
        ("npm exec --package pkg jest", ("jest",)),
        ("npm exec --package=pkg jest", ("jest",)),
        ("pnpm dlx --package pkg jest", ("jest",)),
        ("npm exec --call x jest", ("jest",)),
        ("yarn dlx --call x jest", ("jest",)),
        ("python -u", ("python",)),
        ("python -c -m pytest", ("python",)),
        ("python - -m pytest", ("python",)),
    ],
)
def test_wrappers_without_a_command_and_assignments_with_slashes(
    command: str, programs: tuple[str, ...]
) -> None:
    """A wrapper with nothing after it runs nothing; an assignment's value may hold ``/`` and
    ``=``; ``npm exec``'s long options take their value; after ``python -c``/``-`` the words are
    the script's, not python's options."""
    assert sh(command).programs == programs


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("env -X grep x a", ("grep",)),
        ("nice -X grep x a", ("grep",)),
        ("timeout -X 5 grep x a", ("grep",)),
        ("xargs -X grep x a", ("grep",)),
        ("npx -X jest", ("jest",)),
        ("npm exec -X jest", ("jest",)),
        ("uv run -X pytest", ("pytest",)),
    ],
)
def test_an_option_not_known_to_take_a_value_takes_none(
    command: str, programs: tuple[str, ...]
) -> None:
    """Only the options a wrapper is known to give a value (``timeout -s``, ``nice -n``…) take
    the next word; any other option is a flag, and the command starts right after it."""
    assert sh(command).programs == programs


# --------------------------------------------------------------------------------------------
# git's global options
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "git --git-dir .git grep foo",
        "git --work-tree . grep foo",
        "git --namespace n grep foo",
        "git -c core.quotepath=off grep foo",
        "git -C repo grep foo",
        "git -X grep foo",
    ],
)
def test_git_global_options_before_grep(command: str) -> None:
    """``git``'s value-taking global options (``-C``, ``-c``, ``--git-dir``, ``--work-tree``,
    ``--namespace``) are skipped with their value, any other with none: the subcommand is
    still ``grep``."""
    assert seen(command) == ("grep", "foo", ())


def test_git_global_options_before_apply() -> None:
    """``git --git-dir X apply P`` applies a patch: an edit of P."""
    assert seen("git --git-dir .git apply fix.diff") == ("edit", "fix.diff", ("fix.diff",))


@pytest.mark.parametrize("command", ["git", "git -C repo", "git --namespace n"])
def test_git_without_a_subcommand(command: str) -> None:
    """``git`` and its options alone run git: a plain command."""
    assert seen(command) == ("bash", command, ())


def test_git_grep_is_not_grep() -> None:
    """``git grep`` searches the index, ``grep`` the files: another procedure."""
    assert sh("git grep foo a").key != sh("grep foo a").key
    assert sh("git grep foo a").key != sh("/usr/bin/git grep foo a").key


# --------------------------------------------------------------------------------------------
# Paths under the working directory, and after a leading cd
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "same", "paths"),
    [
        ("grep -rn x /w/src", "grep -rn x src", ("src",)),
        ("grep --include=/w/src/*.py x .", "grep --include=src/*.py x .", (".", "src/*.py")),
        ("rg -g /w/src/*.py x", "rg -g src/*.py x", ("src/*.py",)),
        ("ls /w/src", "ls src", ("src",)),
        ("find /w/src -name x", "find src -name x", ("src", "x")),
        ("python /w/a.py", "python a.py", ("a.py",)),
        ("cat /w/a.py", "cat a.py", ("a.py",)),
        ("sed -n 1p /w/a.py", "sed -n 1p a.py", ("a.py",)),
        ("bash -c 'cat /w/a.py'", "cat a.py", ("a.py",)),
        ("cat <<< /w/a/b", "cat <<< a/b", ()),
    ],
)
def test_absolute_paths_under_cwd_are_relative_everywhere(
    command: str, same: str, paths: tuple[str, ...]
) -> None:
    """Operands, globs, ``find`` start points, other programs' path arguments, a ``bash -c``
    script and a here-string word: under cwd, ``/w/x`` is ``x`` (§3.2)."""
    proc = sh(command, W)
    assert proc.key == sh(same, W).key
    assert proc.paths == paths


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("cd / && grep x w/src", ("src",)),
        ("cd / && cat w/a.py", ("a.py",)),
        ("cd / && python w/a.py", ("a.py",)),
        ("cd sub && python a.py", ("sub/a.py",)),
        ("cd . && cd sub && cat a.py", ("sub/a.py",)),
    ],
)
def test_paths_after_a_leading_cd(command: str, paths: tuple[str, ...]) -> None:
    """A leading ``cd`` bases the paths after it, for every kind of program, and the result is
    made relative to cwd again; a ``cd .`` before another ``cd`` is skipped, not an end."""
    assert sh(command, W).paths == paths


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("cd a && cd b && ls", "cd c && cd b && ls"),
        ("cd a && ls", "CD a && ls"),
        ("cd a && ls", "XXcdXX a && ls"),
    ],
)
def test_every_leading_cd_is_part_of_the_procedure(a: str, b: str) -> None:
    """Each ``cd`` of a leading chain counts, and only ``cd`` itself is one (not another
    program written alike)."""
    assert sh(a).key != sh(b).key


@pytest.mark.parametrize(
    ("command", "context"),
    [("cd src;", "cd src"), ("cd src &&", "cd src &&"), ("cd a && cd b &&", "cd a && cd b &&")],
)
def test_a_cd_with_nothing_after_it_is_a_command(command: str, context: str) -> None:
    """A last ``cd`` (``cd src;``, an unfinished ``cd src &&``) is the command ``cd`` itself,
    not the prefix of a command that is not there."""
    proc = sh(command)
    assert (proc.operation, proc.context) == ("bash", context)
    assert (proc.programs, proc.parts) == (("cd",), (("cd", "bash"),))


# --------------------------------------------------------------------------------------------
# Programs by their spec: grep flags, sed, patch, find, operands
# --------------------------------------------------------------------------------------------


def test_a_digit_bundle_splits_like_any_other() -> None:
    """``-5n`` is ``-5 -n`` (a context count and line numbers); ``-5`` reads as written."""
    assert sh("grep -5n x a").key == sh("grep -n -5 x a").key
    assert sh("grep -5n x a").key != sh("grep -55n x a").key
    assert seen("grep -5") == ("grep", "grep -5", ())


@pytest.mark.parametrize(
    ("command", "operation", "paths"),
    [
        ("sed --expression s/a/b/ a.py", "bash", ("a.py",)),
        ("sed --expression=s/a/b/ a.py", "bash", ("a.py",)),
        ("sed -f fix.sed a.py", "bash", ("a.py",)),
        ("sed --file fix.sed a.py", "bash", ("a.py",)),
        ("sed --in-place s/a/b/ a.py", "edit", ("a.py",)),
        ("sed --silent 1p a.py", "read", ("a.py",)),
        ("sed s/a/b/ README", "bash", ()),
        ("sed p", "bash", ()),
        ("patch a.py -i fix.diff", "edit", ("a.py", "fix.diff")),
        ("patch --input fix.diff", "edit", ("fix.diff",)),
        ("patch --input=fix.diff", "edit", ("fix.diff",)),
        ("cat - a.py", "read", ("a.py",)),
        ("find . -newer ref.txt", "list", (".",)),
        ("gcc -Iinclude/x -c a.c", "bash", ("a.c",)),
    ],
)
def test_sed_patch_find_and_operands(command: str, operation: str, paths: tuple[str, ...]) -> None:
    """sed's script is its first operand unless ``-e``/``-f`` (or their long forms) give it;
    ``--in-place`` edits and ``--silent`` reads; a plain command's operand is a path only when
    it looks like one; ``patch --input`` names the patch; ``-`` (standard input) is no path;
    only ``find``'s start points are its paths; an option (``-Iinclude/x``) is no path."""
    proc = sh(command)
    assert (proc.operation, proc.paths) == (operation, paths)


@pytest.mark.parametrize(
    ("a", "b", "cwd"),
    [
        ("sed s/a/b/ ./a.py", "sed s/a/b/ a.py", None),
        ("cat a.py ./b.py", "cat a.py b.py", None),
    ],
)
def test_operands_after_the_first_are_canonical(a: str, b: str, cwd: str | None) -> None:
    """Every operand is a canonical path, wherever it stands."""
    assert sh(a, cwd).key == sh(b, cwd).key


def test_a_sed_script_is_kept_as_written() -> None:
    """sed's script is no path, even one that reads like a path under cwd (``/w/d`` deletes
    the lines holding ``w``)."""
    assert sh("sed /w/d f.txt", W).key != sh("sed d f.txt", W).key


def test_a_flag_without_its_value_sorts_first() -> None:
    """Flags sort by name, then value; a value-taking flag left without one (at the end) sorts
    before its valued copies, and never breaks the sort."""
    assert seen("ls -I A -I") == ("list", "ls -I -I A", ())
    assert seen("grep -e foo -e") == ("grep", "foo", ())


def test_the_operand_pattern_comes_first() -> None:
    """The first operand is the first pattern, before the patterns given by flags."""
    assert seen("grep --match=foo bar a") == ("grep", "bar | foo@a", ("a",))


@pytest.mark.parametrize(
    ("command", "context"),
    [
        ("make 2>&1 | grep -e Error", "make 2>&1 | grep -e error"),
        ("make | grep --exclude=X.log -e error", "make | grep --exclude=X.log -e error"),
    ],
)
def test_a_search_inside_a_build_reads_as_its_words(command: str, context: str) -> None:
    """A chain's context shows a pattern flag's words, and other flag values as written."""
    assert seen(command) == ("build", context, ())


# --------------------------------------------------------------------------------------------
# Redirections, quoting in contexts, parts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "cwd", "operation", "context", "paths"),
    [
        ("cat <&3", None, "read", "cat <&3", ()),
        ("cat <&-", None, "read", "cat <&-", ()),
        ("echo x 2>&1 > out.txt", None, "edit", "out.txt", ("out.txt",)),
        ("cat <<< x > out.txt", None, "edit", "out.txt", ("out.txt",)),
        ("echo x > /dev/null", "/", "bash", "echo x > /dev/null", ()),
        ("echo x > /dev/null", "/dev", "bash", "echo x > /dev/null", ()),
        ("cat <<EOF\nx\nEOF", None, "read", "cat <<EOF", ()),
        ("cat <<'EOF'\nx\nEOF", None, "read", "cat <<EOF", ()),
        ('echo "it\'s"', None, "bash", "echo 'it'\\''s'", ()),
    ],
)
def test_redirections_and_quoting_in_contexts(
    command: str, cwd: str | None, operation: str, context: str, paths: tuple[str, ...]
) -> None:
    """A duplicated or closed input is no file; a redirection after a duplication or a
    here-string still counts; ``/dev/null`` edits nothing whatever the cwd; a heredoc shows as
    ``<<EOF``; a quote inside a word is escaped in the context."""
    assert seen(command, cwd) == (operation, context, paths)


def test_a_command_without_a_program_is_an_empty_part() -> None:
    """An assignment alone runs no program: its part has the program ``""``."""
    proc = sh("A=1")
    assert (proc.programs, proc.parts) == ((), (("", "bash"),))


# --------------------------------------------------------------------------------------------
# Shell scripts and quoting
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "operation", "context", "paths"),
    [
        ("bash -e", "bash", "bash -e", ()),
        ("bash +O extglob -c 'cat a.py'", "read", "a.py", ("a.py",)),
        ("bash -c 'cat a.py';", "read", "a.py", ("a.py",)),
    ],
)
def test_shell_options_before_the_script(
    command: str, operation: str, context: str, paths: tuple[str, ...]
) -> None:
    """A shell with options and no ``-c`` runs itself; ``+O`` takes a value as ``-O`` does; a
    lone ``bash -c …;`` is looked into."""
    assert seen(command) == (operation, context, paths)


@pytest.mark.parametrize(
    ("command", "parsed"),
    [
        ("echo 'a' 'b c", "echo a 'b c'"),
        ("echo it's", "echo its"),
    ],
)
def test_an_unclosed_quote_compares_verbatim(command: str, parsed: str) -> None:
    """A quote left open: bash refuses the command, so it compares as written (v1.2)."""
    assert sh(command).key != sh(parsed).key
    assert sh(command).key == sh(command + "  ").key
    assert sh(command).key != sh(command.replace(" ", "  ", 1)).key


# --------------------------------------------------------------------------------------------
# Tools with JSON arguments, step paths and the cache
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "paths", "operation", "context", "step_paths"),
    [
        ("Read", {"file_path": ["/w/a.py"]}, (), "read", "a.py", ("a.py",)),
        ("Read", {"file_path": "a.py"}, ("/w/b.py",), "read", "a.py b.py", ("a.py", "b.py")),
        ("Read", {"file_path": "/w/a.py"}, (["x"],), "read", "a.py", ("a.py",)),
        ("Bash", {"file_path": "/w/a.py"}, (), "bash", '{"file_path":"a.py"}', ("a.py",)),
        ("Bash", {"command": "make"}, ("/w/a.c",), "build", "make", ("a.c",)),
    ],
)
def test_json_arguments_and_step_paths_see_the_working_directory(
    tool: str,
    args: dict[str, Any],
    paths: tuple[Any, ...],
    operation: str,
    context: str,
    step_paths: tuple[str, ...],
) -> None:
    """A list of paths, a step path, a call the cache cannot hold (a list argument, a step
    path that is no string) and a shell tool without a command: under cwd, ``/w/x`` is ``x``."""
    proc = procedure_of(tool, args, paths, W)
    assert (proc.operation, proc.context, proc.paths) == (operation, context, step_paths)


def test_commentary_is_left_out_wherever_it_stands() -> None:
    """The agent's commentary (``thought``…) is no parameter, first or last, for a table tool
    and for a shell tool without a command."""
    first = procedure_of("Read", {"thought": "t", "file_path": "a.py"})
    assert (first.context, first.paths) == ("a.py", ("a.py",))
    assert first.key == procedure_of("Read", {"file_path": "a.py"}).key
    bare = procedure_of("Bash", {"foo": "bar", "thought": "t"})
    assert bare.context == '{"foo":"bar"}'
    assert bare.key == procedure_of("Bash", {"foo": "bar"}).key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"command": "cat a.py", "timeout": 5}, {"command": "cat b.py", "timeout": 5}),
        ({"command": "echo 'a b'", "timeout": 5}, {"command": "echo 'a c'", "timeout": 5}),
    ],
)
def test_a_shell_call_with_more_arguments_keeps_its_command(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    """Another argument beside the command adds to the parameters; the command still counts,
    words with spaces whole."""
    assert procedure_of("Bash", a).key != procedure_of("Bash", b).key


@pytest.mark.parametrize("tool", ["str_replace_editor", "str_replace_based_edit_tool"])
def test_an_editor_command_other_than_view_is_an_edit(tool: str) -> None:
    """``undo_edit`` carries no text, yet it edits: only ``view`` (or no command and no text)
    reads."""
    proc = procedure_of(tool, {"command": "undo_edit", "path": "a.py"})
    assert (proc.operation, proc.paths) == ("edit", ("a.py",))


def test_the_cache_never_merges_calls_that_differ() -> None:
    """``(1,)`` equals ``(True,)`` in Python, but ``[1]`` is not ``[true]`` in JSON."""
    one = procedure_of("my_tool", {"a": (1,)})
    true = procedure_of("my_tool", {"a": (True,)})
    assert (one.context, true.context) == ('{"a":[1]}', '{"a":[true]}')
    assert one.key != true.key


def test_a_full_cache_keeps_answering() -> None:
    """Past the cache's size, old calls make room: every call still gets its own answer."""
    for i in range(1100):
        assert procedure_of("Read", {"file_path": f"f{i}.py"}).paths == (f"f{i}.py",)
    assert procedure_of("Read", {"file_path": "f0.py"}).paths == ("f0.py",)


# --------------------------------------------------------------------------------------------
# Bugs found on the way (each test failed before its fix in canonical.py)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["ls -la \\\n", "ls -la \\\n "])
def test_a_trailing_backslash_newline_continues_the_line(command: str) -> None:
    """A backslash before a new line joins the lines (bash), even at the end of a command."""
    assert sh(command).key == sh("ls -la").key


def test_an_escaped_backslash_before_a_newline_is_a_backslash() -> None:
    """``echo \\\\`` then a new line prints one backslash: no line continuation there."""
    assert sh("echo \\\\\n").key == sh("echo '\\'").key != sh("echo").key


@pytest.mark.parametrize("target", ["~", "$HOME", "-"])
def test_a_cd_elsewhere_does_not_touch_the_cwd_files(target: str) -> None:
    """After a ``cd`` to a directory unknown here, ``a.py`` is not the cwd's ``a.py`` (§3.3:
    the files touched)."""
    assert "a.py" not in sh(f"cd {target} && cat a.py").paths


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("cd ~ && cat a.py", ("~/a.py",)),
        ("cd $HOME && cat a.py", ("$HOME/a.py",)),
        ("cd - && cat a.py", ("$OLDPWD/a.py",)),
        ("cd ~ && cd src && cat a.py", ("~/src/a.py",)),
    ],
)
def test_a_cd_elsewhere_names_the_files_from_there(command: str, paths: tuple[str, ...]) -> None:
    """The files after a ``cd`` to an unknown directory are named from it (``cd -`` is
    ``cd "$OLDPWD"``)."""
    assert sh(command, cwd="/w").paths == paths


@pytest.mark.parametrize("first", ["cd src", "cd ~"])
def test_an_absolute_path_after_a_cd_is_still_the_cwd_file(first: str) -> None:
    """An absolute path names one file wherever a leading ``cd`` went."""
    assert sh(f"{first} && cat /w/a.py", cwd="/w").paths == ("a.py",)
