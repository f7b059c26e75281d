"""What an edit step did: changed nothing, only comments or white space, or changed code.

The opt-in detectors (``antiloop.core.extra.detectors``) tell a hidden repeat or a cosmetic re-run
by the edits between two runs. What an edit did (``edit_effect``) is known from the step alone,
never guessed from what follows it:

- **changed nothing** (``noop``): the edit failed (an error or a non-zero exit) and it is an
  edit that writes nothing when it fails: an editor tool, ``sed -i`` or ``git apply`` (not a
  redirection, which empties its file first, nor ``patch``, which applies the hunks it can);
  or its output says it was not applied (``No replacement was performed``, SWE-agent's
  ``Your proposed edit has introduced new syntax error(s)``..., or an editor tool's output
  starts with ``ERROR:``, as OpenHands' does); or every file it touched has
  a sha256 equal to the last one the stream saw for that path; or its old and new text are
  equal; or it writes a whole file with exactly the content the stream last saw written there.
- **only comments or white space** (``cosmetic``): the editor's ``old_str``/``new_str`` (also
  ``old_string``/``new_string``, MultiEdit's ``edits``, an ``insert``'s ``new_str``), the
  change blocks of a diff (``patch``/``diff``/``input`` arguments, a heredoc fed to
  ``git apply`` or ``patch``: unified, ``apply_patch`` and SEARCH/REPLACE forms), or a whole
  file written (``content``/``file_text``, ``cat > f <<EOF``) compared with the last content
  the stream saw written to that file, are equal once reduced by ``code_shape.shape`` for
  the language of the file's extension (comments, blank lines and white space that is not
  syntax dropped; strings and pragma comments kept).
- anything else is a change, and breaks the chain; so is a shell chain that also runs something
  (``git apply p.diff && python setup.py develop``), whatever its edits.

The last states are the ones the stream's own steps reported: a command that rewrites a file
without reporting its state goes unseen. That is one reason why a loop also needs the same
result each time (docs/protocol.md, section 4): an edit wrongly taken for a no-op that did
change what the step sees gives another result, and no loop.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from antiloop.core import fingerprint
from antiloop.core.extra.code_shape import diff_changes, only_cosmetic, shape
from antiloop.core.history import History
from antiloop.core.result import Readings

__all__ = ["edit_effect", "whole_write", "write_digests"]

_PATH_KEYS = ("path", "file_path", "filepath", "file", "filename", "target_file")
_PAIRS = (("old_str", "new_str"), ("old_string", "new_string"), ("old_text", "new_text"))
_DIFF_KEYS = ("patch", "diff", "input")
_NOT_APPLIED = re.compile(
    r"No replacement was performed|did not appear verbatim|"
    r"Your proposed edit has introduced new syntax error|edit not applied|"
    r"No changes to make|old_string and new_string are (?:exactly )?the same|"
    r"String to replace not found|No (?:edits|changes) (?:were|was) (?:made|applied)",
    re.IGNORECASE,
)
_EDITOR_ERROR = re.compile(r"\s*(?:ERROR|Error):")
# a lone ``sed -i`` or ``git apply``, or an interface's editor command (SWE-agent's ``edit N:M``,
# ``insert N``, ``append``, run in its shell: it writes nothing when it refuses the edit)
_ATOMIC_SHELL = re.compile(
    r"(?:^|[;&|(]\s*)(?:sed\s+(?:-\w+\s+)*-i|git\s+apply)\b|\A\s*(?:edit|insert|append)\b"
)
_HEREDOC = re.compile(
    r"\A\s*(?:cd\s+\S+\s*&&\s*)?cat\s+"
    r"(?:(>>?)\s*(\S+)\s*<<-?\s*(['\"]?)(\w+)\3|<<-?\s*(['\"]?)(\w+)\5\s*(>>?)\s*(\S+))"
    r"[ \t]*\n(.*?)\n[ \t]*(?:\4|\6)\s*\Z",
    re.DOTALL,
)
_FEEDS_DIFF = re.compile(r"\b(?:git\s+apply|patch)\b")


# --- what an edit did ----------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _path_of(args: Mapping[str, Any], paths: tuple[str, ...]) -> str | None:
    for key in _PATH_KEYS:
        value = _text(args.get(key))
        if value:
            return value
    return paths[0] if len(paths) == 1 else None


def _pure(history: History) -> bool:
    """The edit writes nothing when it fails: an editor tool or command, a lone ``sed -i``."""
    parts = history.procedure.parts
    if not parts:
        return True
    command = _text(history.step.args.get("command")) or ""
    return len(parts) == 1 and ">" not in command and bool(_ATOMIC_SHELL.search(command))


def _replacements(history: History) -> list[tuple[str | None, str, str]] | None:
    """``(path, old, new)`` of each replacement the edit's arguments spell out, or None."""
    args = history.step.args
    proc = history.procedure
    path = _path_of(args, proc.paths)
    edits = args.get("edits")
    if isinstance(edits, list) and edits:
        found = []
        for edit in edits:
            if not isinstance(edit, Mapping):
                return None
            pair = _pair(edit)
            if pair is None:
                return None
            found.append((path, *pair))
        return found
    pair = _pair(args)
    if pair is not None:
        return [(path, *pair)]
    if args.get("command") == "insert" and _text(args.get("new_str")) is not None:
        return [(path, "", args["new_str"])]
    for key in _DIFF_KEYS:
        body = _text(args.get(key))
        if body:
            return diff_changes(body, path) or None
    command = _text(args.get("command")) or ""
    if proc.parts and _FEEDS_DIFF.search(command) and "\n@@" in command:
        return diff_changes(command, path) or None
    return None


def _pair(args: Mapping[str, Any]) -> tuple[str, str] | None:
    for old_key, new_key in _PAIRS:
        old, new = _text(args.get(old_key)), _text(args.get(new_key))
        if old is not None and new is not None:
            return old, new
    return None


def whole_write(history: History) -> tuple[str, str, bool] | None:
    """``(path, text, appends)`` of an edit that writes a whole file (or appends), or None."""
    args = history.step.args
    proc = history.procedure
    if len(proc.paths) != 1:
        return None
    if not proc.parts:
        text = _text(args.get("content"))
        if text is None and args.get("command") in (None, "create"):
            text = _text(args.get("file_text"))
        if text is None:
            return None
        return proc.paths[0], text, history.step.tool.lower() == "insert_content"
    command = _text(args.get("command"))
    match = _HEREDOC.match(command) if command and len(proc.parts) == 1 else None
    if match is None:
        return None
    appends = (match.group(1) or match.group(7)) == ">>"
    return proc.paths[0], match.group(9), appends


def edit_effect(
    history: History,
    known: Mapping[str, str] | None = None,
    written: Mapping[str, tuple[str, str]] | None = None,
) -> str:
    """What an edit step did: ``noop``, ``cosmetic`` or ``change`` (see the module docstring).

    Args:
        history: the edit step (its ``procedure.operation`` is ``edit``).
        known: the last sha256 the stream saw for each path.
        written: for files the stream saw written whole, ``(exact digest, shape digest)``.
    """
    step = history.step
    if _pure(history):
        if step.failed:
            return "noop"
        said = f"{(step.output or '')[:2000]}\n{(step.error or '')[:2000]}"
        if _NOT_APPLIED.search(said):
            return "noop"
        if not history.procedure.parts and _EDITOR_ERROR.match(step.output or ""):
            return "noop"  # an editor tool that answers with its error as output (OpenHands)
    if any(op != "edit" for _, op in history.procedure.parts):
        return "change"  # a shell chain that also runs something: who knows what it did
    record = history.record
    if record is not None and known and _unchanged(record.readings, known):
        return "noop"
    replacements = _replacements(history)
    if replacements:
        if all(old == new for _, old, new in replacements):
            return "noop"
        if all(only_cosmetic(old, new, path) for path, old, new in replacements):
            return "cosmetic"
        return "change"
    whole = whole_write(history)
    if whole is not None:
        path, text, appends = whole
        if appends:
            return "noop" if not text else "cosmetic" if only_cosmetic("", text, path) else "change"
        before = (written or {}).get(path)
        if before is not None:
            exact, shaped = write_digests(path, text)
            if exact == before[0]:
                return "noop"
            if shaped == before[1]:
                return "cosmetic"
    return "change"


def _unchanged(readings: Readings, known: Mapping[str, str]) -> bool:
    files = readings.files
    return bool(files) and all(sha is not None and known.get(p) == sha for p, sha, _ in files)


@functools.lru_cache(maxsize=8)  # a write is compared, then remembered: one reduction
def write_digests(path: str, text: str) -> tuple[str, str]:
    """The exact and the shape digests of a whole file written to ``path``."""
    return fingerprint.digest8(text), fingerprint.digest8(shape(text, path))
