"""Same procedure (docs/protocol.md section 3): operations, canonical parameters and context.

``procedure_of(tool, args, paths, cwd)`` turns one tool call into a :class:`Procedure`. Two
steps are the same procedure exactly when their ``key`` strings are equal. The work is a chain
of small pure steps:

1. the **operation** (3.1): the tool table, or for a shell tool the command it runs, read by
   the shell engine (``antiloop.core.shell``) over the rows of the rule set passed in
   (``antiloop.core.rules``: programs and their flags, wrappers such as ``npx``, ``timeout 5``,
   ``VAR=x``, run kinds), a leading ``cd DIR &&`` and chains looked through;
2. the **parameters** (3.2, ``antiloop.core.forms``): JSON forms (key order, ``10`` = ``10.0``,
   surrounding white space), shell words (quoting and spacing vanish; flags commute for the
   search and list programs), multi-line bodies (trailing spaces aside), paths (``./a/b`` =
   ``a/b/`` = ``/cwd/a/b``) and search patterns as word sequences (``double.*Jump`` =
   ``doubleJump``);
3. the **context** (3.3): the files and file patterns touched, after path canonicalisation.

One cache at the top: the procedures of recent calls with scalar arguments, by
:data:`CallKey` (the rule set among it, by identity). The rules are an argument: the built-in
rows by default, a config's (``antiloop.core.rules.ruleset.load_rules``) where the guard's
``Policy`` carries them.

Example:
    >>> procedure_of("Bash", {"command": "grep -rn 'double.*Jump' src/"}).context
    'double jump@src'
    >>> procedure_of("Grep", {"pattern": "doubleJump", "path": "./src"}).context
    'double jump@src'
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, cast

from antiloop.core.forms import (
    canonical_json,
    canonical_path,
    canonical_text,
    canonical_value,
    dumps,
    key_params,
    pattern_words,
    render,
)
from antiloop.core.rules.ruleset import BUILTIN, Rules
from antiloop.core.shell.shapes import shell
from antiloop.core.text.patterns import Patterns

__all__ = [
    "CallKey",
    "Procedure",
    "canonical_json",
    "canonical_path",
    "canonical_value",
    "operation_of_tool",
    "pattern_words",
    "procedure_of",
]


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
# 3.1 The tool table
# --------------------------------------------------------------------------------------------


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TOOLS = {
    "grep": "grep grep_search search_files search_file_content find_in_files ripgrep"
    " search_dir search_file",  # the last two: SWE-agent's commands
    "read": "read read_file read_many_files view_file open_file cat",
    "edit": "edit multiedit write notebookedit edit_file write_file write_to_file create_file"
    " replace apply_diff apply_patch str_replace str_replace_editor str_replace_based_edit_tool"
    " file_editor insert_content",  # file_editor: the OpenHands agent SDK's editor
    "list": "glob ls list_dir list_directory list_files find_files find_by_name find_file",
    "search": "websearch web_search google_search search_web",
    "fetch": "webfetch web_fetch fetch browse",
}
_TABLE = {name: op for op, names in _TOOLS.items() for name in names.split()}
_SHELL_TOOLS = _names(
    "bash shell sh terminal run_shell_command run_command execute_command execute_bash"
    " exec_command run_terminal_cmd local_shell run_in_terminal"
)
_EDITOR_TOOLS = _names("str_replace_editor str_replace_based_edit_tool file_editor")
_EDITOR_TEXT_KEYS = ("old_str", "new_str", "file_text", "insert_line", "content")
_NOT_RUNS = frozenset(_TOOLS)
_TOOL_CHARS = Patterns(other=r"[^a-z0-9._-]")
# Argument keys that are the agent's commentary, not parameters of the call.
_COMMENTARY = _names("thought explanation impl_source confirmation_state security_risk")
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
    return _TOOL_CHARS.other.sub("-", low)


def _context_json(canon: dict[str, Any]) -> str:
    """The context of a tool outside the table: its canonical JSON, long strings cut at 200.

    The context is cut to 80 characters later, so the cut strings change nothing there.
    """
    if any(type(v) is str and len(v) > 200 for v in canon.values()):
        canon = {k: v[:200] if type(v) is str else v for k, v in canon.items()}
    return dumps(canon)


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
    return Procedure(op, key, context, ordered, programs, op not in _NOT_RUNS, parts)


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
            if type(v) is str:  # ``_path_value`` inlined for the common case
                c = canonical_path(v, cwd)
                if c is None:
                    canon[k] = v.strip()
                else:
                    found.append(c)
                    canon[k] = c
            else:
                canon[k] = _path_value(v, cwd, found)
        elif k in pattern_keys:
            canon[k] = _pattern_value(v, patterns)
        elif table and k in _COMMENTARY:
            continue
        elif type(v) is str:
            canon[k] = v.strip() if "\n" not in v else canonical_text(v)
        else:
            canon[k] = canonical_value(v)
    # a step's paths come from JSON: not always strings (compiled code checks the type)
    for p in cast("Sequence[object]", paths):
        c = canonical_path(p, cwd) if isinstance(p, str) else None
        if c is not None:
            found.append(c)
    params = key_params(canon)
    ordered = found if len(found) < 2 else list(dict.fromkeys(found))
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
            return " ".join(render(w) for w in value)
    action = args.get("action")
    if isinstance(action, Mapping):
        return _command_of(action)
    return None


def procedure_of(
    tool: str,
    args: Mapping[str, Any],
    paths: Sequence[str] = (),
    cwd: str | None = None,
    rules: Rules = BUILTIN,
) -> Procedure:
    """The canonical procedure of one tool call (docs/protocol.md section 3).

    Args:
        tool: the tool name as the agent framework calls it (``Grep``, ``Bash``, ``edit_file``…).
        args: the tool's arguments as sent.
        paths: files or file patterns the step touched beyond ``args``.
        cwd: the working directory; absolute paths under it become relative.
        rules: the rows shell commands are read by (programs, wrappers, runners).

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
        return _procedure(tool, args, paths, cwd, rules)
    key: CallKey = (tool, cwd, paths if type(paths) is tuple else tuple(paths), items, rules)
    try:
        known = _known.get(key)
    except TypeError:  # a path that cannot be part of a key
        return _procedure(tool, args, paths, cwd, rules)
    if known is None:
        known = _known[key] = _procedure(tool, args, paths, cwd, rules)
        if len(_known) > _KNOWN:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # evicted already
                del _known[next(iter(_known))]
    return known


CallKey: TypeAlias = tuple[
    str, str | None, tuple[str, ...], tuple[tuple[str, type, object], ...], Rules
]
"""The cache's key: (tool, cwd, paths, the arguments as (name, type, value) in their order,
the rule set)."""
_known: dict[CallKey, Procedure] = {}
"""Procedures of recent calls whose arguments are all scalars, first in, first out."""
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
    tool: str, args: Mapping[str, Any], paths: Sequence[str], cwd: str | None, rules: Rules
) -> Procedure:
    """``procedure_of`` without the cache."""
    low = tool.lower()
    if low in _SHELL_TOOLS:
        command = _command_of(args)
        if command is None:
            return _json_procedure("bash", args, paths, cwd, True)
        kind, params, context, found, programs, parts = shell(command, cwd, rules)
        extra = {
            k: v
            for k, v in args.items()
            if k not in _SHELL_COMMENTARY and k not in _COMMAND_KEYS and k != "action"
        }
        if not extra and not paths:
            return _make(kind, params, context, found, programs, (), parts)
        # a step's paths come from JSON: not always strings (compiled code checks the type)
        loose = cast("Sequence[object]", paths)
        more = [c for p in loose if isinstance(p, str) and (c := canonical_path(p, cwd))]
        if extra:
            params += "\x1f" + canonical_json(extra)
        return _make(kind, params, context, (*found, *more), programs, more, parts)
    op = operation_of_tool(tool)
    assert op is not None  # noqa: S101  (only shell tools have no table operation)
    if low in _EDITOR_TOOLS:
        command = args.get("command")
        if command == "view" or (command is None and not any(k in args for k in _EDITOR_TEXT_KEYS)):
            op = "read"
    return _json_procedure(op, args, paths, cwd, low in _TABLE)
