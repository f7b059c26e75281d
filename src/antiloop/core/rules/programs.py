"""What antiloop knows about programs (docs/protocol.md sections 3.1-3.2), as rows.

Three kinds of row, read by one engine (``antiloop.core.shell.engine``):

- :class:`Program`: how a program reads its arguments (which flags take a value, whether
  flags commute, which flags name search patterns or file patterns, whether its operands are
  files) and the operation a run of it is (``cat`` reads, ``tee FILE`` edits);
- :class:`Wrapper`: a command that runs the command after it (``timeout 5``, ``env X=1``,
  ``uv run``, ``npx``, ``python -m``), looked through to the real program (``sudo`` is not
  one: ``sudo grep`` is its own program, unless a config row says otherwise);
- :class:`Runner`: a program, or one of its subcommands, whose run is a test or a build.

``PROGRAMS``, ``WRAPPERS`` and ``RUNNERS`` hold the rows of sections 3.1-3.2 (the rule set
``antiloop.core.rules.ruleset.BUILTIN`` is made of them); ``rows_of_table`` reads more rows from
the ``[canonical]`` table of ``antiloop.toml``, validated: a bad key or value is a one-line
``ConfigError`` that names it (a row with the name of a built-in one replaces it).

Example:
    >>> rows_of_table({"runners": [{"program": "ward", "kind": "test"}]})["runners"][0].kind
    'test'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from antiloop.core.errors import ConfigError

__all__ = [
    "OPERATIONS",
    "PROGRAMS",
    "RUNNERS",
    "WRAPPERS",
    "Program",
    "Runner",
    "Wrapper",
    "rows_of_table",
]

OPERATIONS = ("bash", "read", "list", "grep", "edit", "build", "test")
"""The operations a shell command can be, lowest first: a chain is its highest part's."""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


PATTERN_FLAGS = _names("-e --regexp --match")
GLOB_FLAGS = _names("--include -g --glob --iglob -G --file-search-regex")
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Program:
    """How one program reads its arguments, and what operation a run of it is."""

    name: str  # the program's name (``grep``), or a subcommand's (``git grep``)
    aliases: tuple[str, ...] = ()  # other names of the same program (``egrep``)
    short: str = ""  # short flags that take a value (``-A 3``, ``-A3``)
    long: frozenset[str] = _NONE  # long flags, without ``--``, that take a value
    commute: bool = False  # flag order is cosmetic: sorted; the run is a grep (search) or list
    search: bool = False  # the first operand is a search pattern, read as its words
    patterns: frozenset[str] = PATTERN_FLAGS  # flags whose value is a search pattern
    globs: frozenset[str] = GLOB_FLAGS  # flags whose value is a file pattern (with commute)
    rest: frozenset[str] = _NONE  # flags that take every word after them (``fd -x CMD``)
    no_pattern: frozenset[str] = _NONE  # with one of these no operand is a pattern (grep -e)
    files: bool = True  # operands name files; False: no flag spec, path-like words are paths
    op: str = ""  # the operation of every run (read, list, edit); "": bash or a Runner's kind
    file_op: str = ""  # the operation of a run with file operands (``tee FILE``: edit)
    file_flags: frozenset[str] = _NONE  # flags whose value is a file operand (``patch -i F``)
    op_flags: tuple[tuple[str, str], ...] = ()  # (flag, op): the first given sets the op
    script: bool = False  # the first operand is a script, verbatim (``sed 's/a/b/' f``) ...
    script_flags: frozenset[str] = _NONE  # ... unless one of these gives it (``sed -e``)
    expression: frozenset[str] = _NONE  # start points, then tests taking file patterns (find)
    subcommands: bool = False  # its first operand is a subcommand: read by "NAME SUB"'s row
    body: bool = False  # its lines after the first, up to an ``end_of_…`` line, are its text


@dataclass(frozen=True, slots=True)
class Wrapper:
    """A command that runs the command after its options: the engine looks through it."""

    name: str  # the wrapper's name (``timeout``)
    sub: str = ""  # it wraps only with this subcommand (``npm exec``, ``uv run``)
    short: str = ""  # short options that take a value (``nice -n 5``)
    long: frozenset[str] = _NONE  # long options, without ``--``, that take a value
    operands: int = 0  # words after the options before the command (``timeout 5``: 1)
    module: str = ""  # the flag naming the program run (``python -m``); without it, itself
    stop: frozenset[str] = _NONE  # options that end its options (``python -c``)
    versioned: bool = False  # the name may carry a version (``python3.11``)


@dataclass(frozen=True, slots=True)
class Runner:
    """A program whose run is a test or a build, by its subcommand when ``words`` is set."""

    program: str  # the program's name (``pytest``, ``npm``)
    kind: str  # test or build
    words: frozenset[str] = _NONE  # subcommands that make the run this kind; empty: every run
    anywhere: bool = False  # a word counts as any operand (``mvn clean test``), else the first
    through: frozenset[str] = _NONE  # first operands handing over to the next (``npm run X``)
    scoped: str = ""  # prefix: ``test:unit`` counts as ``test``; suffix: ``:app:test`` does
    direct: frozenset[str] = _NONE  # more words that count only as the first operand (npm t)


_GREP_LONG = _names(
    "regexp file max-count after-context before-context context include exclude exclude-dir"
    " exclude-from label binary-files devices directories group-separator"
)
_RG_LONG = _names(
    "regexp file glob iglob type type-not after-context before-context context max-count"
    " max-columns max-depth threads replace encoding type-add type-clear ignore-file pre"
    " pre-glob sort sortr colors color context-separator field-match-separator"
    " field-context-separator path-separator max-filesize dfa-size-limit regex-size-limit"
    " engine hostname-bin hyperlink-format generate"
)
_NO_PATTERN = _names("-e --regexp -f --file")  # grep -e X: the operands are paths
PROGRAMS = (
    Program("grep", ("egrep", "fgrep"), "efmABCdD", _GREP_LONG, True, True, no_pattern=_NO_PATTERN),
    Program(
        "rg", (), "efgtTABCmMdjrE", _RG_LONG, True, True,
        no_pattern=_NO_PATTERN | {"--files", "--type-list"},
    ),
    Program(
        "ag", (), "ABCGgmpW",
        _names(
            "after before context file-search-regex max-count depth ignore ignore-dir"
            " path-to-ignore pager width workers color-line-number color-match color-path"
        ),
        True, True, no_pattern=_NO_PATTERN | {"-g"},
    ),
    Program(
        "ack", ("ack-grep",), "ABCmg",
        _names(
            "after-context before-context context max-count type ignore-dir noignore-dir"
            " ignore-file match output files-from pager color-filename color-match color-lineno"
        ),
        True, True, no_pattern=_NO_PATTERN | {"-g", "-f", "--match"},
    ),
    Program(
        "git grep", (), "efmABC",
        _names("regexp file max-count after-context before-context context max-depth threads"),
        True, True, no_pattern=_NO_PATTERN,
    ),
    Program(
        "ls", (), "IwT",
        _names(
            "ignore hide width tabsize block-size format sort time time-style quoting-style"
            " indicator-style"
        ),
        True,
    ),
    Program(
        "fd", ("fdfind",), "etEdSocjxX",
        _names(
            "extension type exclude max-depth min-depth exact-depth size changed-within"
            " changed-before owner threads color exec exec-batch base-directory search-path"
            " path-separator max-results ignore-file batch-size format"
        ),
        True, rest=_names("-x -X --exec --exec-batch"),
    ),
    Program("head", (), "nc", _names("lines bytes"), op="read"),
    Program("tail", (), "ncs", _names("lines bytes sleep-interval pid max-unchanged-stats"),
            op="read"),
    Program("cat", op="read"),
    Program("less", (), "bhjpPtTxyzoOk", _names("pattern tag log-file tabs shift"), op="read"),
    Program("more", (), "n", op="read"),
    Program(
        "nl", (), "bdfhilnsvw",
        _names(
            "body-numbering section-delimiter footer-numbering header-numbering line-increment"
            " join-blank-lines number-format number-separator starting-line-number number-width"
        ),
        op="read",
    ),
    Program(
        "sed", (), "efl", _names("expression file line-length"),
        op_flags=(("-i", "edit"), ("--in-place", "edit"), ("-n", "read"), ("--quiet", "read"),
                  ("--silent", "read")),
        script=True, script_flags=_names("-e --expression -f --file"),
    ),
    Program("tee", file_op="edit"),
    Program(
        "patch", (), "pidoDFrBVzYgx",
        _names("strip input directory output reject-file prefix suffix basename-prefix fuzz"),
        op="edit", file_flags=_names("-i --input"),
    ),
    Program("tree", (), "LPIoHT", _names("filelimit charset sort timefmt"), op="list"),
    Program(
        "find", files=False, op="list",
        expression=_names("-name -iname -path -ipath -wholename -iwholename -regex -iregex"),
    ),
    Program("git", (), "Cc", _names("git-dir work-tree namespace"), files=False, subcommands=True),
    Program("git apply", files=False, op="edit"),
    # the commands of agent-computer interfaces (SWE-agent and its kind): a file viewer shows
    # a window of a file (file contents, no error line); an editor's body is its text
    *(Program(name, files=False, op="read")
      for name in ("open", "goto", "scroll_up", "scroll_down")),
    *(Program(name, commute=True, search=True) for name in ("search_file", "search_dir")),
    Program("find_file", commute=True),
    *(Program(name, files=False, op="edit", body=True)
      for name in ("edit", "create", "insert", "append")),
    Program("str_replace_editor", files=False, subcommands=True),
    Program("str_replace_editor view", files=False, op="read"),
    *(Program("str_replace_editor " + sub, files=False, op="edit")
      for sub in ("create", "str_replace", "insert", "undo_edit")),
)  # fmt: skip

_PACKAGE = ("pc", _names("package call"))
_UV_LONG = _names(
    "with python project directory extra group package env-file with-requirements index from"
    " only-group"
)
WRAPPERS = (
    *(Wrapper(name) for name in ("time", "nohup", "command", "builtin", "exec")),
    Wrapper("env", "", "uCS", _names("unset chdir split-string")),
    Wrapper("nice", "", "n", _names("adjustment")),
    Wrapper("timeout", "", "sk", _names("signal kill-after"), operands=1),
    Wrapper("xargs", "", "IaEdLnPs", _names("max-args max-procs delimiter")),
    *(Wrapper(name, "", *_PACKAGE) for name in ("npx", "bunx")),
    *(Wrapper(n, sub, *_PACKAGE) for n, sub in (("npm", "exec"), ("pnpm", "exec"),
                                                ("pnpm", "dlx"), ("yarn", "dlx"))),
    *(Wrapper(n, "run", "p", _UV_LONG) for n in ("uv", "poetry", "pipenv", "pdm", "hatch")),
    Wrapper("python", short="XW", module="-m", stop=_names("-c"), versioned=True),
)  # fmt: skip

_TEST_WORDS = _names("test t nextest")
_NPM_RUN = _names("run run-script")
RUNNERS = (
    *(Runner(p, "test") for p in _names(
        "pytest py.test unittest jest vitest mocha rspec tox nox ava phpunit ctest")),
    *(Runner(p, "build") for p in ("make", "gmake", "tsc", "webpack")),
    Runner("npm", "test", _names("test"), through=_NPM_RUN, scoped="prefix",
           direct=_names("t tst")),
    *(Runner(p, "test", _names("test"), through=_NPM_RUN, scoped="prefix")
      for p in ("yarn", "pnpm", "bun")),
    *(Runner(p, "build", _names("build"), through=_NPM_RUN, scoped="prefix")
      for p in ("npm", "yarn", "pnpm", "bun")),
    *(Runner(p, "test", _TEST_WORDS) for p in ("go", "cargo", "dotnet", "deno")),
    *(Runner(p, "build", _names("build b")) for p in ("go", "cargo", "dotnet", "vite")),
    *(Runner(p, "test", _names("test"), anywhere=True) for p in ("mvn", "mvnw")),
    *(Runner(p, "build", _names("package install compile"), anywhere=True)
      for p in ("mvn", "mvnw")),
    *(Runner(p, "test", _names("test"), anywhere=True, scoped="suffix")
      for p in ("gradle", "gradlew")),
    *(Runner(p, "build", _names("build"), anywhere=True, scoped="suffix")
      for p in ("gradle", "gradlew")),
    *(Runner(p, "build", _names("assemble"), anywhere=True) for p in ("gradle", "gradlew")),
)  # fmt: skip


# --------------------------------------------------------------------------------------------
# Rows from config: the [canonical] table
# --------------------------------------------------------------------------------------------

_ROWS: dict[str, type[Any]] = {"programs": Program, "wrappers": Wrapper, "runners": Runner}
_OPS = ("", *OPERATIONS)
_CHOICES = {
    "kind": ("test", "build"),
    "op": _OPS,
    "file_op": _OPS,
    "scoped": ("", "prefix", "suffix"),
}


def rows_of_table(table: Mapping[str, Any], source: str = "config") -> dict[str, list[Any]]:
    """The rows of a ``[canonical]`` table: ``programs``, ``wrappers`` and ``runners``.

    The table holds arrays of tables of those names; each row's keys are the fields of
    :class:`Program`, :class:`Wrapper` or :class:`Runner` (lists of strings for sets, a table
    of flag to operation for ``op_flags``).

    Raises:
        ConfigError: an unknown key or a value of the wrong kind, named in one line.
    """
    from antiloop.core.text.suggest import unknown

    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: [canonical] must be a table, not {table!r}")
    rows: dict[str, list[Any]] = {name: [] for name in _ROWS}
    for name, value in table.items():
        if name not in _ROWS:
            raise ConfigError(f"{source}: [canonical] {unknown('key', name, _ROWS)}")
        if not isinstance(value, list) or not all(isinstance(r, Mapping) for r in value):
            raise ConfigError(f"{source}: [canonical] {name!r} must be an array of tables")
        rows[name] = [_row(_ROWS[name], r, f"{source}: [[canonical.{name}]]") for r in value]
    return rows


def _row(cls: type[Any], data: Mapping[str, Any], where: str) -> Any:
    from antiloop.core.text.suggest import unknown

    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        f = known.get(key)
        if f is None:
            raise ConfigError(f"{where} {unknown('key', key, known)}")
        values[key] = _value(key, value, f.default, where)
    missing = [f.name for f in fields(cls) if f.default is MISSING and f.name not in values]
    if missing:
        raise ConfigError(f"{where} needs {missing[0]!r}")
    return cls(**values)


def _value(key: str, value: Any, default: Any, where: str) -> Any:
    """A row's value of the kind of its field's default (a set or list: strings)."""

    def bad(kind: str) -> ConfigError:
        return ConfigError(f"{where} {key!r} must be {kind}, not {value!r}")

    if key == "op_flags":
        if not isinstance(value, Mapping) or not all(
            isinstance(v, str) and v in OPERATIONS for v in value.values()
        ):
            raise bad(f"a table of flag to operation ({', '.join(OPERATIONS)})")
        return tuple((str(k), str(v)) for k, v in value.items())
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad("an integer >= 0")
        return value
    if isinstance(default, frozenset | tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad("a list of strings")
        return frozenset(value) if isinstance(default, frozenset) else tuple(value)
    if not isinstance(value, str) or (key in ("name", "program") and not value.strip()):
        raise bad("a string" if key not in ("name", "program") else "a name")
    choices = _CHOICES.get(key)
    if choices is not None and value not in choices:
        raise bad("one of " + ", ".join(repr(c) for c in choices))
    return value
