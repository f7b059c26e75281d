"""Same procedure (docs/protocol.md section 3): operations, canonical parameters and context.

``procedure_of(tool, args, paths, cwd)`` turns one tool call into a :class:`Procedure`. Two
steps are the same procedure exactly when their ``key`` strings are equal. The work is a chain
of small pure steps:

1. the **operation** (3.1): the tool table, or for a shell tool the command it runs, looking
   through wrappers (``npx``, ``timeout 5``, ``VAR=x``, a leading ``cd DIR &&``…) and chains;
2. the **parameters** (3.2): JSON forms (key order, ``10`` = ``10.0``, surrounding white space),
   shell words (quoting and spacing vanish; flags commute for the search and list programs),
   multi-line bodies (trailing spaces aside), paths (``./a/b`` = ``a/b/`` = ``/cwd/a/b``) and
   search patterns as word sequences (``double.*Jump`` = ``doubleJump``);
3. the **context** (3.3): the files and file patterns touched, after path canonicalisation.

Shell parsing is cached per (command, cwd): an agent's repeats hit the cache.

Example:
    >>> procedure_of("Bash", {"command": "grep -rn 'double.*Jump' src/"}).context
    'double jump@src'
    >>> procedure_of("Grep", {"pattern": "doubleJump", "path": "./src"}).context
    'double jump@src'
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cached_property, lru_cache
from typing import Any, cast

from antiloop._shell import INPUTS as _INPUTS
from antiloop._shell import WRITES as _WRITES
from antiloop._shell import Command as _Cmd
from antiloop._shell import Token as _Token
from antiloop._shell import commands as _commands
from antiloop._shell import tokenize as _tokenize

__all__ = [
    "Procedure",
    "canonical_json",
    "canonical_path",
    "canonical_value",
    "operation_of_tool",
    "pattern_words",
    "procedure_of",
]


def _source(pattern: str, flags: int = 0) -> tuple[str, int]:
    """A pattern's source and flags, compiled by ``_Patterns`` on first use."""
    return pattern, flags


class _Patterns:
    """The regular expressions, each compiled on first use (a hook process reads one step).

    After its first use a pattern is a plain instance attribute.
    """

    @cached_property
    def tool_chars(self) -> re.Pattern[str]:
        return re.compile(*_TOOL_CHARS_SRC)

    @cached_property
    def trailing_ws(self) -> re.Pattern[str]:
        return re.compile(*_TRAILING_WS_SRC)

    @cached_property
    def url(self) -> re.Pattern[str]:
        return re.compile(*_URL_SRC)

    @cached_property
    def word_run(self) -> re.Pattern[str]:
        return re.compile(*_WORD_RUN_SRC)

    @cached_property
    def regex_noise(self) -> re.Pattern[str]:
        return re.compile(*_REGEX_NOISE_SRC)

    @cached_property
    def case_split(self) -> re.Pattern[str]:
        return re.compile(*_CASE_SPLIT_SRC)

    @cached_property
    def quoted_words(self) -> re.Pattern[str]:
        return re.compile(*_QUOTED_WORDS_SRC)

    @cached_property
    def not_quoted_words(self) -> re.Pattern[str]:
        return re.compile(*_NOT_QUOTED_WORDS_SRC)

    @cached_property
    def simple_command(self) -> re.Pattern[str]:
        return re.compile(*_SIMPLE_COMMAND_SRC)

    @cached_property
    def digits(self) -> re.Pattern[str]:
        return re.compile(*_DIGITS_SRC)

    @cached_property
    def assign(self) -> re.Pattern[str]:
        return re.compile(*_ASSIGN_SRC)

    @cached_property
    def python(self) -> re.Pattern[str]:
        return re.compile(*_PYTHON_SRC)

    @cached_property
    def ext(self) -> re.Pattern[str]:
        return re.compile(*_EXT_SRC)

    @cached_property
    def not_pathy(self) -> re.Pattern[str]:
        return re.compile(*_NOT_PATHY_SRC)

    @cached_property
    def sed_script(self) -> re.Pattern[str]:
        return re.compile(*_SED_SCRIPT_SRC)

    @cached_property
    def safe_word(self) -> re.Pattern[str]:
        return re.compile(*_SAFE_WORD_SRC)


_RX = _Patterns()


@dataclass(frozen=True, slots=True)
class Procedure:
    """What a step did, in canonical form: equal ``key`` means the same procedure (section 3).

    Attributes:
        operation: the section 3.1 operation (``grep``, ``read``, ``edit``, ``list``, ``search``,
            ``fetch``, ``test``, ``build``, ``bash``) or another tool's normalised name.
        key: the canonical identity: operation, canonical parameters and context.
        context: the section 6 fingerprint context, not yet cut to 80 characters.
        paths: canonical paths and file patterns touched (section 3.3), sorted, deduplicated.
        programs: for shell tools, the programs run (after wrappers); ``()`` otherwise.
        parts: for shell tools, ``(program, operation)`` of each simple command of the chain,
            in order (``""`` for a command without a program); ``()`` otherwise.
        runs_something: True for ``bash``/``test``/``build`` and tools outside the table.

    Example:
        >>> p = procedure_of("Read", {"file_path": "/w/src/a.ts"}, cwd="/w")
        >>> (p.operation, p.context, p.paths)
        ('read', 'src/a.ts', ('src/a.ts',))
    """

    operation: str
    key: str
    context: str
    paths: tuple[str, ...]
    programs: tuple[str, ...]
    runs_something: bool
    parts: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------------------------
# 3.1 The operation table
# --------------------------------------------------------------------------------------------


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TABLE: dict[str, str] = {}
for _op, _tool_names in (
    (
        "grep",
        "grep grep_search search_files search_file_content find_in_files ripgrep"
        " search_dir search_file",  # the last two: SWE-agent's commands
    ),
    ("read", "read read_file read_many_files view_file open_file cat"),
    (
        "edit",
        "edit multiedit write notebookedit edit_file write_file write_to_file create_file replace"
        " apply_diff apply_patch str_replace str_replace_editor str_replace_based_edit_tool"
        " file_editor insert_content",  # file_editor: the OpenHands agent SDK's editor
    ),
    (
        "list",
        "glob ls list_dir list_directory list_files find_files find_by_name find_file",
    ),
    ("search", "websearch web_search google_search search_web"),
    ("fetch", "webfetch web_fetch fetch browse"),
):
    for _name in _tool_names.split():
        _TABLE[_name] = _op

_SHELL_TOOLS = _names(
    "bash shell sh terminal run_shell_command run_command execute_command execute_bash"
    " exec_command run_terminal_cmd local_shell run_in_terminal"
)
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "file_editor"})
_EDITOR_TEXT_KEYS = ("old_str", "new_str", "file_text", "insert_line", "content")
_NOT_RUNS = frozenset({"grep", "read", "edit", "list", "search", "fetch"})
_RANK = {"bash": 0, "read": 1, "list": 2, "grep": 3, "edit": 4, "build": 5, "test": 6}
_TOOL_CHARS_SRC = _source(r"[^a-z0-9._-]")

# Argument keys that are the agent's commentary, not parameters of the call.
_COMMENTARY = frozenset(
    {"thought", "explanation", "impl_source", "confirmation_state", "security_risk"}
)
# Shell tools also carry a human description of the command (Claude Code's Bash).
_SHELL_COMMENTARY = _COMMENTARY | {"description"}
_COMMAND_KEYS = ("command", "cmd", "script", "input")


def operation_of_tool(tool: str) -> str | None:
    """The table operation for a tool name (case-insensitive); None for shell tools.

    Another tool's operation is its name lower-cased, characters other than ``a-z0-9._-``
    made ``-``.

    Example:
        >>> operation_of_tool("Grep"), operation_of_tool("Bash"), operation_of_tool("My Tool")
        ('grep', None, 'my-tool')
    """
    low = tool.lower()
    if low in _SHELL_TOOLS:
        return None
    op = _TABLE.get(low)
    if op is not None:
        return op
    return _RX.tool_chars.sub("-", low)


# --------------------------------------------------------------------------------------------
# 3.2 JSON forms, multi-line bodies, paths, pattern words
# --------------------------------------------------------------------------------------------

_TRAILING_WS_SRC = _source(r"[ \t\r\f\v]+(?=\n|\Z)")


def _lines(text: str) -> str:
    """A multi-line body: trailing spaces of each line and blank lines around it vanish."""
    return "\n".join([line.rstrip() for line in text.split("\n")]).strip("\n")


def _canon_text(text: str) -> str:
    """A string parameter: surrounding white space vanishes; a multi-line body keeps its lines.

    A multi-line body compares verbatim except trailing spaces on each line and blank lines
    around it; indentation is content.
    """
    if "\n" not in text:
        return text.strip()
    return _lines(text)


def canonical_value(value: Any) -> Any:
    """A JSON value in canonical form: integral floats as ints, strings trimmed, nested too.

    Example:
        >>> canonical_value({"b": 10.0, "a": [" x ", 1.5]})
        {'b': 10, 'a': ['x', 1.5]}
    """
    t = type(value)
    if t is str:
        return _canon_text(value)
    if t is bool or t is int or value is None:
        return value
    if t is float:
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        return _canon_text(str(value))
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return canonical_value(float(value))
    if isinstance(value, Mapping):
        return {str(k): canonical_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical_value(v) for v in value]
    return str(value)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys of a canonical value (``canonical_value`` applied first).

    Example:
        >>> canonical_json({"b": 10.0, "a": " x "})
        '{"a":"x","b":10}'
    """
    return _dumps(canonical_value(value))


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode_str: Any = json.encoder.encode_basestring
_LONG = 256  # strings longer than this go into keys raw (length-prefixed), not JSON-escaped


def _dumps(value: Any) -> str:
    """Compact JSON with sorted keys (a flat object is written without the encoder's setup)."""
    if type(value) is dict:
        return (
            "{" + ",".join([_encode_str(k) + ":" + _scalar(value[k]) for k in sorted(value)]) + "}"
        )
    return _ENCODER.encode(value)


def _dumps_items(items: list[Any]) -> str:
    """``_dumps`` of a shell key: a list of strings and lists of strings (no encoder setup)."""
    parts = []
    for item in items:
        if type(item) is str:
            parts.append(_encode_str(item))
        elif type(item) is list and all(type(w) is str for w in item):
            parts.append("[" + ",".join(map(_encode_str, item)) + "]")
        else:
            return _ENCODER.encode(items)
    return "[" + ",".join(parts) + "]"


def _scalar(v: Any) -> str:
    t = type(v)
    if t is str:
        return str(_encode_str(v))
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if t is int:
        return int.__repr__(v)
    return _ENCODER.encode(v)


def _encode_key(key: str) -> str:
    return str(_encode_str(key))


def _key_params(canon: dict[str, Any]) -> str:
    """The parameters part of a key: like ``_dumps``, but long strings go raw, length-prefixed.

    JSON-escaping a kilobyte of editor text costs more than the rest of the procedure; a raw
    string behind a NUL and its length is just as unambiguous.
    """
    parts = []
    for k in sorted(canon):
        v = canon[k]
        if type(v) is str and len(v) > _LONG:
            parts.append(f"{_encode_key(k)}:\x00{len(v)}:{v}")
        else:
            parts.append(_encode_key(k) + ":" + _scalar(v))
    return "{" + ",".join(parts) + "}"


def _context_json(canon: dict[str, Any]) -> str:
    """The context of a tool outside the table: its canonical JSON, long strings cut at 200.

    The context is cut to 80 characters later, so the cut strings change nothing there.
    """
    if any(type(v) is str and len(v) > 200 for v in canon.values()):
        canon = {k: v[:200] if type(v) is str else v for k, v in canon.items()}
    return _dumps(canon)


_URL_SRC = _source(r"^[A-Za-z][A-Za-z0-9+.-]*://")


# a step takes 1.1% more instructions without this cache (bench/results/compiled.md)
@lru_cache(maxsize=4096)
def canonical_path(path: str, cwd: str | None = None) -> str | None:
    """A path in canonical form, or None when the text is not a path (a URL, ``./...``).

    ``./a/b``, ``a/b/``, ``a//b`` and an absolute path under ``cwd`` all become ``a/b``;
    ``.`` stays ``.`` (an explicit ``.`` is not an implicit one); ``..`` is kept.

    Example:
        >>> canonical_path("./src//app/"), canonical_path("/w/src", "/w"), canonical_path("./...")
        ('src/app', 'src', None)
    """
    p = path.strip()
    if not p or "..." in p or _RX.url.match(p):
        return None
    absolute = p.startswith("/")
    if "/" in p or p.startswith("."):
        parts = [s for s in p.split("/") if s and s != "."]
        p = "/".join(parts)
        if absolute:
            p = "/" + p
        elif not p:
            p = "."
    if absolute and cwd:
        base = canonical_path(cwd)
        if base and base.startswith("/"):
            if p == base:
                return "."
            if base == "/":
                return p[1:] or "."
            if p.startswith(base + "/"):
                return p[len(base) + 1 :]
    return p


_WORD_RUN_SRC = _source(r"[^\W_]+|\|")
_REGEX_NOISE_SRC = _source(
    r"\\."  # escapes: \b \s \w \d vanish, and so do escaped punctuation marks (\[ \.)
    r"|\[\^?\]?(?:\[:[a-z]+:\]|[^\]])*\]"  # bracket classes, with POSIX classes inside
    r"|\{\d*(?:,\d*)?\}"  # counted repetition {2,3}
    r"|\(\?[A-Za-z-]*\)"  # inline flags (?i)
)
_CASE_SPLIT_SRC = _source(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _noise(m: re.Match[str]) -> str:
    """Regex syntax vanishes, except an escaped bar (basic-regex alternation), read as ``|``."""
    return "|" if m.group() == "\\|" else " "


def _split_case(run: str) -> list[str]:
    if run.isascii():
        return _RX.case_split.sub(" ", run).split()
    words: list[str] = []
    start = 0
    for i in range(1, len(run)):
        prev, cur = run[i - 1], run[i]
        nxt = run[i + 1] if i + 1 < len(run) else ""
        if (cur.isupper() and (prev.islower() or prev.isdigit())) or (
            prev.isupper() and cur.isupper() and nxt.islower()
        ):
            words.append(run[start:i])
            start = i
    words.append(run[start:])
    return words


def pattern_words(pattern: str) -> str:
    """A search pattern's word sequence, words lower-cased and joined by one space.

    Words split at every character that is not a letter or digit and at case boundaries;
    regex escapes, bracket classes and counted repetitions vanish; ``|`` stays a word.

    Example:
        >>> pattern_words("double.*Jump"), pattern_words("HTTPServer|foo_bar")
        ('double jump', 'http server | foo bar')
    """
    pattern = pattern.strip()
    text = (
        _RX.regex_noise.sub(_noise, pattern)
        if ("\\" in pattern or "[" in pattern or "{" in pattern or "(?" in pattern)
        else pattern
    )
    words: list[str] = []
    for run in _RX.word_run.findall(text):
        if run == "|" or run.islower() or run.isdigit():
            words.append(run)
        else:
            words.extend(w.lower() for w in _split_case(run))
    if pattern and (
        not pattern[0].isalnum() or not pattern[-1].isalnum() or pattern[-2:-1] == "\\"
    ):
        return _with_edges(pattern, words)
    return " ".join(words)


def _edge_length(pattern: str, step: int) -> int:
    """How many characters at one end of a pattern are no letter or digit (escapes whole)."""
    n = len(pattern)
    i = 0
    while i < n:
        if step > 0:
            # an escape, a bracket class or inline flags is one edge: ``\\b``, ``[Ff]``, ``(?i)``
            noise = _RX.regex_noise.match(pattern, i)
            if noise is not None:
                i = noise.end()
                continue
            if pattern[i].isalnum():
                break
        else:
            at = n - 1 - i
            if at >= 1 and pattern[at - 1] == "\\":
                i += 2
                continue
            open_ = pattern.rfind("[", 0, at - 1) if pattern[at] == "]" else -1
            cls = _RX.regex_noise.match(pattern, open_) if open_ >= 0 else None
            if cls is not None and cls.end() == at + 1:  # a bracket class ends the pattern
                i = n - open_
                continue
            if pattern[at].isalnum():
                break
        i += 1
    return min(i, n)


def _with_edges(pattern: str, words: list[str]) -> str:
    r"""Keep a pattern's leading and trailing non-word runs as words: they narrow the search.

    ``_serialize`` is not ``serialize``, ``^init`` is not ``init``, ``\bfoo\b`` is not
    ``foo`` (section 3.2); a pattern without a letter or digit is one word, itself.
    """
    lead = _edge_length(pattern, 1)
    if lead >= len(pattern) or not words:
        return pattern
    trail = _edge_length(pattern, -1)
    edges = _edge_word(pattern[:lead])
    tail = _edge_word(pattern[len(pattern) - trail :])
    return " ".join([*edges, *words, *tail])


def _edge_word(edge: str) -> list[str]:
    """An edge as a word: white space and ``|`` (already a word of its own) left out."""
    word = edge.replace("|", "").strip() if "|" in edge else edge.strip()
    return [word] if word else []


# --------------------------------------------------------------------------------------------
# Shell: the fast path of simple commands (the rest is antiloop._shell)
# --------------------------------------------------------------------------------------------

_QUOTED_WORDS_SRC = _source(r"(?:[^\s']+|'[^']*')+")
_NOT_QUOTED_WORDS_SRC = _source(r"[\"\\$`;&|<>()#\n\r]")
_SIMPLE_COMMAND_SRC = _source(r"[A-Za-z0-9_./=:@%+,*?~^-]+(?: +[A-Za-z0-9_./=:@%+,*?~^-]+)*")
_DIGITS_SRC = _source(r"\d+")


# --------------------------------------------------------------------------------------------
# Shell: commands, wrappers, program tables
# --------------------------------------------------------------------------------------------
class _Spec:
    """How a program reads its arguments: which flags take a value, what its operands are."""

    __slots__ = ("commute", "long", "no_pattern", "rest", "search", "short")

    def __init__(
        self,
        short: str = "",
        long: frozenset[str] = frozenset(),
        search: bool = False,
        commute: bool = False,
        rest: frozenset[str] = frozenset(),
        no_pattern: frozenset[str] = frozenset(),
    ) -> None:
        self.short = short  # short flags that take a value
        self.long = long  # long flags (without ``--``) that take a value
        self.search = search  # the first operand is a search pattern (grep family)
        self.commute = commute  # flags commute (search and list programs)
        self.rest = rest  # flags that take every word after them (fd -x)
        self.no_pattern = no_pattern  # with one of these, no operand is a pattern


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
_NO_PATTERN = frozenset({"-e", "--regexp", "-f", "--file"})  # grep -e X: operands are paths
_SPECS: dict[str, _Spec] = {
    "grep": _Spec("efmABCdD", _GREP_LONG, search=True, commute=True, no_pattern=_NO_PATTERN),
    "rg": _Spec(
        "efgtTABCmMdjrE",
        _RG_LONG,
        search=True,
        commute=True,
        no_pattern=_NO_PATTERN | {"--files", "--type-list"},
    ),
    "ag": _Spec(
        "ABCGgmpW",
        _names(
            "after before context file-search-regex max-count depth ignore ignore-dir"
            " path-to-ignore pager width workers color-line-number color-match color-path"
        ),
        search=True,
        commute=True,
        no_pattern=_NO_PATTERN | {"-g"},
    ),
    "ack": _Spec(
        "ABCmg",
        _names(
            "after-context before-context context max-count type ignore-dir noignore-dir"
            " ignore-file match output files-from pager color-filename color-match color-lineno"
        ),
        search=True,
        commute=True,
        no_pattern=_NO_PATTERN | {"-g", "-f", "--match"},
    ),
    "git grep": _Spec(
        "efmABC",
        _names("regexp file max-count after-context before-context context max-depth threads"),
        search=True,
        commute=True,
        no_pattern=_NO_PATTERN,
    ),
    "ls": _Spec(
        "IwT",
        _names(
            "ignore hide width tabsize block-size format sort time time-style quoting-style"
            " indicator-style"
        ),
        commute=True,
    ),
    "fd": _Spec(
        "etEdSocjxX",
        _names(
            "extension type exclude max-depth min-depth exact-depth size changed-within"
            " changed-before owner threads color exec exec-batch base-directory search-path"
            " path-separator max-results ignore-file batch-size format"
        ),
        commute=True,
        rest=_names("-x -X --exec --exec-batch"),
    ),
    "head": _Spec("nc", _names("lines bytes")),
    "tail": _Spec("ncs", _names("lines bytes sleep-interval pid max-unchanged-stats")),
    "cat": _Spec(),
    "less": _Spec("bhjpPtTxyzoOk", _names("pattern tag log-file tabs shift")),
    "more": _Spec("n"),
    "nl": _Spec(
        "bdfhilnsvw",
        _names(
            "body-numbering section-delimiter footer-numbering header-numbering line-increment"
            " join-blank-lines number-format number-separator starting-line-number"
            " number-width"
        ),
    ),
    "sed": _Spec("efl", _names("expression file line-length")),
    "tee": _Spec(),
    "patch": _Spec(
        "pidoDFrBVzYgx",
        _names("strip input directory output reject-file prefix suffix basename-prefix fuzz"),
    ),
    "tree": _Spec("LPIoHT", _names("filelimit charset sort timefmt")),
}
for _alias, _real in (("egrep", "grep"), ("fgrep", "grep"), ("ack-grep", "ack"), ("fdfind", "fd")):
    _SPECS[_alias] = _SPECS[_real]

_PATTERN_FLAGS = frozenset({"-e", "--regexp", "--match"})
_GLOB_FLAGS = frozenset({"--include", "-g", "--glob", "--iglob", "-G", "--file-search-regex"})
_READ_PROGRAMS = frozenset({"cat", "head", "tail", "less", "more", "nl"})
_TEST_PROGRAMS = _names("pytest py.test unittest jest vitest mocha rspec tox nox ava phpunit ctest")
_BUILD_PROGRAMS = frozenset({"make", "gmake", "tsc", "webpack"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_RESERVED = _names(
    "for while until if case select function done fi esac in then do else elif { } ! [[ ]]"
)
_SKIP_WORDS = frozenset({"then", "do", "else", "elif", "if", "while", "until", "!", "{"})
_FIND_PATTERNS = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex"}
)
_ASSIGN_SRC = _source(r"[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON_SRC = _source(r"python(?:\d+(?:\.\d+)*)?$")
_EXT_SRC = _source(r"\.[A-Za-z][A-Za-z0-9_]{0,9}$")
_NOT_PATHY_SRC = _source(r"[\s'\"`$;&|<>()\\{}=]")
_SED_SCRIPT_SRC = _source(r"^(?:\d+,?\d*)?[sy]([/|#:,@!]).*\1.*\1\w*$")


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _skip_opts(words: list[str], i: int, short: str = "", long: Iterable[str] = ()) -> int:
    """Index of the first word at or after ``i`` that is not an option of a wrapper."""
    n = len(words)
    while i < n:
        w = words[i]
        if w == "--":
            return i + 1
        if not w.startswith("-") or w == "-":
            return i
        if w.startswith("--"):
            i += 2 if ("=" not in w and w[2:] in long) else 1
        else:
            i += 2 if (len(w) == 2 and w[1] in short) else 1
    return i


_UV_LONG = _names(
    "with python project directory extra group package env-file with-requirements index from"
    " only-group"
)


def _unwrap(words: list[str]) -> int:
    """Index of the real command's first word, looking through wrappers (section 3.1)."""
    i, n = 0, len(words)
    while i < n:
        w = words[i]
        base = _base(w)
        nxt = words[i + 1] if i + 1 < n else ""
        if w in _SKIP_WORDS or (_RX.assign.match(w) and "/" not in w.split("=", 1)[0]):
            i += 1
        elif base in ("time", "nohup", "command", "builtin", "exec"):
            i = _skip_opts(words, i + 1)
        elif base == "env":
            i = _skip_opts(words, i + 1, "uCS", ("unset", "chdir", "split-string"))
        elif base == "nice":
            i = _skip_opts(words, i + 1, "n", ("adjustment",))
        elif base == "timeout":
            i = _skip_opts(words, i + 1, "sk", ("signal", "kill-after"))
            i += 1 if i < n else 0  # the duration
        elif base == "xargs":
            i = _skip_opts(words, i + 1, "IaEdLnPs", ("max-args", "max-procs", "delimiter"))
        elif base in ("npx", "bunx"):
            i = _skip_opts(words, i + 1, "pc", ("package", "call"))
        elif (base in ("npm", "pnpm") and nxt == "exec") or (
            base in ("pnpm", "yarn") and nxt == "dlx"
        ):
            i = _skip_opts(words, i + 2, "pc", ("package", "call"))
        elif base in ("uv", "poetry", "pipenv", "pdm", "hatch") and nxt == "run":
            i = _skip_opts(words, i + 2, "p", _UV_LONG)
        elif _RX.python.match(base):
            k = i + 1
            while k < n and words[k].startswith("-") and words[k] not in ("-m", "-c", "-"):
                k += 2 if words[k] in ("-X", "-W") else 1
            if k + 1 < n and words[k] == "-m":
                return k + 1  # the module is the program: python -m pytest runs pytest
            return i
        else:
            return i
    return i


def _parse_flags(args: list[str], spec: _Spec) -> tuple[list[tuple[str, str | None]], list[int]]:
    """Split arguments into flags (bundles split, values kept with them) and operand indices."""
    flags: list[tuple[str, str | None]] = []
    operands: list[int] = []
    dashdash = False
    i, n = 0, len(args)
    while i < n:
        w = args[i]
        i += 1
        if dashdash or w == "-" or not w.startswith("-"):
            operands.append(i - 1)
            continue
        if w == "--":
            dashdash = True
            continue
        if w in spec.rest:
            flags.append((w, "\x00".join(args[i:])))
            break
        if w.startswith("--"):
            name, eq, val = w.partition("=")
            if eq:
                flags.append((name, val))
            elif name[2:] in spec.long and i < n:
                flags.append((name, args[i]))
                i += 1
            else:
                flags.append((name, None))
            continue
        k, m = 1, len(w)
        while k < m:
            ch = w[k]
            if ch.isdigit():
                e = k
                while e < m and w[e].isdigit():
                    e += 1
                flags.append(("-" + w[k:e], None))
                k = e
            elif ch in spec.short:
                if k + 1 < m:
                    flags.append(("-" + ch, w[k + 1 :]))
                elif i < n:
                    flags.append(("-" + ch, args[i]))
                    i += 1
                else:
                    flags.append(("-" + ch, None))
                break
            else:
                flags.append(("-" + ch, None))
                k += 1
    return flags, operands


def _run_kind(prog: str, args: list[str]) -> str | None:
    """``test`` or ``build`` for the test runners and build tools of section 3.1, else None."""
    if prog in _TEST_PROGRAMS:
        return "test"
    if prog in _BUILD_PROGRAMS:
        return "build"
    ops = [a for a in args if not a.startswith("-")]
    sub = ops[0] if ops else ""
    if prog in ("npm", "yarn", "pnpm", "bun"):
        if sub in ("run", "run-script") and len(ops) > 1:
            sub = ops[1]
        elif prog == "npm" and sub in ("t", "tst"):
            sub = "test"
        if sub == "test" or sub.startswith("test:"):
            return "test"
        if sub == "build" or sub.startswith("build:"):
            return "build"
        return None
    if prog in ("go", "cargo", "dotnet", "deno", "vite"):
        if sub in ("test", "t", "nextest") and prog != "vite":
            return "test"
        if sub in ("build", "b") and prog != "deno":
            return "build"
        return None
    if prog in ("mvn", "mvnw"):
        if "test" in ops:
            return "test"
        if {"package", "install", "compile"} & set(ops):
            return "build"
        return None
    if prog in ("gradle", "gradlew"):
        if any(o == "test" or o.endswith(":test") for o in ops):
            return "test"
        if any(o in ("build", "assemble") or o.endswith(":build") for o in ops):
            return "build"
    return None


# --------------------------------------------------------------------------------------------
# Shell: one simple command, then the chain
# --------------------------------------------------------------------------------------------


def _pathlike(word: str) -> bool:
    """An operand that looks like a path: it contains ``/`` or ends in a file extension."""
    return (
        ("/" in word or _RX.ext.search(word) is not None)
        and not word.startswith("-")
        and _RX.not_pathy.search(word) is None
        and _RX.sed_script.match(word) is None
    )


def _verbatim(word: str) -> str:
    """A word kept as written, except the trailing spaces of a multi-line body's lines."""
    return _RX.trailing_ws.sub("", word) if "\n" in word else word


def _canon_word(word: str, cwd: str | None) -> str:
    """A shell word in canonical form: a multi-line body loses trailing spaces; paths canonical."""
    if "\n" in word:
        return _verbatim(word)
    if _pathlike(word):
        return canonical_path(word, cwd) or word
    return word


def _join(base: str | None, path: str, cwd: str | None) -> str:
    """``path`` (canonical) seen from the directory ``base`` of a leading ``cd``."""
    if base is None or path.startswith(("/", "~")):
        return path
    return canonical_path(base + "/" + path, cwd) or path


_SAFE_WORD_SRC = _source(r"[^\s'\"\\;&|<>()$`#]+")


def _render(word: str) -> str:
    """A word as it reads in a context: quoted only where needed."""
    if _RX.safe_word.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


class _Part:
    """The canonical reading of one simple command of a chain."""

    __slots__ = ("key", "op", "paths", "pattern", "program", "text")

    def __init__(self, key: list[str], text: list[str]) -> None:
        self.key = key
        self.text = text
        self.paths: list[str] = []
        self.op = "bash"
        self.program: str | None = None
        self.pattern: str | None = None


def _higher(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


def _analyse(cmd: _Cmd, cwd: str | None, base: str | None) -> _Part:
    """Operation, canonical words, paths and search pattern of one simple command."""
    words = cmd.words
    j = _unwrap(words)
    key = [_verbatim(w) for w in words[:j]]
    text = [_render(w) for w in key]
    part = _Part(key, text)
    paths = part.paths
    if j < len(words):
        _analyse_program(part, words[j], words[j + 1 :], cwd, base)
    # Standard input first: its place among the output redirections changes nothing.
    redirs = sorted(cmd.redirs, key=lambda r: not r.op.startswith(_INPUTS))
    for r in redirs:
        op = r.op
        bare = op.lstrip("0123456789")
        if r.heredoc:
            key.append(op + ("'" if r.quoted else "") + "\x00" + _RX.trailing_ws.sub("", r.target))
            text.append(op + "EOF")
            continue
        target = r.target
        if bare in (">&", "<&") and (target.isdigit() or target == "-"):
            key.append(op + target)
            text.append(op + target)
            continue
        if bare == "<<<":
            key.append(op + "\x00" + _canon_word(target, cwd))
            text.append(op + " " + _render(target))
            continue
        ct = target if target == "/dev/null" else (canonical_path(target, cwd) or target)
        key.append(op + "\x00" + ct)
        text.append(op + " " + _render(ct))
        if ct != "/dev/null":
            paths.append(_join(base, ct, cwd))
            if bare in _WRITES or bare == ">&":
                part.op = _higher(part.op, "edit")
    return part


def _analyse_program(
    part: _Part, prog_word: str, args: list[str], cwd: str | None, base: str | None
) -> None:
    """Fill ``part`` for the program ``prog_word`` run with ``args`` (wrappers already seen)."""
    key, text, paths = part.key, part.text, part.paths
    prog = _base(prog_word)
    name = prog
    head = [prog_word]
    if prog == "git":
        k = _skip_opts(args, 0, "Cc", ("git-dir", "work-tree", "namespace"))
        if k < len(args) and args[k] in ("grep", "apply"):
            if args[k] == "grep":
                name = "git grep"
            else:
                part.op = "edit"
            head += args[: k + 1]
            args = args[k + 1 :]
    if prog not in _RESERVED:
        part.program = prog
    spec = _SPECS.get(name)
    if spec is not None and spec.commute:
        _commuting(part, head, args, spec, cwd, base)
        return
    key.extend(_verbatim(w) for w in head)
    if spec is None:
        kind = _run_kind(prog, args)
        if prog == "find":
            part.op = "list"
        elif kind is not None:
            part.op = kind
        if prog == "find":  # only the start points are paths; tests keep their text
            k = _find_paths(args, cwd, base, paths)
            key.extend(_canon_word(w, cwd) for w in args[:k])
            key.extend(_verbatim(w) for w in args[k:])
        else:
            key.extend(_canon_word(w, cwd) for w in args)
        text.extend(_render(w) for w in key[len(text) :])
        if prog != "find":
            for w in args:
                c = canonical_path(w, cwd) if _pathlike(w) else None
                if c is not None:
                    paths.append(_join(base, c, cwd))
        return
    flags, operand_idx = _parse_flags(args, spec)
    names = {f for f, _ in flags}
    operands = [args[i] for i in operand_idx]
    skip = -1
    if prog == "sed":
        if not names & {"-e", "--expression", "-f", "--file"} and operand_idx:
            skip = operand_idx[0]
            operands = operands[1:]
        if "-i" in names or "--in-place" in names:
            part.op = "edit"
        elif names & {"-n", "--quiet", "--silent"}:
            part.op = "read"
    elif prog in _READ_PROGRAMS:
        part.op = "read"
    elif prog == "tree":
        part.op = "list"
    elif prog in ("tee", "patch"):
        operands = [o for o in operands if o != "/dev/null"]
        if operands or prog == "patch":
            part.op = "edit"
        if prog == "patch":
            operands += [v for f, v in flags if f in ("-i", "--input") and v]
    key.extend(w if i == skip else _canon_word(w, cwd) for i, w in enumerate(args))
    text.extend(_render(w) for w in key[len(text) :])
    if part.op == "bash":
        operands = [o for o in operands if _pathlike(o)]
    for o in operands:
        c = canonical_path(o, cwd)
        if c is not None and c != "-":
            paths.append(_join(base, c, cwd))


def _find_paths(args: list[str], cwd: str | None, base: str | None, paths: list[str]) -> int:
    """Add the start points of ``find`` and the file patterns of its tests (``-name '*.ts'``).

    Returns:
        The index of the first word of the expression (after the start points).
    """
    k, n = 0, len(args)
    while k < n and (args[k] in ("-H", "-L", "-P") or args[k].startswith("-O")):
        k += 1
    while k < n and not args[k].startswith(("-", "(", "!", ")")):
        c = canonical_path(args[k], cwd)
        if c is not None:
            paths.append(_join(base, c, cwd))
        k += 1
    paths.extend(
        canonical_path(args[m + 1], cwd) or args[m + 1]
        for m in range(k, n - 1)
        if args[m] in _FIND_PATTERNS
    )
    return k


def _commuting(
    part: _Part, head: list[str], args: list[str], spec: _Spec, cwd: str | None, base: str | None
) -> None:
    """A search or list program: flags split and sorted, the pattern read as its words."""
    flags, operand_idx = _parse_flags(args, spec)
    part.op = "grep" if spec.search else "list"
    operands = [args[i] for i in operand_idx]
    patterns: list[str] = []
    canon_flags: list[tuple[str, str | None]] = []
    globs: list[str] = []
    for f, v in flags:
        if v is not None and f in _PATTERN_FLAGS and spec.search:
            v = "\x01" + pattern_words(v)
            patterns.append(v[1:])
        elif v is not None and f in _GLOB_FLAGS:
            v = canonical_path(v, cwd) or v
            globs.append(v)
        canon_flags.append((f, v))
    canon_flags.sort(key=lambda fv: (fv[0], fv[1] or ""))
    pattern: str | None = None
    if spec.search and operands and not any(f in spec.no_pattern for f, _ in flags):
        pattern = pattern_words(operands.pop(0))
        patterns.insert(0, pattern)
    canon_ops = [canonical_path(o, cwd) or o for o in operands]
    key, text = part.key, part.text
    key.extend(head)
    key.extend(f if v is None else f + "\x00" + v for f, v in canon_flags)
    key.append("\x02")
    if pattern is not None:
        key.append("\x01" + pattern)
    key.extend(canon_ops)
    text.extend(_render(w) for w in head)
    for f, v in canon_flags:
        if v is None:
            text.append(f)
        else:
            v = " ".join(map(_render, v.lstrip("\x01").split("\x00")))  # fd -x: its words
            text.append(f + "=" + v if f.startswith("--") else f + " " + v)
    if pattern is not None:
        text.append(_render(pattern))
    text.extend(_render(o) for o in canon_ops)
    if patterns:
        part.pattern = " | ".join(patterns)
    part.paths.extend(_join(base, o, cwd) for o in canon_ops if o != "-")
    part.paths.extend(globs)


def _shell_script(words: list[str]) -> str | None:
    """The script of ``bash -lc SCRIPT`` / ``sh -c SCRIPT`` (no wrapper before it), else None."""
    if not words or _base(words[0]) not in _SHELLS:
        return None
    k, n = 1, len(words)
    while k < n and words[k].startswith(("-", "+")) and not words[k].startswith("--"):
        if "c" in words[k][1:]:
            return words[k + 1] if k + 1 < n else None
        k += 2 if words[k] in ("-o", "+o", "-O", "+O") else 1
    return None


def _tokens_of(command: str) -> list[_Token]:
    """The tokens of a command; plain words, and words with single quotes, skip the tokenizer."""
    if _RX.simple_command.fullmatch(command):
        return [("w", w) for w in command.split()]
    if command.count("'") % 2 == 0 and _RX.not_quoted_words.search(command) is None:
        # Only words and single-quoted strings: a quote is removed with what it quotes kept.
        return [("w", w.replace("'", "")) for w in _RX.quoted_words.findall(command)]
    return _tokenize(command)


def _shell_procedure(command: str, cwd: str | None) -> Procedure:
    """The procedure of a shell command, cached unless the command is long."""
    if len(command) <= _CACHED_COMMAND:
        return _cached_shell_procedure(command, cwd)
    return _parse_shell_procedure(command, cwd)


_CACHED_COMMAND = 8192  # longer commands (big heredocs) are parsed each time: bounded memory


def _parse_shell_procedure(command: str, cwd: str | None) -> Procedure:
    """The procedure of a shell command: operation, canonical words, paths and programs."""
    stripped = command.strip()
    if stripped.endswith("\\"):
        rest = command.lstrip()
        blank = rest[len(stripped) : len(stripped) + 1]
        odd = (len(stripped) - len(stripped.rstrip("\\"))) % 2 == 1
        if blank == "\n" and odd:  # a backslash-newline continues the line: bash drops both
            stripped = stripped[:-1].rstrip()
        elif blank.isspace() and blank != "\n":  # an escaped trailing blank is a word:
            stripped = rest  # ``printf \ `` prints a space
    command = stripped
    cmds = _commands(_tokens_of(command))
    if len(cmds) == 1 and not cmds[0].redirs and cmds[0].sep in ("", ";"):
        script = _shell_script(cmds[0].words)
        if script is not None:
            return _shell_procedure(script, cwd)
    items: list[Any] = []
    rendered: list[str] = []
    base: str | None = None
    start = 0
    while (
        start < len(cmds) - 1
        and cmds[start].sep in ("&&", ";")
        and not cmds[start].redirs
        and 1 <= len(cmds[start].words) <= 2
        and cmds[start].words[0] == "cd"
    ):
        words = cmds[start].words
        target = words[1] if len(words) == 2 else "~"
        ct = canonical_path(target, cwd) or target
        start += 1
        if ct == ".":
            continue
        items += [["cd", ct], cmds[start - 1].sep]
        rendered.append(f"cd {_render(ct)} {cmds[start - 1].sep} ")
        # a directory unknown here stays in the paths (``~/a.py``, not ``a.py``); ``cd -`` is
        # bash's ``cd "$OLDPWD"``
        base = _join(base, "$OLDPWD" if ct == "-" else ct, cwd)
    op = "bash"
    programs: list[str] = []
    parts: list[tuple[str, str]] = []
    paths: list[str] = []
    pattern: str | None = None
    for cmd in cmds[start:]:
        part = _analyse(cmd, cwd, base)
        op = _higher(op, part.op)
        if part.program is not None and part.program not in programs:
            programs.append(part.program)
        parts.append((part.program or "", part.op))
        paths.extend(part.paths)
        if pattern is None:
            pattern = part.pattern
        items.append(part.key)
        rendered.append(" ".join(part.text))
        if cmd.sep:
            items.append(cmd.sep)
            rendered.append("; " if cmd.sep == ";" else f" {cmd.sep} ")
    words_text = "".join(rendered).strip()
    ordered = list(dict.fromkeys(p for p in paths if p))
    if op == "grep" and (pattern is not None or ordered):
        context = (pattern or "") + ("@" + " ".join(ordered) if ordered else "")
    elif op in ("read", "edit", "list") and ordered:
        context = " ".join(ordered)
    else:
        context = words_text
    return _make(op, _dumps_items(items), context, ordered, tuple(programs), (), tuple(parts))


# a step takes 0.6% more instructions without this cache (bench/results/compiled.md)
_cached_shell_procedure = lru_cache(maxsize=1024)(_parse_shell_procedure)


def _make(
    op: str,
    params: str,
    context: str,
    paths: Sequence[str],
    programs: tuple[str, ...] = (),
    key_paths: Sequence[str] | None = None,
    parts: tuple[tuple[str, str], ...] = (),
) -> Procedure:
    """Build a procedure; its key is the operation, the parameters and the context's paths.

    ``key_paths`` are the paths the parameters do not already say (default: all of them).
    """
    ordered = tuple(paths) if len(paths) < 2 else tuple(sorted(set(paths)))
    if key_paths is None:
        key_paths = ordered
    elif len(key_paths) > 1:
        key_paths = sorted(set(key_paths))
    key = op + "\x1f" + params + "\x1f" + "\x1e".join(key_paths)
    p: Procedure = _new_object(Procedure)
    _SET_OPERATION(p, op)
    _SET_KEY(p, key)
    _SET_CONTEXT(p, context)
    _SET_PATHS(p, ordered)
    _SET_PROGRAMS(p, programs)
    _SET_PARTS(p, parts)
    _SET_RUNS(p, op not in _NOT_RUNS)
    return p


# ``Procedure(...)`` through its slots: a frozen dataclass's ``__init__`` is slow.
# (``Procedure.__new__`` and the fields by name also work compiled, where it is a native class)
_new_object = Procedure.__new__
_SETTERS: dict[str, Callable[[Procedure, Any], None]] = {
    f.name: getattr(Procedure, f.name).__set__ for f in fields(Procedure)
}
_SET_OPERATION = _SETTERS["operation"]
_SET_KEY = _SETTERS["key"]
_SET_CONTEXT = _SETTERS["context"]
_SET_PATHS = _SETTERS["paths"]
_SET_PROGRAMS = _SETTERS["programs"]
_SET_PARTS = _SETTERS["parts"]
_SET_RUNS = _SETTERS["runs_something"]


# --------------------------------------------------------------------------------------------
# Tools with JSON arguments, and the entry point
# --------------------------------------------------------------------------------------------

_PATH_KEYS = _names(
    "path file_path filepath file filename dir directory target_file paths notebook_path"
    " absolute_path dir_path target_directory relative_path relative_workspace_path"
)
_GLOB_KEYS = frozenset({"glob", "include", "include_pattern", "file_pattern"})
_PATTERN_KEYS = frozenset({"pattern", "regex", "query", "q", "search", "-e"})
_NO_KEYS: frozenset[str] = frozenset()
_PATH_KEYS_BY_OP = {"list": _PATH_KEYS | {"pattern"}, "grep": _PATH_KEYS | _GLOB_KEYS}


def _path_value(value: Any, cwd: str | None, found: list[str]) -> Any:
    """A path argument (a string or a list of them) in canonical form; paths go to ``found``."""
    if isinstance(value, str):
        c = canonical_path(value, cwd)
        if c is None:
            return value.strip()
        found.append(c)
        return c
    if isinstance(value, list | tuple):
        return [_path_value(v, cwd, found) for v in value]
    return canonical_value(value)


def _pattern_value(value: Any, found: list[str]) -> Any:
    if isinstance(value, str):
        words = pattern_words(value)
        found.append(words)
        return words
    if isinstance(value, list | tuple):
        return [_pattern_value(v, found) for v in value]
    return canonical_value(value)


def _json_procedure(
    op: str, args: Mapping[str, Any], paths: Sequence[str], cwd: str | None, table: bool
) -> Procedure:
    """The procedure of a tool with JSON arguments (everything but a shell command)."""
    canon: dict[str, Any] = {}
    found: list[str] = []
    patterns: list[str] = []
    path_keys = _PATH_KEYS_BY_OP.get(op, _PATH_KEYS)
    pattern_keys = _PATTERN_KEYS if op == "grep" else _NO_KEYS
    for k, v in args.items():
        if k in path_keys:
            canon[k] = _path_value(v, cwd, found)
        elif k in pattern_keys:
            canon[k] = _pattern_value(v, patterns)
        elif table and k in _COMMENTARY:
            continue
        elif type(v) is str:
            canon[k] = _canon_text(v)
        else:
            canon[k] = canonical_value(v)
    # a step's paths come from JSON: not always strings (compiled code checks the type)
    for p in cast("Sequence[object]", paths):
        c = canonical_path(p, cwd) if isinstance(p, str) else None
        if c is not None:
            found.append(c)
    params = _key_params(canon)
    ordered = list(dict.fromkeys(found))
    if op == "grep" and (patterns or ordered):
        context = " | ".join(patterns) + ("@" + " ".join(ordered) if ordered else "")
    elif op in ("read", "edit", "list") and ordered:
        context = " ".join(ordered)
    else:
        context = _context_json(canon)
    return _make(op, params, context, ordered)


def _command_of(args: Mapping[str, Any]) -> str | None:
    """The command a shell tool runs: a string, or a list of words (``["bash", "-lc", …]``)."""
    for name in _COMMAND_KEYS:
        value = args.get(name)
        if isinstance(value, str):
            return value
        if isinstance(value, list | tuple) and value and all(isinstance(w, str) for w in value):
            return " ".join(_render(w) for w in value)
    action = args.get("action")
    if isinstance(action, Mapping):
        return _command_of(action)
    return None


def procedure_of(
    tool: str, args: Mapping[str, Any], paths: Sequence[str] = (), cwd: str | None = None
) -> Procedure:
    """The canonical procedure of one tool call (docs/protocol.md section 3).

    Args:
        tool: the tool name as the agent framework calls it (``Grep``, ``Bash``, ``edit_file``…).
        args: the tool's arguments as sent.
        paths: files or file patterns the step touched beyond ``args``.
        cwd: the working directory; absolute paths under it become relative.

    Returns:
        The procedure; two calls are the same procedure exactly when their keys are equal.

    Example:
        >>> a = procedure_of("Bash", {"command": 'grep -rn "doubleJump" src/'})
        >>> b = procedure_of("bash", {"command": "grep  -nr 'double.*Jump' src"})
        >>> a.key == b.key, a.operation, a.context
        (True, 'grep', 'double jump@src')
    """
    items = _args_key(args)
    if items is None or len(paths) > 16:
        return _procedure(tool, args, paths, cwd)
    key = (tool, cwd, paths if type(paths) is tuple else tuple(paths), items)
    try:
        known = _known.get(key)
    except TypeError:  # a path that cannot be part of a key
        return _procedure(tool, args, paths, cwd)
    if known is None:
        known = _known[key] = _procedure(tool, args, paths, cwd)
        if len(_known) > _KNOWN:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # evicted already
                del _known[next(iter(_known))]
    return known


_known: dict[tuple[Any, ...], Procedure] = {}
"""Procedures of recent calls whose arguments are all scalars, by (tool, cwd, paths, args).

A step takes 1.8% more instructions without it (bench/results/compiled.md)."""
_KNOWN = 1024
_SCALARS = frozenset({str, int, float, bool, type(None)})
_CACHED_CHARS = 1024  # arguments with longer strings together (an editor's text) are not cached


def _args_key(args: Mapping[str, Any]) -> tuple[tuple[str, type, Any], ...] | None:
    """A cache key for arguments that are all scalars (by type too: ``1`` is not ``True``).

    The order stays: it orders the paths of a context. None when an argument is not a scalar
    or the strings are long (an editor's text): the cache stays small.
    """
    if type(args) is not dict or len(args) > 16:
        return None
    items = []
    chars = 0
    for k, v in args.items():
        t = type(v)
        if t not in _SCALARS or type(k) is not str:
            return None
        if t is str:
            chars += len(v)
        items.append((k, t, v))
    return tuple(items) if chars <= _CACHED_CHARS else None


def _procedure(
    tool: str, args: Mapping[str, Any], paths: Sequence[str], cwd: str | None
) -> Procedure:
    """``procedure_of`` without the cache."""
    low = tool.lower()
    if low in _SHELL_TOOLS:
        command = _command_of(args)
        if command is None:
            return _json_procedure("bash", args, paths, cwd, True)
        proc = _shell_procedure(command, cwd)
        extra = {
            k: v
            for k, v in args.items()
            if k not in _SHELL_COMMENTARY and k not in _COMMAND_KEYS and k != "action"
        }
        if not extra and not paths:
            return proc
        # a step's paths come from JSON: not always strings (compiled code checks the type)
        loose = cast("Sequence[object]", paths)
        more = [c for p in loose if isinstance(p, str) and (c := canonical_path(p, cwd))]
        params = proc.key.split("\x1f", 2)[1]
        if extra:
            params += "\x1f" + canonical_json(extra)
        return _make(
            proc.operation,
            params,
            proc.context,
            (*proc.paths, *more),
            proc.programs,
            more,
            proc.parts,
        )
    op = operation_of_tool(tool)
    assert op is not None  # noqa: S101  (only shell tools have no table operation)
    if low in _EDITOR_TOOLS:
        command = args.get("command")
        if command == "view" or (command is None and not any(k in args for k in _EDITOR_TEXT_KEYS)):
            op = "read"
    return _json_procedure(op, args, paths, cwd, low in _TABLE)
