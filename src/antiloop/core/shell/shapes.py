"""Shell readings by the command's shape: the engine runs once a shape, the words filled in.

Most shell commands an agent runs are new strings of a few shapes (``grep -rn 'value_12'
src/mod3``, ``pytest tests/test_m4.py -q``): the same program, flags and separators around
different values. ``shell(command, cwd, rules)`` gives what ``engine.shell`` gives, reading
each shape once:

- a *slot* is a word the engine decides nothing by, beyond its *flavour*: a word of
  ``[A-Za-z0-9_./@%,+-]`` starting with a letter, digit or ``_``, already a canonical path,
  no name of a program, wrapper, runner or subcommand (``_names``), with a flavour saying
  whether it contains ``/`` and whether it looks like a path. Every other word is literal.
- the shape is the command's tokens with each slot replaced by its flavour. The first command
  of a shape is read by the engine twice, as written and with a marker word in each slot
  (``ZqaXj``), and the reading with markers becomes format strings (``{0}`` the word as
  written, ``{1}`` its ``pattern_words``). The shape is kept only when the format strings,
  filled with the first command's words, give exactly the engine's reading of it.
- a later command of the shape fills the format strings with its own words; where its values
  would merge paths or programs that the markers kept apart, the engine reads it instead.

The shapes are remembered per rule set (by identity), a few rule sets at most: two guards
with different rows never share a reading. Nothing outside this module sees the memo.

Only commands of words, single quotes and ``; & | && ||`` are read by shape (no redirections,
expansions or escapes), and none with a flag named twice (their sorted order would depend on
the values), none holding ``zq`` (the markers' letters).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import fields
from typing import Any

from antiloop.core.forms import pattern_words
from antiloop.core.rules.ruleset import Rules
from antiloop.core.shell.engine import RX as _CMD_RX
from antiloop.core.shell.engine import (
    Shell,
    read_text,
    read_tokens,
)
from antiloop.core.shell.tokens import (
    RESERVED,
    SHELLS,
    SKIP_WORDS,
    Redirect,
    Token,
    plain_tokens,
    stripped,
)

__all__ = ["shell"]

_SHAPES = 1024  # shapes kept per rule set, first in first out
_RULE_SETS = 8  # rule sets whose shapes are kept, first in first out
_ENGINE_WORDS = frozenset({"cd", "--", "-", ".", "~", "/dev/null"}) | SHELLS | RESERVED
_ENGINE_WORDS |= SKIP_WORDS


class _Template:
    """The reading of a shape as format strings of the slots' words (and their pattern words)."""

    __slots__ = ("context", "op", "params", "parts", "paths", "patterns", "programs", "slots")

    def __init__(self, reading: Shell, fmt: Any, slots: int) -> None:
        op, params, context, paths, programs, parts = reading
        self.op = op
        self.slots = slots
        self.params: str = fmt(params)
        self.context: str = fmt(context)
        self.paths: list[str] = [fmt(p) for p in paths]
        self.programs: list[str] = [fmt(p) for p in programs]
        self.parts: list[tuple[str, str]] = [(fmt(p), o) for p, o in parts]
        every = " ".join([self.params, self.context, *self.paths, *self.programs])
        # the slots whose pattern words the format strings use
        self.patterns = [k for k in range(slots) if "{" + str(2 * k + 1) + "}" in every]

    def fill(self, words: list[str]) -> Shell | None:
        """The reading of a command of this shape with these slot words (None: read it again)."""
        values = [""] * (2 * self.slots)
        values[::2] = words
        for k in self.patterns:
            values[2 * k + 1] = pattern_words(words[k])
        paths = [p.format(*values) for p in self.paths]
        programs = [p.format(*values) for p in self.programs]
        if (len(paths) > 1 and len(set(paths)) < len(paths)) or (
            len(programs) > 1 and len(set(programs)) < len(programs)
        ):
            return None  # values the markers kept apart are equal here
        return (
            self.op,
            self.params.format(*values),
            self.context.format(*values),
            paths,
            tuple(programs),
            tuple([(p.format(*values), o) for p, o in self.parts]),
        )


_LEARN = object()  # a shape seen once: learnt when seen again


class _Memo:
    """The shapes read by one rule set, and the flavours of words under it."""

    __slots__ = ("flavours", "names", "shapes")

    def __init__(self, rules: Rules) -> None:
        self.shapes: dict[tuple[Any, ...], object] = {}
        self.flavours: dict[str, int] = {}
        self.names = _names(rules)


_memos: dict[Rules, _Memo] = {}


def _memo(rules: Rules) -> _Memo:
    memo = _memos.get(rules)
    if memo is None:
        memo = _memos[rules] = _Memo(rules)
        if len(_memos) > _RULE_SETS:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread
                del _memos[next(iter(_memos))]
    return memo


def shell(command: str, cwd: str | None, rules: Rules) -> Shell:
    """``engine.shell(command, cwd, rules)``, by the command's shape when it has one."""
    text = stripped(command)
    tokens = plain_tokens(text)
    if tokens is None:
        return read_text(text, cwd, rules)
    if "zq" in text.lower():
        return read_tokens(tokens, cwd, rules)
    memo = _memo(rules)
    flavours = memo.flavours
    shapes = memo.shapes
    shape: list[Any] = [cwd]
    slots: list[str] = []
    for tok in tokens:
        word = tok[1]  # type: ignore[index]  # plain tokens are all pairs
        if tok[0] == "w":  # type: ignore[index]
            flavour = flavours.get(word)
            if flavour is None:
                if len(flavours) > _FLAVOURS:
                    flavours.clear()
                flavour = flavours[word] = _flavour(word, memo.names)
            if flavour >= 0:
                shape.append(flavour)
                slots.append(word)
                continue
        shape.append(tok)
    key = tuple(shape)
    known = shapes.get(key)
    if type(known) is _Template:
        filled = known.fill(slots)
        if filled is not None:
            return filled
    reading = read_tokens(tokens, cwd, rules)
    if known is None:
        shapes[key] = _LEARN
        if len(shapes) > _SHAPES:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread
                del shapes[next(iter(shapes))]
    elif known is _LEARN:
        shapes[key] = _learn(tokens, key, slots, cwd, rules, reading)
    return reading


_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./@%,+-"
_FLAVOURS = 256  # words whose flavour is kept per rule set


def _flavour(word: str, names: frozenset[str]) -> int:
    """0, 1 or 2 for a slot (plain, a file name, a path with ``/``); -1 for a literal word.

    A slot is its own canonical path (``canonical_path(word, cwd) == word`` for any ``cwd``),
    and looks like a path (``_commands._pathlike``) by its flavour.
    """
    if word in names or word[:1] not in _FIRST or word.strip(_CHARS) or "..." in word:
        return -1
    slash = word.rfind("/")
    if slash >= 0 and (
        word.endswith(("/", "/.")) or "//" in word or "/./" in word  # not canonical
    ):
        return -1
    base = word[slash + 1 :]
    if base in names:
        return -1
    if base[-1].isdigit():  # the engine looks a versioned name up by its stem (python3.11)
        stem = base.rstrip("0123456789.")
        if stem in names or "." in base[len(stem) :]:
            return -1
    if slash >= 0:
        pathlike = True
    else:
        dot = word.rfind(".")
        ext = word[dot + 1 :]
        pathlike = dot >= 0 and 0 < len(ext) <= 10 and ext[0].isalpha()
        pathlike = pathlike and ext.replace("_", "a").isalnum()
    if pathlike and word[0] in "sy0123456789" and _CMD_RX.sed_script.match(word) is not None:
        return -1  # a sed script (``s/a/b/g``) is no path
    return (2 if slash >= 0 else 1) if pathlike else 0


def _marker(k: int, flavour: int) -> str:
    """The marker word of slot ``k``: of the slot's flavour, its letters found nowhere else."""
    tag = "Zq" + "".join(chr(97 + int(d)) for d in str(k)) + "Xj"
    return (tag, tag + ".py", tag[:-2] + "/" + tag)[flavour]


def _learn(
    tokens: list[Token], key: tuple[Any, ...], slots: list[str], cwd: str | None, rules: Rules,
    reading: Shell,
) -> _Template | None:  # fmt: skip
    """The template of a shape, checked against the engine's reading of its first command."""
    if _flag_twice(tokens) or len(slots) > 64:
        return None
    marked: list[Token] = []
    forms: dict[str, str] = {}
    k = 0
    for tok, part in zip(tokens, key[1:], strict=True):
        if type(part) is int:
            marker = _marker(k, part)
            forms[marker] = "{" + str(2 * k) + "}"
            forms[pattern_words(marker)] = "{" + str(2 * k + 1) + "}"
            marked.append(("w", marker))
            k += 1
        else:
            marked.append(tok)
    if not forms:
        return None  # nothing to fill: the procedure cache has the command itself
    found = re.compile("|".join(map(re.escape, sorted(forms, key=len, reverse=True))))

    def fmt(text: str) -> str:
        escaped = text.replace("{", "{{").replace("}", "}}")
        out = found.sub(lambda m: forms[m.group()], escaped)
        if "zq" in out.lower():
            raise _Unfit
        return out

    try:
        template = _Template(read_tokens(marked, cwd, rules), fmt, len(slots))
    except _Unfit:  # a marker changed on its way (cut, or read by its letters)
        return None
    return template if template.fill(slots) == reading else None


class _Unfit(Exception):
    """A marker did not come through the engine whole."""


def _flag_twice(tokens: list[Token]) -> bool:
    """Whether a flag name (a long name, a short letter) occurs twice: sorting may see values."""
    seen: set[str] = set()
    for tok in tokens:
        if isinstance(tok, Redirect) or tok[0] != "w":
            continue
        word = tok[1]
        if not word.startswith("-") or word in ("-", "--"):
            continue
        for name in [word.partition("=")[0]] if word.startswith("--") else word[1:]:
            if name in seen:
                return True
            seen.add(name)
    return False


def _names(rules: Rules) -> frozenset[str]:
    """Every word the engine compares a word with: the rows' names, subcommands, flags..."""
    out = set(_ENGINE_WORDS)

    def add(value: object) -> None:
        if isinstance(value, str):
            out.add(value)
            out.update(value.split())
        elif isinstance(value, tuple | frozenset | list):
            for v in value:
                add(v)
        elif hasattr(value, "__dataclass_fields__"):
            for f in fields(value):  # type: ignore[arg-type]
                add(getattr(value, f.name))

    for table in (rules.programs, rules.wrappers, rules.runners):
        for name, rows in table.items():
            add(name)
            add(rows)
    return frozenset(out)
