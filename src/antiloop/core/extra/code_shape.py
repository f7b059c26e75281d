"""Whether an edit only touched comments or white space: source text reduced to its shape.

``shape(text, path)`` drops what cannot change what a program does, for the languages told by
the file's extension (``LANGUAGES``):

- comments: ``#`` (Python, Ruby, Perl, R; in shell, YAML, TOML, INI and Makefiles only at the
  start of a word), ``//`` and ``/* */`` (C, C++, Java, JavaScript, TypeScript, Go, Rust, C#,
  Kotlin, Swift, Scala, PHP; only ``/* */`` in CSS), ``--`` (SQL, Lua, Haskell), ``<!-- -->``
  (HTML, XML). A comment that tools read (``# type: ignore``, ``# noqa``, ``#!``, ``// @ts-``,
  ``//go:``, ``eslint``, ``pragma``, coding lines...) is kept: changing it is no cosmetic edit;
- blank lines and trailing white space;
- leading white space, except where indentation is syntax (Python, YAML, Makefiles,
  Haskell, and files of no known language);
- white space inside a line, except one space between two word characters (``a + b`` is
  ``a+b``, ``int x`` is not ``intx``).

String literals (``'...'``, ``"..."``, Python's triple quotes, backquotes in JavaScript, Go and
shell) are kept verbatim, so a ``#`` or ``//`` inside one is no comment and spaces inside one
count. A line break is never white space: joining or splitting lines is a change. A file of no
known language keeps everything but blank lines and trailing white space.

Edits are fragments (an editor's ``old_str``/``new_str``, a diff's removed and added lines):
both sides are reduced the same way, so a fragment that starts inside a string is misread on
both sides alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["LANGUAGES", "Language", "diff_changes", "language_of", "only_cosmetic", "shape"]


@dataclass(frozen=True, slots=True)
class Language:
    """How one family of languages writes comments and strings.

    Attributes:
        name: the family's name.
        line: the line-comment markers.
        block: ``(open, close)`` block-comment markers.
        word_hash: ``#`` opens a comment only at the start of a word (shell, YAML...).
        indented: leading white space is syntax.
        quotes: the string delimiters (a triple quote is tried before a single one).
        multiline: the delimiters whose strings may span lines.
    """

    name: str
    line: tuple[str, ...] = ()
    block: tuple[tuple[str, str], ...] = ()
    word_hash: bool = False
    indented: bool = False
    quotes: tuple[str, ...] = ('"', "'")
    multiline: tuple[str, ...] = ()


_PY = Language(
    "python", ("#",), indented=True, quotes=('"""', "'''", '"', "'"), multiline=('"""', "'''")
)
_HASH = Language("hash", ("#",))
_SHELL = Language("shell", ("#",), word_hash=True, quotes=('"', "'", "`"), multiline=('"', "'"))
_CONFIG = Language("config", ("#", ";"), word_hash=True, indented=True)
_C = Language("c", ("//",), (("/*", "*/"),), quotes=('"', "'", "`"), multiline=("`",))
_CSS = Language("css", (), (("/*", "*/"),))
_DASH = Language("dash", ("--",), (("/*", "*/"),))
_HASKELL = Language("haskell", ("--",), (("{-", "-}"),), indented=True, quotes=('"',))
_MARKUP = Language("markup", (), (("<!--", "-->"),), quotes=())
_MAKE = Language("make", ("#",), word_hash=True, indented=True, quotes=())
_PLAIN = Language("plain", indented=True, quotes=())

LANGUAGES: dict[str, Language] = {
    **dict.fromkeys(("py", "pyi", "pyw"), _PY),
    **dict.fromkeys(("rb", "pl", "pm", "r", "jl", "coffee"), _HASH),
    **dict.fromkeys(("sh", "bash", "zsh", "ksh", "fish"), _SHELL),
    **dict.fromkeys(("yaml", "yml", "toml", "ini", "cfg", "conf"), _CONFIG),
    **dict.fromkeys(
        [
            "c",
            "h",
            "cc",
            "cpp",
            "cxx",
            "hpp",
            "hh",
            "java",
            "js",
            "jsx",
            "mjs",
            "cjs",
            "ts",
            "tsx",
            "mts",
            "cts",
            "go",
            "rs",
            "cs",
            "kt",
            "kts",
            "swift",
            "scala",
            "php",
            "dart",
            "groovy",
            "gradle",
            "pony",
        ],
        _C,
    ),
    **dict.fromkeys(("css", "scss", "less"), _CSS),
    **dict.fromkeys(("sql", "lua"), _DASH),
    **dict.fromkeys(("hs", "lhs", "elm"), _HASKELL),
    **dict.fromkeys(("html", "htm", "xml", "xhtml", "svg", "vue"), _MARKUP),
}
"""Languages by file extension (lower case, no dot)."""

_NAMES = {"makefile": _MAKE, "gnumakefile": _MAKE, "dockerfile": _SHELL}
_PRAGMA = re.compile(
    r"^(?:#!|#\s*-\*-|(?:#|//|/\*|--)\s*(?:type:|noqa|pragma|pylint:|mypy:|pyright:|fmt:|isort:|"
    r"ruff:|coding[:=]|go:|\+build|@ts-|eslint|prettier|jshint|istanbul|c8|nolint|NOLINT|"
    r"clang-format|lint:|rubocop:|frozen_string_literal|@flow|@jsx|#(?:region|endregion)|"
    r"@(?:vite|webpack)))",
    re.IGNORECASE,
)


def language_of(path: str | None) -> Language:
    """The language of a file by its extension (or name); ``plain`` when not known."""
    if not path:
        return _PLAIN
    name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if name in _NAMES:
        return _NAMES[name]
    _, dot, ext = name.rpartition(".")
    return LANGUAGES.get(ext, _PLAIN) if dot else _PLAIN


_SPECIALS: dict[str, re.Pattern[str]] = {}
_STRING_ENDS: dict[tuple[str, bool], re.Pattern[str]] = {}


def _specials(lang: Language) -> re.Pattern[str]:
    """Where something other than plain code may start: a line break, a quote, a comment."""
    rx = _SPECIALS.get(lang.name)
    if rx is None:
        starts = ["\n", *lang.quotes, *lang.line, *(opener for opener, _ in lang.block)]
        rx = _SPECIALS[lang.name] = re.compile("|".join(map(re.escape, starts)))
    return rx


def _tokens(text: str, lang: Language) -> Iterator[tuple[str, str]]:
    """``(kind, text)`` pieces: ``code``, ``string``, ``nl`` (a line break); comments dropped."""
    i, n = 0, len(text)
    code: list[str] = []
    specials = _specials(lang)
    quotes = lang.quotes
    while i < n:
        found = specials.search(text, i)
        if found is None:
            code.append(text[i:])
            break
        at = found.start()
        if at > i:
            code.append(text[i:at])
        i = at
        if text[i] == "\n":
            if code:
                yield "code", "".join(code)
                code = []
            yield "nl", "\n"
            i += 1
            continue
        quote = next((q for q in quotes if text.startswith(q, i)), None)
        if quote is not None:
            end = _string_end(text, i + len(quote), quote, quote in lang.multiline)
            if code:
                yield "code", "".join(code)
                code = []
            yield "string", text[i:end]
            i = end
            continue
        comment_end = _comment_end(text, i, lang, code)
        if comment_end is None:  # a '#' inside a word
            code.append(text[i])
            i += 1
            continue
        if _PRAGMA.match(text[i:comment_end].strip()):
            if code:
                yield "code", "".join(code)
                code = []
            yield "string", text[i:comment_end]  # a comment tools read: kept verbatim
        elif "\n" in text[i:comment_end]:
            code.append(" ")  # a block comment over lines: the lines stay apart
            yield "code", "".join(code)
            code = []
            yield "nl", "\n"
        i = comment_end
    if code:
        yield "code", "".join(code)


def _string_end(text: str, start: int, quote: str, multiline: bool) -> int:
    """Where the string opened before ``start`` ends (after its closing quote)."""
    rx = _STRING_ENDS.get((quote, multiline))
    if rx is None:
        pattern = r"\\.|" + re.escape(quote) + ("" if multiline else r"|\n")
        rx = _STRING_ENDS[(quote, multiline)] = re.compile(pattern, re.DOTALL)
    pos = start
    while True:
        found = rx.search(text, pos)
        if found is None:
            return len(text)
        piece = found.group()
        if piece[0] == "\\":  # an escaped character
            pos = found.end()
            continue
        if piece == "\n":
            return found.start()  # an unclosed one-line string (a fragment, a Rust lifetime)
        return found.end()


def _comment_end(text: str, i: int, lang: Language, code: list[str]) -> int | None:
    for marker in lang.line:
        if text.startswith(marker, i):
            if marker == "#" and lang.word_hash and code and not code[-1][-1:].isspace():
                return None
            end = text.find("\n", i)
            return len(text) if end < 0 else end
    for opener, closer in lang.block:
        if text.startswith(opener, i):
            end = text.find(closer, i + len(opener))
            return len(text) if end < 0 else end + len(closer)
    return None


_BETWEEN_WORDS = re.compile(r"(?<=\w)\s+(?=\w)")
_SPACE = re.compile(r"\s+")


def _squeeze(code: str) -> str:
    """White space inside a line dropped, except one space between two word characters."""
    return _SPACE.sub("", _BETWEEN_WORDS.sub("\x00", code)).replace("\x00", " ")


def shape(text: str, path: str | None = None) -> str:
    """The text without what cannot change what it does (see the module docstring)."""
    lang = language_of(path)
    text = text.replace("\r\n", "\n")
    if lang is _PLAIN:
        return "\n".join(line.rstrip() for line in text.split("\n") if line.strip())
    lines: list[str] = []
    current: list[tuple[str, str]] = []
    for kind, piece in _tokens(text, lang):
        if kind == "nl":
            lines.append(_line(current, lang))
            current = []
        else:
            current.append((kind, piece))
    lines.append(_line(current, lang))
    return "\n".join(line for line in lines if line)


def _line(pieces: list[tuple[str, str]], lang: Language) -> str:
    if not pieces:
        return ""
    indent = ""
    if lang.indented and pieces[0][0] == "code":
        first = pieces[0][1]
        body = first.lstrip(" \t")
        if body or len(pieces) > 1:
            indent = first[: len(first) - len(body)]
    parts: list[str] = []
    for kind, piece in pieces:
        parts.append(piece if kind == "string" else _squeeze(piece))
    joined = "".join(parts)
    return indent + joined if joined else ""


def only_cosmetic(old: str, new: str, path: str | None = None) -> bool:
    """Whether replacing ``old`` by ``new`` only touches comments or white space.

    What that means depends on the language of ``path`` (see the module docstring).
    """
    return shape(old, path) == shape(new, path)


_FILE_HEADER = re.compile(r"^(?:\+\+\+ (?:b/)?|\*\*\* (?:Update|Add) File: )(\S+)")
_SEARCH = re.compile(
    r"^<<<<<<< SEARCH[^\n]*\n(.*?)^=======[^\n]*\n(.*?)^>>>>>>> REPLACE", re.MULTILINE | re.DOTALL
)


def diff_changes(body: str, default_path: str | None = None) -> list[tuple[str | None, str, str]]:
    """The changes a diff makes: ``(path, removed text, added text)`` per change block.

    Reads unified diffs (``--- a/x`` / ``+++ b/x``, ``@@`` hunks), the ``apply_patch`` format
    (``*** Update File: x``) and SEARCH/REPLACE blocks. A change block is a run of removed and
    added lines between context lines, so lines moved elsewhere are a change. Empty when the
    body holds no change it can read.
    """
    found = [(default_path, m.group(1), m.group(2)) for m in _SEARCH.finditer(body)]
    if found:
        return found
    path = default_path
    removed: list[str] = []
    added: list[str] = []
    in_hunk = False
    for line in body.split("\n"):
        header = _FILE_HEADER.match(line)
        if header is not None or line.startswith(("--- ", "diff --git", "*** ")):
            _flush(found, path, removed, added)
            if header is not None:
                path = header.group(1)
            in_hunk = False
            continue
        if line.startswith("@@"):
            _flush(found, path, removed, added)
            in_hunk = True
            continue
        if not in_hunk:
            continue
        if line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        else:
            _flush(found, path, removed, added)
    _flush(found, path, removed, added)
    return found


def _flush(
    found: list[tuple[str | None, str, str]], path: str | None, removed: list[str], added: list[str]
) -> None:
    if removed or added:
        found.append((path, "\n".join(removed), "\n".join(added)))
    removed.clear()
    added.clear()
