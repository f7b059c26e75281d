"""Canonical forms of section 3.2: JSON values, multi-line bodies, paths, search patterns, words.

The small pure steps ``antiloop.core.procedure`` and the shell engine
(``antiloop.core.shell.engine``) apply to parameters. Each maps a value to its canonical
value; none keeps state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from antiloop.core.text.patterns import Patterns

__all__ = [
    "canonical_json",
    "canonical_path",
    "canonical_text",
    "canonical_value",
    "dumps",
    "dumps_items",
    "key_params",
    "pattern_words",
    "render",
    "strip_line_ends",
    "verbatim",
]

RX = Patterns(
    url=r"^[A-Za-z][A-Za-z0-9+.-]*://",
    word_run=r"[^\W_]+|\|",
    regex_noise=(
        r"\\."  # escapes: \b \s \w \d vanish, and so do escaped punctuation marks (\[ \.)
        r"|\[\^?\]?(?:\[:[a-z]+:\]|[^\]])*\]"  # bracket classes, with POSIX classes inside
        r"|\{\d*(?:,\d*)?\}"  # counted repetition {2,3}
        r"|\(\?[A-Za-z-]*\)"  # inline flags (?i)
    ),
    case_split=r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])",
    safe_word=r"[^\s'\"\\;&|<>()$`#]+",
)


def canonical_text(text: str) -> str:
    """A string parameter: surrounding white space vanishes; a multi-line body keeps its lines.

    A multi-line body compares verbatim except trailing spaces on each line and blank lines
    around it; indentation is content.
    """
    if "\n" not in text:
        return text.strip()
    return "\n".join([line.rstrip() for line in text.split("\n")]).strip("\n")


_LINE_END = " \t\r\f\v"  # what a line loses at its end (not "\n", which ends it)
_LINE_ENDS = tuple(c + "\n" for c in _LINE_END)


def strip_line_ends(text: str) -> str:
    r"""``text`` without the spaces and tabs (``[ \t\r\f\v]``) that end each of its lines.

    What ``re.sub(r"[ \t\r\f\v]+(?=\n|\Z)", "", text)`` gives, in time linear in the text:
    the regex tries each space of an indentation again up to the next word.
    """
    if text[-1:] not in _LINE_END and not any(end in text for end in _LINE_ENDS):
        return text
    return "\n".join([line.rstrip(_LINE_END) for line in text.split("\n")])


def verbatim(word: str) -> str:
    """A word kept as written, except the trailing spaces of a multi-line body's lines."""
    return strip_line_ends(word) if "\n" in word else word


def render(word: str) -> str:
    """A word as it reads in a context: quoted only where needed."""
    if RX.safe_word.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def canonical_value(value: Any) -> Any:
    """A JSON value in canonical form: integral floats as ints, strings trimmed, nested too.

    Example:
        >>> canonical_value({"b": 10.0, "a": [" x ", 1.5]})
        {'b': 10, 'a': ['x', 1.5]}
    """
    t = type(value)
    if t is str:
        return canonical_text(value)
    if t is bool or t is int or value is None:
        return value
    if t is float:
        return int(value) if value.is_integer() else value
    if isinstance(value, str):
        return canonical_text(str(value))
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
    return dumps(canonical_value(value))


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_encode_str: Any = json.encoder.encode_basestring
_LONG = 256  # strings longer than this go into keys raw (length-prefixed), not JSON-escaped


def dumps(value: Any) -> str:
    """Compact JSON with sorted keys (a flat object is written without the encoder's setup)."""
    if type(value) is dict:
        return (
            "{" + ",".join([_encode_str(k) + ":" + _scalar(value[k]) for k in sorted(value)]) + "}"
        )
    return _ENCODER.encode(value)


def dumps_items(items: list[Any]) -> str:
    """``dumps`` of a shell key: a list of strings and lists of strings (no encoder setup)."""
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


def key_params(canon: dict[str, Any]) -> str:
    """The parameters part of a key: like ``dumps``, but long strings go raw, length-prefixed.

    JSON-escaping a kilobyte of editor text costs more than the rest of the procedure; a raw
    string behind a NUL and its length is just as unambiguous.
    """
    parts = []
    for k in sorted(canon) if len(canon) > 1 else canon:
        v = canon[k]
        if type(v) is not str:
            parts.append(_encode_str(k) + ":" + _scalar(v))
        elif len(v) > _LONG:
            parts.append(f"{_encode_str(k)}:\x00{len(v)}:{v}")
        else:
            parts.append(_encode_str(k) + ":" + _encode_str(v))
    return "{" + ",".join(parts) + "}"


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
    if not p or "..." in p or ("://" in p and RX.url.match(p)):
        return None
    absolute = p[0] == "/"
    # a path already in canonical form skips the split and join
    if "//" in p or "/./" in p or p.endswith(("/", "/.")) or p.startswith("./"):
        p = "/".join([s for s in p.split("/") if s and s != "."])
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


def _noise(m: re.Match[str]) -> str:
    """Regex syntax vanishes, except an escaped bar (basic-regex alternation), read as ``|``."""
    return "|" if m.group() == "\\|" else " "


def _split_case(run: str) -> list[str]:
    if run.isascii():
        return RX.case_split.sub(" ", run).split()
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
        RX.regex_noise.sub(_noise, pattern)
        if ("\\" in pattern or "[" in pattern or "{" in pattern or "(?" in pattern)
        else pattern
    )
    words: list[str] = []
    for run in RX.word_run.findall(text):
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
    noise = RX.regex_noise
    n = len(pattern)
    i = 0
    while i < n:
        if step > 0:
            # an escape, a bracket class or inline flags is one edge: ``\\b``, ``[Ff]``, ``(?i)``
            m = noise.match(pattern, i)
            if m is not None:
                i = m.end()
                continue
            if pattern[i].isalnum():
                break
        else:
            at = n - 1 - i
            if at >= 1 and pattern[at - 1] == "\\":
                i += 2
                continue
            open_ = pattern.rfind("[", 0, at - 1) if pattern[at] == "]" else -1
            cls = noise.match(pattern, open_) if open_ >= 0 else None
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
