"""Procedure canonicalisation pinned at its edges (PROTOCOL §3.1-§3.2), through the public API.

Every expectation is written out: the operation, the context, the paths, or which commands are
the same procedure and which are not.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import pytest

from antiloop.core.procedure import Procedure, canonical_value, pattern_words, procedure_of


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
        ("x{2}", "x }"),
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
        ("nohup -X foo", ("foo",)),
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


@pytest.mark.parametrize(
    ("command", "programs"),
    [
        ("env -u HOME grep x a", ("grep",)),
        ("env -C /tmp grep x a", ("grep",)),
        ("env -S x grep x a", ("grep",)),
        ("env --unset HOME grep x a", ("grep",)),
        ("env --unset=HOME grep x a", ("grep",)),
        ("env --chdir /tmp grep x a", ("grep",)),
        ("env --split-string x grep x a", ("grep",)),
        ("env -i grep x a", ("grep",)),
        ("nice -n 5 grep x a", ("grep",)),
        ("nice --adjustment 5 grep x a", ("grep",)),
        ("nice -5 grep x a", ("grep",)),
        ("timeout -s KILL 5 grep x a", ("grep",)),
        ("timeout -k 1 5 grep x a", ("grep",)),
        ("timeout --signal KILL 5 grep x a", ("grep",)),
        ("timeout --kill-after 1 5 grep x a", ("grep",)),
        ("timeout --preserve-status 5 grep x a", ("grep",)),
        ("timeout 5", ()),
        ("xargs -I {} grep x a", ("grep",)),
        ("xargs -a f grep x a", ("grep",)),
        ("xargs -E x grep x a", ("grep",)),
        ("xargs -d x grep x a", ("grep",)),
        ("xargs -L 1 grep x a", ("grep",)),
        ("xargs -n 1 grep x a", ("grep",)),
        ("xargs -P 2 grep x a", ("grep",)),
        ("xargs -s 100 grep x a", ("grep",)),
        ("xargs -0 grep x a", ("grep",)),
        ("xargs --max-args 1 grep x a", ("grep",)),
        ("xargs --max-procs 2 grep x a", ("grep",)),
        ("xargs --delimiter x grep x a", ("grep",)),
        ("npx -p pkg jest", ("jest",)),
        ("npx -c x jest", ("jest",)),
        ("npx --package pkg jest", ("jest",)),
        ("npx --call x jest", ("jest",)),
        ("npx --yes jest", ("jest",)),
        ("bunx -p pkg jest", ("jest",)),
        ("npm exec -p pkg jest", ("jest",)),
        ("npm exec jest", ("jest",)),
        ("pnpm exec jest", ("jest",)),
        ("pnpm dlx jest", ("jest",)),
        ("yarn dlx jest", ("jest",)),
        ("npm dlx jest", ("npm",)),
        ("yarn exec jest", ("yarn",)),
        ("uv run -p 3.11 pytest", ("pytest",)),
        ("uv run --with x pytest", ("pytest",)),
        ("uv run --python 3.11 pytest", ("pytest",)),
        ("uv run --project p pytest", ("pytest",)),
        ("uv run --directory d pytest", ("pytest",)),
        ("uv run --extra e pytest", ("pytest",)),
        ("uv run --group g pytest", ("pytest",)),
        ("uv run --package p pytest", ("pytest",)),
        ("uv run --env-file f pytest", ("pytest",)),
        ("uv run --with-requirements r pytest", ("pytest",)),
        ("uv run --index i pytest", ("pytest",)),
        ("uv run --from f pytest", ("pytest",)),
        ("uv run --only-group g pytest", ("pytest",)),
        ("poetry run pytest", ("pytest",)),
        ("pipenv run pytest", ("pytest",)),
        ("pdm run pytest", ("pytest",)),
        ("hatch run pytest", ("pytest",)),
        ("uv pip install x", ("uv",)),
        ("python -X dev -W ignore -m pytest", ("pytest",)),
        ("python3.11 -m pytest", ("pytest",)),
        ("python3 -u -m pytest", ("pytest",)),
        ("python -c x", ("python",)),
        ("python - x", ("python",)),
        ("python -m", ("python",)),
        ("python x.py", ("python",)),
        ("time grep x a", ("grep",)),
        ("nohup grep x a", ("grep",)),
        ("command grep x a", ("grep",)),
        ("builtin grep x a", ("grep",)),
        ("exec grep x a", ("grep",)),
        ("/usr/bin/time -v grep x a", ("grep",)),
        ("if grep x a; then cat b; fi", ("grep", "cat")),
        ("while grep x a; do cat b; done", ("grep", "cat")),
        ("until grep x a; do cat b; done", ("grep", "cat")),
        ("! grep x a", ("grep",)),
        ("{ grep x a; }", ("grep",)),
        ("A=1 B=2 grep x a", ("grep",)),
        ("a/b=c grep x a", ("b=c",)),
        ("A=1", ()),
        ("elif grep x a; else cat b", ("grep", "cat")),
        ("sudo grep x a", ("sudo",)),
    ],
)
def test_wrappers_and_their_options_are_looked_through(
    command: str, programs: tuple[str, ...]
) -> None:
    """Each wrapper's value-taking options are skipped with their values (PROTOCOL §3.1)."""
    assert sh(command).programs == programs


@pytest.mark.parametrize(
    ("command", "operation"),
    [
        ("npm test", "test"),
        ("npm t", "test"),
        ("npm tst", "test"),
        ("yarn t", "bash"),
        ("npm run test", "test"),
        ("npm run-script test", "test"),
        ("npm run test:unit", "test"),
        ("npm test:e2e", "test"),
        ("npm run build", "build"),
        ("npm run build:prod", "build"),
        ("yarn build", "build"),
        ("pnpm run build", "build"),
        ("bun test", "test"),
        ("bun run build", "build"),
        ("npm run", "bash"),
        ("npm run lint", "bash"),
        ("npm install", "bash"),
        ("npm -s test", "test"),
        ("yarn --silent run test", "test"),
        ("go test ./...", "test"),
        ("go t", "test"),
        ("go build ./...", "build"),
        ("go b", "build"),
        ("go vet ./...", "bash"),
        ("cargo test", "test"),
        ("cargo t", "test"),
        ("cargo nextest run", "test"),
        ("cargo build", "build"),
        ("cargo b", "build"),
        ("dotnet test", "test"),
        ("dotnet build", "build"),
        ("deno test", "test"),
        ("deno build", "bash"),
        ("vite build", "build"),
        ("vite test", "bash"),
        ("vite b", "build"),
        ("go", "bash"),
        ("mvn test", "test"),
        ("mvn -q clean test", "test"),
        ("mvnw package", "build"),
        ("mvn install", "build"),
        ("mvn compile", "build"),
        ("mvn clean", "bash"),
        ("mvn verify", "bash"),
        ("gradle test", "test"),
        ("gradlew :app:test", "test"),
        ("gradle build", "build"),
        ("gradle assemble", "build"),
        ("gradle :app:build", "build"),
        ("gradle clean", "bash"),
        ("gradle", "bash"),
        ("make", "build"),
        ("gmake all", "build"),
        ("tsc -p .", "build"),
        ("webpack", "build"),
        ("pytest -x", "test"),
        ("py.test", "test"),
        ("tox", "test"),
        ("nox", "test"),
        ("ava", "test"),
        ("phpunit", "test"),
        ("ctest", "test"),
        ("rspec", "test"),
        ("mocha", "test"),
        ("vitest run", "test"),
        ("jest --watch", "test"),
        ("unittest", "test"),
        ("npx jest", "test"),
        ("make && npm test", "test"),
        ("npm test && make", "test"),
    ],
)
def test_runners_and_build_tools_by_subcommand(command: str, operation: str) -> None:
    """Test runners and build tools are named by their program or subcommand (PROTOCOL §3.1)."""
    assert sh(command).operation == operation


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("grep -rn x src", "grep -n -r x src/"),
        ("grep -A3 x a", "grep -A 3 x a"),
        ("grep --include=*.ts x .", "grep --include *.ts x ."),
        ("grep -e foo -e bar a", "grep -e bar -e foo a"),
        ("grep -- -x a", "grep -- -x ./a"),
        ("rg -g './src/*.ts' x", "rg -g 'src/*.ts' x"),
        ("ls -la src", "ls -al ./src"),
        ("ls -l -a", "ls -al"),
        ("grep --max-count 2 x a", "grep --max-count=2 x a"),
        ("grep -Ax x a", "grep -A x x a"),
    ],
)
def test_search_and_list_flags_commute_with_their_values(a: str, b: str) -> None:
    """Bundles split, flags sort, a value stays with its flag (PROTOCOL §3.2)."""
    assert sh(a).key == sh(b).key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("grep -rn x src", "grep -rn y src"),
        ("grep -A3 x a", "grep -A4 x a"),
        ("grep -A3 x a", "grep -3 x a"),
        ("grep -5 x a", "grep -55 x a"),
        ("grep -- -x a", "grep -x a"),
        ("grep -i x a", "grep x a"),
        ("fd -x rm {}", "fd -x rm -f {}"),
        ("grep - a", "grep a"),
        ("grep -e x a b", "grep -e x b a"),
        ("grep x a b", "grep x b a"),
        ("ls a b", "ls b a"),
        ("grep --color x a", "grep --colour x a"),
        ("grep --label=a x", "grep --label=b x"),
        ("grep -f p a", "grep -f q a"),
        ("grep x -- -a", "grep x -a"),
        ("grep -A", "grep -B"),
        ("grep --context", "grep --context x"),
    ],
)
def test_another_flag_value_or_operand_order_is_another_procedure(a: str, b: str) -> None:
    """No flag is ignored; a value, ``--`` or the order of operands makes another procedure."""
    assert sh(a).key != sh(b).key


@pytest.mark.parametrize(
    ("command", "operation", "context", "paths"),
    [
        ("grep -e foo -e barBaz src", "grep", "foo | bar baz@src", ("src",)),
        ("rg -e x -g '*.py' src", "grep", "x@src *.py", ("*.py", "src")),
        ("grep -e x a b", "grep", "x@a b", ("a", "b")),
        ("grep x - a", "grep", "x@a", ("a",)),
        ("grep -rn foo", "grep", "foo", ()),
        ("ag -g foo", "grep", "@foo", ("foo",)),
        ("ack -g foo", "grep", "@foo", ("foo",)),
        ("ack --match foo a", "grep", "foo@a", ("a",)),
        ("rg --files src", "grep", "@src", ("src",)),
        ("rg --type-list", "grep", "rg --type-list", ()),
        ("git grep -n foo -- src", "grep", "foo@src", ("src",)),
        ("git -C repo grep foo", "grep", "foo", ()),
        ("git apply p.diff", "edit", "p.diff", ("p.diff",)),
        ("git --git-dir x log", "bash", "git --git-dir x log", ()),
        ("fd -e py src", "list", "src", ("src",)),
        ("grep -A 2", "grep", "grep -A 2", ()),
        ("grep -A", "grep", "grep -A", ()),
        ("grep x a 2>&1", "grep", "x@a", ("a",)),
        ("egrep x a", "grep", "x@a", ("a",)),
        ("fgrep x a", "grep", "x@a", ("a",)),
        ("ack-grep x a", "grep", "x@a", ("a",)),
        ("tree -L 2 src", "list", "src", ("src",)),
        ("sed -n 1,5p a.py", "read", "a.py", ("a.py",)),
        ("sed -i s/a/b/ a.py", "edit", "a.py", ("a.py",)),
        ("sed s/a/b/ a.py", "bash", "sed s/a/b/ a.py", ("a.py",)),
        ("sed -e s/a/b/ a.py", "bash", "sed -e s/a/b/ a.py", ("a.py",)),
        ("sed --quiet 1p a.py", "read", "a.py", ("a.py",)),
        ("tee out.txt", "edit", "out.txt", ("out.txt",)),
        ("tee /dev/null", "bash", "tee /dev/null", ()),
        ("patch -p1 -i fix.diff", "edit", "fix.diff", ("fix.diff",)),
        ("patch < fix.diff", "edit", "fix.diff", ("fix.diff",)),
        ("head -n 5 a.py", "read", "a.py", ("a.py",)),
        ("tail -f log.txt", "read", "log.txt", ("log.txt",)),
        ("cat a.py b.py", "read", "a.py b.py", ("a.py", "b.py")),
        ("nl -ba a.py", "read", "a.py", ("a.py",)),
        ("fd -x rm {} ; ls", "list", "fd -x rm {}; ls", ()),
        ("fd --exec rm {}", "list", "fd --exec=rm {}", ()),
        ("grep --include='a b' x", "grep", "x@a b", ("a b",)),
    ],
)
def test_programs_read_their_arguments_by_their_spec(
    command: str, operation: str, context: str, paths: tuple[str, ...]
) -> None:
    """Patterns, globs, files and the operation of the search, list, read and edit programs."""
    proc = sh(command)
    assert (proc.operation, proc.context, proc.paths) == (operation, context, paths)


@pytest.mark.parametrize(
    ("command", "cwd", "operation", "context", "paths"),
    [
        ("echo x > out.txt", None, "edit", "out.txt", ("out.txt",)),
        ("echo x >> ./out.txt", None, "edit", "out.txt", ("out.txt",)),
        ("echo x > /dev/null", None, "bash", "echo x > /dev/null", ()),
        ("echo x 2>/dev/null", None, "bash", "echo x 2> /dev/null", ()),
        ("cat < in.txt", None, "read", "in.txt", ("in.txt",)),
        ("cat 0< in.txt", None, "read", "in.txt", ("in.txt",)),
        ("grep x < in.txt > out.txt", None, "edit", "in.txt out.txt", ("in.txt", "out.txt")),
        ("grep x > out.txt < in.txt", None, "edit", "in.txt out.txt", ("in.txt", "out.txt")),
        ("echo x >&2", None, "bash", "echo x >&2", ()),
        ("echo x 2>&1", None, "bash", "echo x 2>&1", ()),
        ("echo x >& out.log", None, "edit", "out.log", ("out.log",)),
        ("echo x &> all.log", None, "edit", "all.log", ("all.log",)),
        ("echo x <> rw.txt", None, "edit", "rw.txt", ("rw.txt",)),
        ("echo x >| f.txt", None, "edit", "f.txt", ("f.txt",)),
        ("cat <<< 'a b'", None, "read", "cat <<< 'a b'", ()),
        ("cat <<< ./a/b", None, "read", "cat <<< ./a/b", ()),
        ("cat > /w/src/a.py", "/w", "edit", "src/a.py", ("src/a.py",)),
        ("cd src && cat > a.py", None, "edit", "src/a.py", ("src/a.py",)),
        ("cd src && echo x > /tmp/a.py", None, "edit", "/tmp/a.py", ("/tmp/a.py",)),
        ("cd src && echo x > ~/a.py", None, "edit", "~/a.py", ("~/a.py",)),
        ("echo x 3>&-", None, "bash", "echo x 3>&-", ()),
        ("cat <<EOF > a.py\nx  \nEOF", None, "edit", "a.py", ("a.py",)),
        ("cat <<'EOF' > a.py\nx\nEOF", None, "edit", "a.py", ("a.py",)),
        ("cd src", None, "bash", "cd src", ()),
        ("cd src && ls", None, "list", "cd src && ls", ()),
        ("cd src; ls", None, "list", "cd src ; ls", ()),
        ("cd && ls", None, "list", "cd ~ && ls", ()),
        ("cd ~ && ls", None, "list", "cd ~ && ls", ()),
        ("cd $HOME && ls", None, "list", "cd '$HOME' && ls", ()),
        ("cd - && ls", None, "list", "cd - && ls", ()),
        ("cd . && ls", None, "list", "ls", ()),
        ("cd a && cd b && ls x/y.py", None, "list", "a/b/x/y.py", ("a/b/x/y.py",)),
        ("cd a || ls", None, "list", "cd a || ls", ()),
        ("cd a b && ls", None, "list", "cd a b && ls", ()),
        ("cd /w && ls", "/w", "list", "ls", ()),
        ("cd /w/src && cat a.py", "/w", "read", "src/a.py", ("src/a.py",)),
        ("cd src > log && ls", None, "edit", "log", ("log",)),
        ("bash -c 'grep x a'", None, "grep", "x@a", ("a",)),
        ("bash -lc 'grep x a'", None, "grep", "x@a", ("a",)),
        ("sh -c 'cat a.py'", None, "read", "a.py", ("a.py",)),
        ("bash -o pipefail -c 'cat a.py'", None, "read", "a.py", ("a.py",)),
        ("bash -c", None, "bash", "bash -c", ()),
        ("bash x.sh", None, "bash", "bash x.sh", ("x.sh",)),
        ("bash --norc -c 'cat a'", None, "bash", "bash --norc -c 'cat a'", ()),
        ("bash -e -c 'cat a'", None, "read", "a", ("a",)),
        ("zsh -c 'cat a'", None, "read", "a", ("a",)),
        ("/bin/bash -c 'cat a'", None, "read", "a", ("a",)),
        ("bash -c 'cat a' > log", None, "edit", "log", ("log",)),
        ("bash -c 'cat a' && ls", None, "list", "bash -c 'cat a' && ls", ()),
        ("bash +o x -c 'cat a'", None, "read", "a", ("a",)),
        ("bash -O extglob -c 'cat a'", None, "read", "a", ("a",)),
        ("dash -c 'cat a'", None, "read", "a", ("a",)),
        ("ksh -c 'cat a'", None, "read", "a", ("a",)),
        ("ls | wc -l", None, "list", "ls | wc -l", ()),
        ("grep x a; cat b", None, "grep", "x@a b", ("a", "b")),
        ("cat a & cat b", None, "read", "a b", ("a", "b")),
        ("printf x\\ ", None, "bash", "printf 'x '", ()),
        ("printf \\", None, "bash", "printf '\\'", ()),
        ("  grep x a  ", None, "grep", "x@a", ("a",)),
        ("echo 'a\nb'   ", None, "bash", "echo 'a\nb'", ()),
    ],
)
def test_redirections_leading_cds_and_shell_scripts(
    command: str, cwd: str | None, operation: str, context: str, paths: tuple[str, ...]
) -> None:
    """A file written to is an edit, a leading ``cd`` bases paths, ``bash -c`` is looked into."""
    proc = sh(command, cwd)
    assert (proc.operation, proc.context, proc.paths) == (operation, context, paths)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("grep x a > out", "grep x a >out"),
        ("grep x < in > out", "grep x > out < in"),
        ("cat <<EOF > a.py\nx  \nEOF", "cat > a.py <<EOF\nx\nEOF"),
        ("bash -c 'grep x a'", "grep x a"),
        ("bash -lc 'grep x a'", "sh -c 'grep  x  a'"),
        ("cd . && grep x a", "grep x a"),
        ("cd /w && grep x a", "cd . && grep x a"),
        ("  grep x a  ", "grep x a"),
        ("echo 2>&1 x", "echo x 2>&1"),
    ],
)
def test_the_same_shell_procedure_written_otherwise(a: str, b: str) -> None:
    """Spacing, the order of input and output redirections and a no-op ``cd`` change nothing."""
    assert sh(a, "/w").key == sh(b, "/w").key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("grep x a > out", "grep x a >> out"),
        ("grep x a > out", "grep x a 2> out"),
        ("grep x a 2>&1", "grep x a 1>&2"),
        ("cat <<EOF\nx\nEOF", "cat <<'EOF'\nx\nEOF"),
        ("cat <<EOF\nx\nEOF", "cat <<EOF\n  x\nEOF"),
        ("cat <<EOF\nx\nEOF", "cat <<-EOF\nx\nEOF"),
        ("cat <<< a", "cat <<< b"),
        ("cd a && ls", "cd b && ls"),
        ("cd a && ls", "cd a; ls"),
        ("cd a && ls", "ls"),
        ("bash -c 'grep x a' > log", "grep x a > log"),
        ("grep x a; cat b", "grep x a && cat b"),
        ("grep x a | cat", "grep x a || cat"),
    ],
)
def test_another_redirection_cd_or_separator_is_another_procedure(a: str, b: str) -> None:
    """The redirection operator and fd, a heredoc's text and quoting, a ``cd`` target and the
    separators of a chain are all part of the procedure."""
    assert sh(a, "/w").key != sh(b, "/w").key


@pytest.mark.parametrize(
    ("tool", "args", "paths", "cwd", "operation", "context", "step_paths"),
    [
        ("Read", {"file_path": "/w/src/a.py"}, (), "/w", "read", "src/a.py", ("src/a.py",)),
        (
            "Read",
            {"file_path": ["a.py", "./b.py"]},
            (),
            None,
            "read",
            "a.py b.py",
            ("a.py", "b.py"),
        ),
        (
            "Read",
            {"file_path": "https://x.org/a"},
            (),
            None,
            "read",
            '{"file_path":"https://x.org/a"}',
            (),
        ),
        ("Read", {"file_path": " a.py "}, (), None, "read", "a.py", ("a.py",)),
        ("Read", {"file_path": 3}, (), None, "read", '{"file_path":3}', ()),
        (
            "Read",
            {"file_path": "a.py"},
            ("b.py", "./c.py"),
            None,
            "read",
            "a.py b.py c.py",
            ("a.py", "b.py", "c.py"),
        ),
        ("Read", {"file_path": "a.py"}, ("https://x",), None, "read", "a.py", ("a.py",)),
        (
            "Grep",
            {"pattern": "fooBar", "path": "src", "glob": "*.ts"},
            (),
            None,
            "grep",
            "foo bar@src *.ts",
            ("*.ts", "src"),
        ),
        (
            "Grep",
            {"pattern": "fooBar", "include": "./src/*.ts"},
            (),
            None,
            "grep",
            "foo bar@src/*.ts",
            ("src/*.ts",),
        ),
        ("Grep", {"pattern": "x"}, (), None, "grep", "x", ()),
        ("Grep", {"path": "src"}, (), None, "grep", "@src", ("src",)),
        ("Grep", {"q": "a_b"}, (), None, "grep", "a b", ()),
        ("Glob", {"pattern": "./src/**/*.ts"}, (), None, "list", "src/**/*.ts", ("src/**/*.ts",)),
        (
            "Glob",
            {"pattern": "**/*.ts", "path": "/w/src"},
            (),
            "/w",
            "list",
            "**/*.ts src",
            ("**/*.ts", "src"),
        ),
        ("WebSearch", {"query": "fooBar"}, (), None, "search", '{"query":"fooBar"}', ()),
        (
            "WebFetch",
            {"url": "https://x.org", "prompt": " p "},
            (),
            None,
            "fetch",
            '{"prompt":"p","url":"https://x.org"}',
            (),
        ),
        (
            "Edit",
            {"file_path": "a.py", "old_string": "x", "new_string": "y", "thought": "t"},
            (),
            None,
            "edit",
            "a.py",
            ("a.py",),
        ),
        ("my_tool", {"a": 1, "thought": "t"}, (), None, "my_tool", '{"a":1,"thought":"t"}', ()),
        (
            "my_tool",
            {"a": [1.0, {"b": 2.0}], "c": None, "d": True},
            (),
            None,
            "my_tool",
            '{"a":[1,{"b":2}],"c":null,"d":true}',
            (),
        ),
        (
            "str_replace_editor",
            {"command": "view", "path": "a.py"},
            (),
            None,
            "read",
            "a.py",
            ("a.py",),
        ),
        (
            "str_replace_editor",
            {"command": "create", "path": "a.py", "file_text": "x"},
            (),
            None,
            "edit",
            "a.py",
            ("a.py",),
        ),
        ("str_replace_editor", {"path": "a.py"}, (), None, "read", "a.py", ("a.py",)),
        (
            "str_replace_editor",
            {"path": "a.py", "old_str": "x"},
            (),
            None,
            "edit",
            "a.py",
            ("a.py",),
        ),
        (
            "str_replace_based_edit_tool",
            {"command": "view", "path": "a.py"},
            (),
            None,
            "read",
            "a.py",
            ("a.py",),
        ),
        (
            "Bash",
            {"command": "cat a.py", "description": "d", "timeout": 5},
            (),
            None,
            "read",
            "a.py",
            ("a.py",),
        ),
        ("Bash", {"command": "cat a.py", "description": "d"}, (), None, "read", "a.py", ("a.py",)),
        ("Bash", {"command": "cat a.py"}, ("b.py",), None, "read", "a.py", ("a.py", "b.py")),
        ("Bash", {"cmd": "cat a.py"}, (), None, "read", "a.py", ("a.py",)),
        ("Bash", {"script": "cat a.py"}, (), None, "read", "a.py", ("a.py",)),
        ("Bash", {"input": "cat a.py"}, (), None, "read", "a.py", ("a.py",)),
        ("Bash", {"command": ["cat", "a b.py"]}, (), None, "read", "a b.py", ("a b.py",)),
        ("Bash", {"command": []}, (), None, "bash", '{"command":[]}', ()),
        ("Bash", {"command": ["cat", 1]}, (), None, "bash", '{"command":["cat",1]}', ()),
        ("Bash", {"action": {"command": "cat a.py"}}, (), None, "read", "a.py", ("a.py",)),
        ("Bash", {"action": "cat a.py"}, (), None, "bash", '{"action":"cat a.py"}', ()),
        ("Bash", {"foo": "bar"}, (), None, "bash", '{"foo":"bar"}', ()),
        ("Bash", {"command": 5}, (), None, "bash", '{"command":5}', ()),
        (
            "execute_bash",
            {"command": "cat a.py", "thought": "x", "security_risk": "low"},
            (),
            None,
            "read",
            "a.py",
            ("a.py",),
        ),
    ],
)
def test_tools_with_json_arguments(
    tool: str,
    args: dict[str, Any],
    paths: tuple[str, ...],
    cwd: str | None,
    operation: str,
    context: str,
    step_paths: tuple[str, ...],
) -> None:
    """Path keys, pattern keys, commentary, editors and shell tools' command keys (§3.1-§3.3)."""
    proc = procedure_of(tool, args, paths, cwd)
    assert (proc.operation, proc.context, proc.paths) == (operation, context, step_paths)


def test_a_long_argument_is_cut_in_the_context_only() -> None:
    """A tool outside the table shows its JSON with long strings cut at 200 characters; the key
    still tells 300 characters from 301 and ignores the white space around them."""
    long = procedure_of("my_tool", {"b": "x" * 300, "n": 2.0})
    assert long.context == '{"b":"' + "x" * 200 + '","n":2}'
    assert long.key == procedure_of("my_tool", {"n": 2, "b": " " + "x" * 300 + " "}).key
    assert long.key != procedure_of("my_tool", {"b": "x" * 301, "n": 2}).key
    assert long.key != procedure_of("my_tool", {"b": "x" * 299 + "y", "n": 2}).key
    short = procedure_of("my_tool", {"b": "x" * 200})
    assert short.context == '{"b":"' + "x" * 200 + '"}'


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"command": "cat a.py", "description": "one"}, {"command": "cat a.py"}),
        ({"command": "cat a.py", "timeout": 5}, {"command": "cat a.py", "timeout": 5.0}),
        ({"command": ["cat", "a.py"]}, {"command": "cat a.py"}),
        ({"action": {"command": "cat a.py"}}, {"cmd": "cat a.py"}),
        ({"command": "cat a.py", "thought": "t", "security_risk": "low"}, {"command": "cat a.py"}),
    ],
)
def test_shell_arguments_that_change_nothing(a: dict[str, Any], b: dict[str, Any]) -> None:
    """A shell tool's description and commentary, number forms and a list of words change
    nothing."""
    assert procedure_of("Bash", a).key == procedure_of("Bash", b).key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"command": "cat a.py", "timeout": 5}, {"command": "cat a.py"}),
        ({"command": "cat a.py", "timeout": 5}, {"command": "cat a.py", "timeout": 6}),
        ({"command": ["cat", "a b.py"]}, {"command": "cat a b.py"}),
        ({"command": 5}, {"command": 6}),
    ],
)
def test_shell_arguments_that_make_another_procedure(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Any other argument of a shell tool is a parameter; a list's words keep their spaces."""
    assert procedure_of("Bash", a).key != procedure_of("Bash", b).key


def test_step_paths_of_a_shell_call_are_part_of_its_key() -> None:
    """Paths the step touched beyond the command join the key and the paths, canonical."""
    plain = procedure_of("Bash", {"command": "cat a.py"})
    more = procedure_of("Bash", {"command": "cat a.py"}, ("./b.py",))
    assert more.key == procedure_of("Bash", {"command": "cat a.py"}, ("b.py",)).key != plain.key
    assert more.paths == ("a.py", "b.py")
    assert (more.operation, more.programs, more.parts) == ("read", ("cat",), (("cat", "read"),))
    url = procedure_of("Bash", {"command": "cat a.py"}, ("https://x.org/a",))
    assert (url.key, url.paths) == (plain.key, plain.paths)


class _Name(str):
    """A str subclass, as a framework's enum-like name."""


class _Count(enum.IntEnum):
    TWO = 2


class _Ratio(float):
    """A float subclass."""


def test_canonical_values_of_subclasses_and_other_objects() -> None:
    """Subclasses of str, int and float read as their plain values; any other object as its
    text."""
    assert canonical_value(_Name(" a ")) == "a"
    assert type(canonical_value(_Name("a"))) is str
    assert canonical_value(_Count.TWO) == 2
    assert type(canonical_value(_Count.TWO)) is int
    assert canonical_value(_Ratio(2.0)) == 2
    assert type(canonical_value(_Ratio(2.0))) is int
    assert canonical_value(_Ratio(2.5)) == 2.5
    assert canonical_value(Path("a/b")) == "a/b"
    assert canonical_value((1.0, {"k": (2.0,)})) == [1, {"k": [2]}]


def test_the_order_of_step_paths_is_no_parameter() -> None:
    """Two paths a shell step touched, in either order, are one procedure."""
    ab = procedure_of("Bash", {"command": "make"}, ("b.c", "a.c"))
    assert ab.key == procedure_of("Bash", {"command": "make"}, ("./a.c", "b.c")).key
    assert ab.paths == ("a.c", "b.c")


def test_paths_that_are_no_strings_are_left_out() -> None:
    """A step path that is not a string (nor hashable) is ignored, not an error."""
    bad: Any = [["x"], 3]
    proc = procedure_of("Read", {"file_path": "a.py"}, bad)
    assert (proc.operation, proc.paths) == ("read", ("a.py",))
