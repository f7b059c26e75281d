"""Same procedure (docs/protocol.md section 3): operations, canonical parameters, context."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.conftest import SHARED, missing

from antiloop.core.procedure import (
    Procedure,
    canonical_json,
    canonical_path,
    canonical_value,
    operation_of_tool,
    pattern_words,
    procedure_of,
)

CASES = SHARED / "conformance" / "cases"


def sh(command: str, cwd: str | None = None) -> Procedure:
    """The procedure of a Bash call running ``command``."""
    return procedure_of("Bash", {"command": command}, cwd=cwd)


# ------------------------------------------------------------------------------------------
# 3.1 Operation table
# ------------------------------------------------------------------------------------------

TABLE = {
    "grep": "Grep grep grep_search search_files search_file_content find_in_files ripgrep",
    "read": "Read read_file read_many_files view_file open_file cat",
    "edit": "Edit MultiEdit Write NotebookEdit edit_file write_file write_to_file create_file"
    " replace apply_diff apply_patch str_replace str_replace_editor str_replace_based_edit_tool"
    " insert_content",
    "list": "Glob glob LS ls list_dir list_directory list_files find_files find_by_name",
    "search": "WebSearch web_search google_search search_web",
    "fetch": "WebFetch web_fetch fetch browse",
}
SHELL_TOOLS = [
    "Bash",
    "bash",
    "shell",
    "sh",
    "terminal",
    "run_shell_command",
    "run_command",
    "execute_command",
    "execute_bash",
    "exec_command",
    "run_terminal_cmd",
    "local_shell",
]


@pytest.mark.parametrize(
    ("tool", "operation"),
    [(name, op) for op, names in TABLE.items() for name in names.split()],
)
def test_table_tools_map_to_their_operation(tool: str, operation: str) -> None:
    """Every tool name of the section 3.1 table maps to its operation."""
    assert operation_of_tool(tool) == operation


@pytest.mark.parametrize("tool", ["GREP", "read_FILE", "WebFetch", "webfetch"])
def test_tool_names_compare_case_insensitively(tool: str) -> None:
    """Tool names are looked up case-insensitively."""
    assert operation_of_tool(tool) == operation_of_tool(tool.lower())


@pytest.mark.parametrize("tool", SHELL_TOOLS)
def test_shell_tools_have_no_table_operation(tool: str) -> None:
    """Shell tools are classified by their command, so the table gives None."""
    assert operation_of_tool(tool) is None


@pytest.mark.parametrize(
    ("tool", "operation"),
    [
        ("sleep", "sleep"),
        ("My Tool!", "my-tool-"),
        ("mcp__github__create_issue", "mcp__github__create_issue"),
        ("Task", "task"),
        ("x.y-z", "x.y-z"),
        ("tool/with spaces", "tool-with-spaces"),
    ],
)
def test_other_tools_use_their_normalised_name(tool: str, operation: str) -> None:
    """Another tool's operation is its lower-cased name, other characters made ``-``."""
    assert operation_of_tool(tool) == operation
    assert procedure_of(tool, {}).operation == operation


@pytest.mark.parametrize("tool", ["str_replace_editor", "str_replace_based_edit_tool"])
def test_editor_view_is_a_read(tool: str) -> None:
    """The editor tools' ``view`` command is a read of its ``path``; other commands edit."""
    view = procedure_of(tool, {"command": "view", "path": "/w/src/a.py"}, cwd="/w")
    assert (view.operation, view.context, view.paths) == ("read", "src/a.py", ("src/a.py",))
    edit = procedure_of(tool, {"command": "str_replace", "path": "a.py", "old_str": "x"})
    assert edit.operation == "edit"


def test_editor_without_command_or_text_reads() -> None:
    """An editor call with neither command nor edit text (OpenHands' read action) is a read."""
    assert procedure_of("str_replace_editor", {"path": "a.py", "view_range": [1, 9]}).operation == (
        "read"
    )


SHELL_OPERATIONS = [
    # search programs
    ("grep -rn foo src", "grep"),
    ("egrep 'a|b' x", "grep"),
    ("rg foo", "grep"),
    ("ag foo", "grep"),
    ("ack foo", "grep"),
    ("git grep -n foo", "grep"),
    ("git --no-pager grep foo", "grep"),
    # reads
    ("cat a.py", "read"),
    ("head -n 20 a.py", "read"),
    ("tail -f log.txt", "read"),
    ("less a", "read"),
    ("nl -ba a.py", "read"),
    ("sed -n 1,10p a.py", "read"),
    # edits
    ("sed -i s/a/b/ a.py", "edit"),
    ("sed -i.bak -e s/a/b/ a.py", "edit"),
    ("echo x | tee out.txt", "edit"),
    ("patch -p1 < fix.diff", "edit"),
    ("echo hi > out.txt", "edit"),
    ("echo hi >> out.txt", "edit"),
    ("cat <<'EOF' > a.py\nprint(1)\nEOF", "edit"),
    # lists
    ("find . -name '*.py'", "list"),
    ("fd -e ts", "list"),
    ("ls -la src/", "list"),
    ("tree -L 2", "list"),
    # tests
    ("pytest tests/test_jump.py", "test"),
    ("python -m pytest -q", "test"),
    ("python3 -m unittest discover", "test"),
    ("jest", "test"),
    ("vitest run", "test"),
    ("mocha", "test"),
    ("npm test", "test"),
    ("npm run test", "test"),
    ("yarn test", "test"),
    ("pnpm run test", "test"),
    ("go test ./...", "test"),
    ("cargo test", "test"),
    ("mvn test", "test"),
    ("gradle test", "test"),
    ("rspec spec/a_spec.rb", "test"),
    # builds
    ("make", "build"),
    ("make build", "build"),
    ("tsc -p .", "build"),
    ("vite build", "build"),
    ("webpack", "build"),
    ("cargo build --release", "build"),
    ("go build ./cmd/x", "build"),
    ("mvn package", "build"),
    ("gradle build", "build"),
    ("npm run build", "build"),
    ("yarn build", "build"),
    ("pnpm build", "build"),
    # anything else
    ("npm run lint", "bash"),
    ("sed 's/a/b/' a.py", "bash"),
    ("python reproduce.py", "bash"),
    ("./check.sh", "bash"),
    ("git status", "bash"),
    ("sleep 5", "bash"),
    ("echo hi > /dev/null", "bash"),
    ("ls 2>/dev/null >/dev/null", "list"),
    ("", "bash"),
]


@pytest.mark.parametrize(("command", "operation"), SHELL_OPERATIONS)
def test_shell_commands_are_classified_by_program(command: str, operation: str) -> None:
    """A shell tool's operation comes from the program its command runs."""
    assert sh(command).operation == operation


WRAPPED = [
    ("npx jest src/a.spec.ts", "jest"),
    ("npx -y jest", "jest"),
    ("bunx vitest run", "vitest"),
    ("npm exec -- jest", "jest"),
    ("pnpm exec vitest", "vitest"),
    ("pnpm dlx jest", "jest"),
    ("yarn dlx jest", "jest"),
    ("python -m pytest", "pytest"),
    ("python3.11 -u -m pytest", "pytest"),
    ("uv run pytest", "pytest"),
    ("uv run --with x pytest", "pytest"),
    ("poetry run pytest", "pytest"),
    ("timeout 60 pytest", "pytest"),
    ("timeout -s KILL 60 pytest", "pytest"),
    ("time pytest", "pytest"),
    ("env pytest", "pytest"),
    ("env -u X FOO=1 pytest", "pytest"),
    ("FOO=1 BAR=2 pytest", "pytest"),
    ("cd web && pytest", "pytest"),
    ("bash -lc 'pytest -x'", "pytest"),
    ("sh -c 'pytest -x'", "pytest"),
]


@pytest.mark.parametrize(("command", "program"), WRAPPED)
def test_wrappers_are_looked_through(command: str, program: str) -> None:
    """Wrappers (npx, python -m, timeout N, VAR=value, cd DIR &&…) reveal the program they run."""
    proc = sh(command)
    assert proc.programs == (program,)
    assert proc.operation == "test"


@pytest.mark.parametrize(
    ("command", "operation"),
    [
        ("cat a.py | grep foo", "grep"),
        ("make && pytest", "test"),
        ("pytest; make", "test"),
        ("grep x a > out.txt", "edit"),
        ("ls; cat a", "list"),
        ("git diff | head -20", "read"),
        ("find . -name '*.py' | xargs grep foo", "grep"),
        ("echo a && echo b", "bash"),
        ("pytest 2>&1 | tail -5", "test"),
        ("make 2>&1 | tee build.log", "build"),
    ],
)
def test_chains_take_the_most_specific_operation(command: str, operation: str) -> None:
    """A chain takes the most specific operation of its parts: test>build>edit>grep>list>read."""
    assert sh(command).operation == operation


def test_programs_of_a_chain_in_order() -> None:
    """A chain's programs are listed once each, in order, after wrappers."""
    assert sh("timeout 5 sleep 1 && sleep 2 | cat").programs == ("sleep", "cat")


@pytest.mark.parametrize(
    ("tool", "args", "runs"),
    [
        ("Bash", {"command": "pytest"}, True),
        ("Bash", {"command": "make"}, True),
        ("Bash", {"command": "python x.py"}, True),
        ("Bash", {"command": "cat a"}, False),
        ("Bash", {"command": "grep x a"}, False),
        ("Read", {"file_path": "a"}, False),
        ("Edit", {"file_path": "a"}, False),
        ("Glob", {"pattern": "*"}, False),
        ("WebSearch", {"query": "x"}, False),
        ("WebFetch", {"url": "https://x"}, False),
        ("sleep", {"seconds": 5}, True),
    ],
)
def test_runs_something(tool: str, args: dict[str, Any], runs: bool) -> None:
    """Only bash, test, build and tools outside the table run something."""
    assert procedure_of(tool, args).runs_something is runs


# ------------------------------------------------------------------------------------------
# 3.2 Parameters
# ------------------------------------------------------------------------------------------

SAME = [
    ('grep -rn "x" src', "grep  -rn 'x'  src"),
    ("grep -rn doubleJump src/", "grep -nr 'double.*Jump' src"),
    ("grep -rn x src", "grep -r -n x src"),
    ("grep -A3 x src", "grep -A 3 x src"),
    ("grep --include=*.ts x src", "grep --include *.ts x src"),
    ("grep -rn --include=*.ts x .", "grep --include='*.ts' -n -r x ./"),
    ("grep -e foo -e bar a", "grep -e bar -e foo a"),
    ("rg -g '*.ts' -n x", "rg -n -g '*.ts' x"),
    ("rg -tpy x", "rg -t py x"),
    ("ls -la src", "ls -al ./src/"),
    ("ls -l -a", "ls -al"),
    ("fd -e ts -H", "fd -H -e ts"),
    ("git grep -in foo", "git grep -n -i foo"),
    ("cat ./a/b.py", "cat a/b.py"),
    ("cat a//b.py", "cat a/b.py"),
    ("cat /w/a/b.py", "cat a/b.py"),
    ("pytest ./tests/", "pytest tests"),
    ("cd /w && grep -rn x src", "grep -rn x src"),
    ("bash -lc 'grep -rn x src'", "grep -rn x src"),
    ("npx  jest   src/a.spec.ts", "npx jest 'src/a.spec.ts'"),
    ("grep -rn 'a' src \\\n  --include=*.ts", "grep -rn a src --include=*.ts"),
    ("cat <<EOF > a.py\nx = 1   \n  y = 2\nEOF", "cat > a.py <<EOF\nx = 1\n  y = 2\nEOF"),
    ("grep x a; ", "grep x a"),
    ("grep x a\n", "grep x a"),
    ("grep 'foo\\|bar' a", "grep 'foo|bar' a"),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_equivalent_commands_are_the_same_procedure(a: str, b: str) -> None:
    """Quoting, spacing, bundles, flag order, path forms and pattern joiners vanish."""
    assert sh(a, cwd="/w").key == sh(b, cwd="/w").key


DIFFERENT = [
    ("grep -rn doubleJump src", "grep -rni doubleJump src"),
    ("grep -rn x src", "grep -rnv x src"),
    ("grep -rn x src", "grep -rnw x src"),
    ("grep --include=*.ts x src", "grep --include=*.js x src"),
    ("grep Jump src", "grep doubleJump src"),
    ("grep 'jump.*double' src", "grep doubleJump src"),
    ("grep x src", "grep x lib"),
    ("grep x", "grep x ."),
    ("grep -A3 x a", "grep -A4 x a"),
    ("grep -A 3 x a", "grep -A x 3 a"),
    ('grep "a b" c', "grep a b c"),
    ("pytest -x -q", "pytest -q -x"),
    ("cat a.py", "head a.py"),
    ("cd sub && pytest", "pytest"),
    ("a && b", "a; b"),
    ("a | b", "a && b"),
    ("cat <<EOF > a.py\n  x = 1\nEOF", "cat <<EOF > a.py\nx = 1\nEOF"),
    ("echo hi > a", "echo hi >> a"),
    ("./check.sh", "check.sh"),
    ("go test ./...", "go test ."),
    ("sed -n 's/a//g' x", "sed -n 's/a/g' x"),
    ("find ./src -path './src/*'", "find ./src -path 'src/*'"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_commands_that_differ_in_meaning_are_other_procedures(a: str, b: str) -> None:
    """A flag, a word order, an operator, indentation or another path makes another procedure."""
    assert sh(a, cwd="/w").key != sh(b, cwd="/w").key


def test_json_key_order_and_number_forms_do_not_matter() -> None:
    """JSON key order, ``10`` = ``10.0`` and surrounding white space of strings never matter."""
    a = procedure_of("Read", {"file_path": "a.py", "offset": 10, "limit": 50})
    b = procedure_of("Read", {"limit": 50.0, "offset": 10.0, "file_path": " a.py "})
    assert a.key == b.key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"limit": 50}, {"limit": 51}),
        ({"limit": 50}, {"limit": "50"}),
        ({"flag": True}, {"flag": 1}),
        ({"x": None}, {}),
        ({"x": [1, 2]}, {"x": [2, 1]}),
    ],
)
def test_other_json_values_make_other_procedures(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Another value, type or list order is another procedure."""
    assert procedure_of("some_tool", a).key != procedure_of("some_tool", b).key


def test_claude_code_grep_arguments_are_parameters() -> None:
    """Grep's ``output_mode``, ``-n``, ``-i``, ``glob`` and ``type`` keys are parameters."""
    base = {"pattern": "doubleJump", "path": "src", "output_mode": "content", "-n": True}
    same = {"-n": True, "path": "./src/", "pattern": "double_jump", "output_mode": "content"}
    assert procedure_of("Grep", base).key == procedure_of("Grep", same).key
    for change in ({"-i": True}, {"output_mode": "files_with_matches"}, {"glob": "*.ts"}):
        assert procedure_of("Grep", base).key != procedure_of("Grep", {**base, **change}).key


def test_multi_line_editor_text_keeps_indentation() -> None:
    """Editor text compares verbatim except trailing spaces: indentation is content."""
    a = procedure_of(
        "Edit", {"file_path": "a.py", "old_string": "if x:\n    y()  \n", "new_string": "z"}
    )
    b = procedure_of(
        "Edit", {"file_path": "a.py", "old_string": "if x:\n    y()", "new_string": "z"}
    )
    c = procedure_of("Edit", {"file_path": "a.py", "old_string": "if x:\n  y()", "new_string": "z"})
    assert a.key == b.key
    assert a.key != c.key


def test_long_editor_text_still_compares_exactly() -> None:
    """Kilobyte editor strings compare exactly (one changed character is another procedure)."""
    text = "\n".join(f"    line {i}" for i in range(200))
    a = procedure_of("Edit", {"file_path": "a.py", "old_string": text, "new_string": "x"})
    b = procedure_of("Edit", {"file_path": "a.py", "old_string": text + "  \n", "new_string": "x"})
    c = procedure_of("Edit", {"file_path": "a.py", "old_string": text + "!", "new_string": "x"})
    assert a.key == b.key
    assert a.key != c.key


def test_commentary_keys_are_no_parameters() -> None:
    """The agent's own commentary (thought, explanation, a Bash description) is no parameter."""
    a = procedure_of("Bash", {"command": "ls", "description": "List files"})
    b = procedure_of("Bash", {"command": "ls", "description": "Look again"})
    assert a.key == b.key
    c = procedure_of("read_file", {"path": "a", "thought": "x", "explanation": "y"})
    assert c.key == procedure_of("read_file", {"path": "a"}).key


def test_commentary_of_other_tools_is_kept() -> None:
    """For a tool outside the table (a ``think`` tool) every argument is a parameter."""
    assert (
        procedure_of("think", {"thought": "a"}).key != procedure_of("think", {"thought": "b"}).key
    )


def test_other_shell_arguments_are_parameters() -> None:
    """A shell tool's other arguments (a timeout) are parameters too."""
    a = procedure_of("Bash", {"command": "pytest", "timeout": 60})
    b = procedure_of("Bash", {"command": "pytest", "timeout": 60.0})
    c = procedure_of("Bash", {"command": "pytest", "timeout": 120})
    assert a.key == b.key != c.key
    assert a.operation == "test"


@pytest.mark.parametrize("key", ["command", "cmd", "script", "input"])
def test_command_keys(key: str) -> None:
    """The command is read from ``command``, ``cmd``, ``script`` or ``input``."""
    assert procedure_of("shell", {key: "grep -rn x src"}).key == sh("grep -rn x src").key


def test_command_as_a_list_of_words() -> None:
    """A command given as words (Codex's ``["bash", "-lc", …]``) reads like the string."""
    assert procedure_of("local_shell", {"command": ["bash", "-lc", "grep -rn x src"]}).key == (
        sh("grep -rn x src").key
    )
    assert procedure_of("exec_command", {"cmd": ["rg", "-n", "a b", "src"]}).key == (
        sh("rg -n 'a b' src").key
    )


def test_shell_tool_without_a_command() -> None:
    """A shell tool without a command is a bash step keyed on its JSON arguments."""
    proc = procedure_of("Bash", {"x": 1})
    assert proc.operation == "bash"
    assert proc.context == '{"x":1}'


# ------------------------------------------------------------------------------------------
# Paths
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "cwd", "expected"),
    [
        ("./a/b", None, "a/b"),
        ("a/b/", None, "a/b"),
        ("a//b", None, "a/b"),
        ("./a/./b/", None, "a/b"),
        ("/w/a/b", "/w", "a/b"),
        ("/w/a/b", "/w/", "a/b"),
        ("/w", "/w", "."),
        ("/wx/a", "/w", "/wx/a"),
        ("/a/b", None, "/a/b"),
        ("/a/b/", "/", "a/b"),
        (".", None, "."),
        ("./", None, "."),
        ("../a", None, "../a"),
        ("*.ts", None, "*.ts"),
        ("**/*.spec.ts", None, "**/*.spec.ts"),
        ("  src/a.ts ", None, "src/a.ts"),
        ("./...", None, None),
        ("./pkg/...", None, None),
        ("https://example.com/a/", None, None),
        ("", None, None),
    ],
)
def test_canonical_path(path: str, cwd: str | None, expected: str | None) -> None:
    """Path forms collapse to one; Go package patterns and URLs are not paths."""
    assert canonical_path(path, cwd) == expected


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("Read", {"file_path": "/w/src/a.ts"}),
        ("read_file", {"path": "./src/a.ts"}),
        ("view_file", {"filepath": "src//a.ts"}),
        ("open_file", {"file": "src/a.ts"}),
        ("cat", {"filename": "src/a.ts"}),
        ("read_many_files", {"paths": ["src/a.ts", "./src/a.ts"]}),
        ("read_file", {"target_file": "/w/src/a.ts"}),
    ],
)
def test_path_keys_are_canonical_paths(tool: str, args: dict[str, Any]) -> None:
    """The values of the path keys are canonical paths and make the context."""
    proc = procedure_of(tool, args, cwd="/w")
    assert proc.paths == ("src/a.ts",)
    assert proc.context.split()[0] == "src/a.ts"


@pytest.mark.parametrize(
    ("tool", "args"),
    [("list_dir", {"dir": "./src/"}), ("list_directory", {"directory": "/w/src"})],
)
def test_directory_keys_are_paths(tool: str, args: dict[str, Any]) -> None:
    """``dir`` and ``directory`` values are paths too."""
    assert procedure_of(tool, args, cwd="/w").paths == ("src",)


def test_list_pattern_is_a_path() -> None:
    """A list tool's ``pattern`` is a file pattern, canonicalised like a path."""
    a = procedure_of("Glob", {"pattern": "./src/**/*.spec.ts"})
    b = procedure_of("Glob", {"pattern": "src/**/*.spec.ts"})
    assert a.key == b.key
    assert a.context == "src/**/*.spec.ts"


def test_step_paths_join_the_context() -> None:
    """The step's ``paths`` are part of the context, after canonicalisation."""
    a = procedure_of("Read", {"file_path": "a.ts"}, paths=["./b.ts"])
    b = procedure_of("Read", {"file_path": "a.ts"}, paths=["b.ts", "b.ts/"])
    c = procedure_of("Read", {"file_path": "a.ts"}, paths=["c.ts"])
    assert a.key == b.key != c.key
    assert a.paths == ("a.ts", "b.ts")
    assert a.context == "a.ts b.ts"


def test_step_paths_join_a_shell_procedure() -> None:
    """Extra paths make another shell procedure too, and join its paths."""
    a = procedure_of("Bash", {"command": "make"}, paths=["out/app"])
    assert a.key != sh("make").key
    assert a.paths == ("out/app",)
    assert a.operation == "build"


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("grep -rn x src/ lib", ("lib", "src")),
        ("cat ./a.py b.py", ("a.py", "b.py")),
        ("sed -n '1,20p' ./a.py", ("a.py",)),
        ("head -n 20 a.py", ("a.py",)),
        ("pytest tests/test_a.py -k x", ("tests/test_a.py",)),
        ("go test ./...", ()),
        ("curl https://example.com/a.json", ()),
        ("echo hi > out.txt", ("out.txt",)),
        ("echo hi > /dev/null", ()),
        ("find src -name '*.ts'", ("*.ts", "src")),
        ("rg --files -g '*.spec.ts' src", ("*.spec.ts", "src")),
        ("cd /w/sub && cat a.py", ("sub/a.py",)),
        ("cd sub && cat a.py", ("sub/a.py",)),
        ("cd /w && cat a.py", ("a.py",)),
        ("ls", ()),
    ],
)
def test_shell_paths(command: str, paths: tuple[str, ...]) -> None:
    """Operands that are paths (and redirection targets) become the shell step's paths."""
    assert sh(command, cwd="/w").paths == paths


# ------------------------------------------------------------------------------------------
# Search patterns
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("double.*Jump", "double jump"),
        ("doubleJump", "double jump"),
        ("double_jump", "double jump"),
        ("double-jump", "double jump"),
        ("double jump", "double jump"),
        ("double.+Jump", "double jump"),
        ("double\\s*Jump", "double jump"),
        ("double[_-]?jump", "double jump"),
        ("HTTPServer", "http server"),
        ("getHTTPResponseCode", "get http response code"),
        ("Jump", "jump"),
        ("jump.*double", "jump double"),
        ("foo|bar", "foo | bar"),
        ("foo\\|bar", "foo | bar"),
        ("x{2,3}y", "x y"),
        ("isinstance(args\\[0\\], np.ndarray", "isinstance args 0 np ndarray"),
        ("utf8Decode", "utf8 decode"),
        ("ÜberGroß", "über groß"),
    ],
)
def test_pattern_words(pattern: str, words: str) -> None:
    """Patterns compare by their word sequence (section 3.2 examples)."""
    assert pattern_words(pattern) == words


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("_serialize", "_ serialize"),
        ("serialize_", "serialize _"),
        ("^init", "^ init"),
        ("init$", "init $"),
        ("doubleJump(", "double jump ("),
        ("  _serialize  ", "_ serialize"),  # white space is stripped first
        ("\\bdoubleJump\\b", "\\b double jump \\b"),  # an escape is one edge
        ("foo\\b", "foo \\b"),
        ("\\.foo", "\\. foo"),
        ("(?i)Foo", "(?i) foo"),
        ("[[:space:]]+def", "[[:space:]]+ def"),
        ("[Ff]oo", "[Ff] oo"),  # a bracket class is one edge
        ("fo[oO]", "fo [oO]"),
        ("isinstance(args\\[0\\], np.ndarray)", "isinstance args 0 np ndarray )"),
        (".*Jump", ".* jump"),
        ("TODO:", "todo :"),
        ("::", "::"),  # no letter or digit: the pattern is its own word
        (".*", ".*"),
        ("[abc]", "[abc]"),
        ("_", "_"),
        ("a_b", "a b"),  # a separator between words still vanishes
    ],
)
def test_pattern_edges_are_kept(pattern: str, words: str) -> None:
    """Leading and trailing separators narrow a search (section 3.2, v1.1)."""
    assert pattern_words(pattern) == words


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("_serialize", "serialize"),
        ("^init", "init"),
        ("doubleJump(", "doubleJump"),
        ("\\bfoo\\b", "foo"),
        ("-v", "v"),
    ],
)
def test_an_edge_makes_another_search(a: str, b: str) -> None:
    """The same words with and without an edge are other procedures (p36)."""
    pa = procedure_of("Grep", {"pattern": a, "path": "src"})
    pb = procedure_of("Grep", {"pattern": b, "path": "src"})
    assert pa.key != pb.key
    sa = procedure_of("Bash", {"command": f"grep -rn -e '{a}' src"})
    sb = procedure_of("Bash", {"command": f"grep -rn -e '{b}' src"})
    assert sa.key != sb.key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("double.*Jump", "doubleJump"),
        ("  double_jump ", "doubleJump"),
        ("_serialize", "_Serialize"),
        ("^init", "^INIT"),
    ],
)
def test_inner_separators_still_vanish(a: str, b: str) -> None:
    """Only the edges are kept: words joined another way are the same search."""
    assert procedure_of("Grep", {"pattern": a}).key == procedure_of("Grep", {"pattern": b}).key


def test_pattern_words_keep_order_and_words() -> None:
    """``Jump`` and ``jump.*double`` are not ``doubleJump``: other words or another order."""
    assert pattern_words("Jump") != pattern_words("doubleJump")
    assert pattern_words("jump.*double") != pattern_words("doubleJump")


@pytest.mark.parametrize("key", ["pattern", "regex", "query", "q", "search", "-e"])
def test_grep_pattern_keys(key: str) -> None:
    """For grep tools, every pattern key compares by its word sequence."""
    a = procedure_of("grep_search", {key: "double.*Jump"})
    b = procedure_of("grep_search", {key: "doubleJump"})
    assert a.key == b.key
    assert a.context == "double jump"


def test_query_of_a_web_search_is_no_pattern() -> None:
    """Outside grep operations a ``query`` is a plain string."""
    a = procedure_of("WebSearch", {"query": "doubleJump"})
    b = procedure_of("WebSearch", {"query": "double jump"})
    assert a.key != b.key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("grep -e 'double.*Jump' src", "grep -e doubleJump src"),
        ("grep --regexp=doubleJump src", "grep --regexp double_jump src"),
        ("rg doubleJump", "rg 'double.*jump'"),
        ("ag double_jump", "ag doubleJump"),
        ("ack doubleJump", "ack double-jump"),
        ("git grep doubleJump", "git grep 'double.*Jump'"),
    ],
)
def test_shell_patterns_compare_by_words(a: str, b: str) -> None:
    """The first operand of a search program and ``-e`` values compare by their words."""
    assert sh(a).key == sh(b).key


def test_first_operand_after_e_is_a_path() -> None:
    """With ``-e`` the first operand is a path, not a pattern."""
    proc = sh("grep -e doubleJump src/")
    assert proc.paths == ("src",)
    assert proc.context == "double jump@src"


# ------------------------------------------------------------------------------------------
# 3.3 / 6 Context
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "context"),
    [
        ("grep", {"pattern": "double.*Jump", "path": "src"}, "double jump@src"),
        ("grep", {"pattern": "doubleJump"}, "double jump"),
        ("Grep", {"pattern": "x", "path": "./src", "glob": "*.ts"}, "x@src *.ts"),
        ("Bash", {"command": "grep -rn 'double.*Jump' src/"}, "double jump@src"),
        ("Read", {"file_path": "/w/src/app/app.ts"}, "src/app/app.ts"),
        ("Edit", {"file_path": "src/a.ts", "old_string": "a", "new_string": "b"}, "src/a.ts"),
        ("Glob", {"pattern": "**/*.spec.ts"}, "**/*.spec.ts"),
        ("Bash", {"command": "npx jest src/app/app.spec.ts"}, "npx jest src/app/app.spec.ts"),
        ("Bash", {"command": "npx  jest  ./src/app/app.spec.ts"}, "npx jest src/app/app.spec.ts"),
        ("Bash", {"command": "cat ./src/a.ts"}, "src/a.ts"),
        ("Bash", {"command": "ls -la"}, "ls -a -l"),
        ("Bash", {"command": "pytest -k 'a and b'"}, "pytest -k 'a and b'"),
        ("Bash", {"command": "make 2>&1 | tail -5"}, "make 2>&1 | tail -5"),
        ("WebSearch", {"query": " x ", "n": 10.0}, '{"n":10,"query":"x"}'),
        ("sleep", {"seconds": 5}, '{"seconds":5}'),
        ("Task", {"b": "é", "a": [1.0]}, '{"a":[1],"b":"é"}'),
    ],
)
def test_context(tool: str, args: dict[str, Any], context: str) -> None:
    """The context is what section 6 asks for each kind of operation."""
    assert procedure_of(tool, args, cwd="/w").context == context


def test_context_of_a_long_argument_starts_like_its_json() -> None:
    """A tool's context starts like its canonical JSON even when a string is very long."""
    text = "x" * 5000
    proc = procedure_of("Task", {"prompt": text})
    assert proc.context[:100] == canonical_json({"prompt": text})[:100]


# ------------------------------------------------------------------------------------------
# JSON forms
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (10.0, 10),
        (1.5, 1.5),
        (True, True),
        (None, None),
        ("  x  ", "x"),
        ("a  \n  b  \n\n", "a\n  b"),
        ("\n\n  a\n", "  a"),
        ({"b": [1.0, " y "], "a": {"c": 2.0}}, {"b": [1, "y"], "a": {"c": 2}}),
        ((1, 2), [1, 2]),
    ],
)
def test_canonical_value(value: Any, expected: Any) -> None:
    """Integral floats become ints, strings lose surrounding space, multi-line bodies keep lines."""
    assert canonical_value(value) == expected


def test_canonical_json_is_compact_and_sorted() -> None:
    """Canonical JSON has sorted keys, no spaces and raw unicode."""
    assert canonical_json({"b": 1.0, "a": "é", "c": [True, None]}) == (
        '{"a":"é","b":1,"c":[true,null]}'
    )
    assert json.loads(canonical_json({"z": {"y": 1, "x": 2}})) == {"z": {"x": 2, "y": 1}}


# ------------------------------------------------------------------------------------------
# Shell parsing corners
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "echo 'unterminated",
        'echo "unterminated',
        "echo $(unterminated",
        "cat <<EOF\nno end",
        "a &&",
        "| b",
        ";;;",
        "echo `date` $'\\n' ${HOME} $((1+2))",
        "( cd x && make )",
        "if [ -f a ]; then cat a; else echo no; fi",
        "x=$(grep -c foo a.py) && echo $x",
        "cat a # a comment with 'quote",
        "echo a\\ b",
        "\\",
        "2>",
        "echo > ",
    ],
)
def test_odd_commands_do_not_break_parsing(command: str) -> None:
    """Unterminated quotes, comments, subshells and control words still give a procedure."""
    proc = sh(command)
    assert isinstance(proc.key, str)
    assert proc.operation in {"bash", "read", "edit", "list", "grep", "test", "build"}


def test_long_commands_are_parsed_alike() -> None:
    """A command too long for the parse cache reads the same way each time."""
    body = "\n".join(f"line {i}" for i in range(3000))
    a = sh(f"cat > big.txt <<'EOF'\n{body}\nEOF")
    b = sh(f"cat <<'EOF' > ./big.txt\n{body}   \nEOF")
    assert a.key == b.key
    assert (a.operation, a.context) == ("edit", "big.txt")


def test_swe_agent_commands() -> None:
    """SWE-agent's search commands are grep and list operations."""
    assert operation_of_tool("search_dir") == "grep"
    assert operation_of_tool("find_file") == "list"


@pytest.mark.parametrize("command", ["edit", "insert 12", "append"])
def test_an_editor_body_of_many_lines_is_its_text(command: str) -> None:
    """A body of several lines up to ``end_of_edit`` is one editor text, compared verbatim
    (indentation is content; trailing spaces are not), never lines run as commands."""
    body = "    x = 1\n    if x:\n        y = 2"
    a = sh(f"{command}\n{body}\nend_of_edit")
    b = sh(f"{command}\n{body.replace('1', '1   ')}\nend_of_edit  ")
    c = sh(f"{command}\n{body.replace('    ', '')}\nend_of_edit")
    assert a.key == b.key != c.key
    assert (a.operation, a.parts) == ("edit", ((command.split()[0], "edit"),))


def test_quoted_operators_are_words() -> None:
    """An operator in quotes is a word, not a chain."""
    assert sh("grep '&&' a").operation == "grep"
    assert sh("grep '&&' a").key != sh("grep && a").key


def test_comment_is_ignored() -> None:
    """A comment is not part of the command."""
    assert sh("grep x a  # look for x").key == sh("grep x a").key


def test_heredoc_body_is_content() -> None:
    """A heredoc body compares verbatim except trailing spaces, and the target is a path."""
    a = sh("cat > ./a.py <<'EOF'\ndef f():\n    return 1   \nEOF\n")
    b = sh("cat <<'EOF' > a.py\ndef f():\n    return 1\nEOF")
    c = sh("cat <<'EOF' > a.py\ndef f():\n  return 1\nEOF")
    assert a.key == b.key != c.key
    assert a.operation == "edit"
    assert a.context == "a.py"


def test_heredoc_then_more_commands() -> None:
    """Commands after a heredoc are parsed after its body."""
    proc = sh("cat <<EOF > t.py\nprint(1)\nEOF\npython -m pytest t.py")
    assert proc.operation == "test"
    assert proc.programs == ("cat", "pytest")


def test_fd_duplication_is_not_a_file() -> None:
    """``2>&1`` duplicates a descriptor: it writes no file."""
    proc = sh("grep x a 2>&1")
    assert proc.operation == "grep"
    assert proc.paths == ("a",)


def test_leading_cd_to_cwd_vanishes() -> None:
    """``cd /testbed && X`` with cwd ``/testbed`` is ``X``."""
    assert sh("cd /testbed && pytest -x", cwd="/testbed").key == sh("pytest -x").key
    assert sh("cd /testbed && pytest -x", cwd="/testbed").context == "pytest -x"


# ------------------------------------------------------------------------------------------
# Conformance cases that exercise section 3
# ------------------------------------------------------------------------------------------


def _events(case: str) -> list[dict[str, Any]]:
    path = next(CASES.glob(f"{case}-*.json"), None)
    if path is None:
        missing(f"conformance case {case} not found under {CASES}")
    events: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["events"]
    return events


def _proc(event: dict[str, Any]) -> Procedure:
    return procedure_of(
        event["tool"], event.get("args", {}), event.get("paths", ()), event.get("cwd")
    )


@pytest.mark.parametrize("case", ["p01", "p02", "p07", "p08", "p21", "p22", "p25", "p29", "p34"])
def test_conformance_pairs_are_the_same_procedure(case: str) -> None:
    """The first two events of these cases are the same procedure."""
    a, b = _events(case)[:2]
    assert _proc(a).key == _proc(b).key


@pytest.mark.parametrize("case", ["p03", "p09", "p23"])
def test_conformance_pairs_are_other_procedures(case: str) -> None:
    """The first two events of these cases are different procedures."""
    a, b = _events(case)[:2]
    assert _proc(a).key != _proc(b).key


@pytest.mark.parametrize(
    ("case", "index", "operation"),
    [
        ("p01", 0, "grep"),
        ("p05", 0, "test"),
        ("p07", 0, "edit"),
        ("p08", 0, "read"),
        ("p24", 0, "build"),
        ("p25", 0, "test"),
        ("p33", 2, "build"),
        ("p16", 2, "bash"),
    ],
)
def test_conformance_operations(case: str, index: int, operation: str) -> None:
    """The operations that the cases' fingerprint prefixes name."""
    assert _proc(_events(case)[index]).operation == operation


def test_allow_repeat_program() -> None:
    """A shell ``sleep`` names its program for the allow-repeat list; a sleep tool is its op."""
    assert sh("sleep 5").programs == ("sleep",)
    assert procedure_of("sleep", {"seconds": 5}).operation == "sleep"


# ------------------------------------------------------------------------------------------
# The cache of recent procedures and the quoted-word fast path give the same procedures.


def test_cached_procedure_tells_scalar_types_apart() -> None:
    """Arguments equal in Python but not in JSON (``1``, ``True``) stay other procedures."""
    one = procedure_of("my_tool", {"x": 1})
    true = procedure_of("my_tool", {"x": True})
    assert one.key != true.key
    assert procedure_of("my_tool", {"x": 1.0}).key == one.key
    assert procedure_of("my_tool", {"x": True}) == true


def test_cached_procedure_keeps_the_order_of_context_paths() -> None:
    """A repeated call gives the same context; argument order still orders the paths."""
    ab = procedure_of("Read", {"file_path": "a.py", "path": "b.py"})
    ba = procedure_of("Read", {"path": "b.py", "file_path": "a.py"})
    assert procedure_of("Read", {"file_path": "a.py", "path": "b.py"}) == ab
    assert (ab.context, ba.context) == ("a.py b.py", "b.py a.py")


def test_single_quoted_words_read_as_the_tokenizer_reads_them() -> None:
    """Words with single quotes (spaces and empty strings inside) are the tokenizer's words."""
    assert sh("echo 'a b'c '' x").key == sh('echo "a b"c "" x').key
    assert sh("grep -rn 'value_1' src/mod1").context == "value 1@src/mod1"


def test_escaped_trailing_blank_is_a_word() -> None:
    """``printf \\ `` prints a space: the escaped blank at the end is an argument."""
    assert sh("printf \\ ").key == sh("printf ' '").key


def test_the_openhands_sdk_file_editor_is_an_editor() -> None:
    """OpenHands SDK's file_editor reads with command view and edits otherwise."""
    view = procedure_of("file_editor", {"command": "view", "path": "/w/a.py"}, cwd="/w")
    edit = procedure_of("file_editor", {"command": "str_replace", "path": "a.py", "old_str": "x"})
    assert (view.operation, view.context) == ("read", "a.py")
    assert (edit.operation, edit.context) == ("edit", "a.py")
