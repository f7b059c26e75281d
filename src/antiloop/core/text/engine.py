"""The engine over the rows of ``antiloop.core.rules.readings``: scrubbing, error lines, summaries.

``engine_for(rules)`` is the engine of one rule set (``antiloop.core.rules.ruleset.Rules``),
made once per set: it compiles each table on first use (a hook process that reads one result
compiles only what it reads). Two guards with different rule sets read by different engines.

How it stays cheap:

- Scrubbing runs over the "class view" of a text's UTF-8 bytes: one ``bytes.translate`` lowers
  ASCII letters and turns every digit into ``0`` (the same length: a span in the view is one in
  the bytes). Rows with one lead are one regex that starts with a single literal, so the regex
  engine jumps between candidates; a row whose ``needs`` character is absent does not run.
- Error-line rules search words with ``str.find`` (on the view of an ASCII text, which is
  lower-cased already; on a lower-cased copy of any other), each search bounded by the
  earliest candidate found so far. The first 512 KiB of a text are searched and, when no line
  is found there, its last 64 KiB.
- Summaries: one regex of every runner row, tried at line starts of a text's last 64 KiB only.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable

from antiloop.core.rules.readings import Block, NoError, Pattern, Scrubber, Summary, Word
from antiloop.core.rules.ruleset import Rules

__all__ = ["Engine", "engine_for", "in_words"]

ERROR_HEAD_CAP = 512 * 1024
"""How much of a text's start is searched for its first error line."""

TAIL_CAP = 64 * 1024
"""How much of a text's end is searched for an error line (after the head) and summaries."""

LINE_CAP = 400
"""The longest error line kept; a longer one is cut (minified code, long JSON)."""

VIEW = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ123456789", b"abcdefghijklmnopqrstuvwxyz000000000"
)
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_Span = tuple[int, int, int, bytes]  # start, row order, end, placeholder


class _Mask:
    """One scrubber row, compiled."""

    __slots__ = ("before", "order", "raw", "reach", "token", "wide")

    def __init__(self, row: Scrubber, order: int) -> None:
        self.order = order
        self.token = row.placeholder.encode()
        self.raw = row.raw.encode()
        self.reach = row.reach
        self.before = re.compile(row.before.encode()) if row.before else None
        self.wide = self.before is not None and self.before.groups > 0


class _Pass:
    """Rows with one lead (or one row without a lead): one regex over the view or the bytes."""

    __slots__ = ("masks", "needs", "regex", "view")

    def __init__(self, rows: list[tuple[int, Scrubber]]) -> None:
        first = rows[0][1]
        self.view = first.view
        self.needs = first.needs.encode()
        body = "|".join(f"(?P<s{order}>{row.pattern})" for order, row in rows)
        flags = 0 if self.view else re.IGNORECASE
        self.regex = re.compile(f"{first.lead}(?:{body})".encode(), flags)
        self.masks = {f"s{order}": _Mask(row, order) for order, row in rows}


class _Finder:
    """The error-line rows, compiled."""

    def __init__(self, rules: Iterable[object]) -> None:
        self.words: list[tuple[str, str | None]] = []
        self.blocks: list[tuple[str, re.Pattern[str] | None, re.Pattern[str] | None]] = []
        self.ends: list[tuple[str, re.Pattern[str]]] = []
        self.patterns: list[tuple[re.Pattern[str], tuple[str, ...]]] = []
        quiet: list[str] = []
        for rule in rules:
            if isinstance(rule, Word):
                self.words.append((rule.word, rule.cased or None))
            elif isinstance(rule, Block):
                after = re.compile(rule.after) if rule.after else None
                before = re.compile(rule.before) if rule.before else None
                self.blocks.append((rule.literal, after, before))
                if rule.then:
                    self.ends.append((rule.literal, re.compile(rule.then)))
            elif isinstance(rule, Pattern):
                self.patterns.append((re.compile(rule.pattern, re.MULTILINE), rule.hints))
            elif isinstance(rule, NoError):
                quiet.append(f"(?:{rule.pattern})")
        self.no_error = re.compile("|".join(quiet)) if quiet else None

    def next_candidate(self, text: str, low: str | bytes, pos: int) -> int:
        """The earliest position from ``pos`` on that may start an error line, or -1.

        ``low`` is the text lower-cased, or the class view of an ASCII text (same positions).
        """
        best = len(text)
        for word, cased in self.words:
            found = _word_at(text, low, word, cased, pos, best)
            if found >= 0:
                best = found
        for literal, after, before in self.blocks:
            if literal[0] in text:  # one character searched by memchr, far cheaper than all
                found = _line_start(text, literal, after, before, pos, best)
                if found >= 0:
                    best = found
        for regex, hints in self.patterns:
            if not hints or any(hint in text for hint in hints):
                match = regex.search(text, pos, best)
                if match is not None:
                    best = match.start()
        return best if best < len(text) else -1

    def first_in(self, text: str, view: bytes | None = None) -> str | None:
        """The first error line of a text (or of a capped part of one)."""
        low: str | bytes = text.lower() if view is None else view
        if len(low) != len(text):  # a character whose lower case is longer (İ): keep it
            low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        pos = 0
        while pos < len(text):
            at = self.next_candidate(text, low, pos)
            if at < 0:
                return None
            line, nxt = _line_around(text, at)
            start = line.lstrip()
            for literal, then in self.ends:
                if start.startswith(literal):
                    last = then.match(text, nxt)
                    return last.group(1)[:LINE_CAP] if last else line
            if self.no_error is None or not self.no_error.search(line):
                return line
            pos = nxt
        return None

    def first_line(self, text: str, view: bytes | None = None) -> str | None:
        """The first line of ``text`` that reads as an error, unscrubbed (colours dropped)."""
        size = len(text)
        if size <= ERROR_HEAD_CAP + TAIL_CAP:
            if "\x1b" not in text:
                return self.first_in(text, view)
            parts = [text]
        else:
            parts = [text[:ERROR_HEAD_CAP], text[size - TAIL_CAP :]]
        for part in parts:
            found = self.first_in(_ANSI.sub("", part) if "\x1b" in part else part)
            if found is not None:
                return found
        return None


def _word_at(text: str, low: str | bytes, word: str, cased: str | None, pos: int, end: int) -> int:
    """Where ``word`` next reads as an error (a whole word, or ``…Error:``), or -1.

    ``low`` is the text lower-cased, or the class view of an ASCII text (lower-cased already).
    """
    size = len(word)
    needle: str | bytes = word.encode("ascii") if isinstance(low, bytes) else word
    while True:
        at = low.find(needle, pos, end)  # type: ignore[arg-type]  # str in str, bytes in bytes
        if at < 0:
            return -1
        after = at + size
        if (at == 0 or not _is_word(low, at - 1)) and (
            after >= len(low) or not _is_word(low, after)
        ):
            return at
        if cased is not None and text.startswith(cased, at) and text.startswith(":", after):
            return at
        pos = at + 1


def _is_word(low: str | bytes, at: int) -> bool:
    if isinstance(low, bytes):
        return low[at] in _WORD_BYTES
    char = low[at]
    return char.isalnum() or char == "_"


def _line_start(
    text: str,
    literal: str,
    after: re.Pattern[str] | None,
    before: re.Pattern[str] | None,
    pos: int,
    end: int,
) -> int:
    """Where a line starts with ``literal`` (``before`` matching what precedes it), or -1."""
    while True:
        at = text.find(literal, pos, end)
        if at < 0:
            return -1
        if after is None or after.match(text, at):
            if before is None:
                if at == 0 or text[at - 1] == "\n":
                    return at
            elif before.match(text, text.rfind("\n", max(0, at - LINE_CAP), at) + 1, at):
                return at
        pos = at + 1


def _line_around(text: str, at: int) -> tuple[str, int]:
    """The line holding position ``at`` (cut at LINE_CAP) and where the next line starts.

    A longer line keeps its start, unless the error at ``at`` lies in the last quarter of
    what is kept or beyond: then what is kept starts a quarter of LINE_CAP before the error.
    """
    start = text.rfind("\n", max(0, at - LINE_CAP), at) + 1  # 0 also: no newline that near
    stop = text.find("\n", at)
    end, nxt = (len(text), len(text)) if stop < 0 else (stop, stop + 1)
    if at - start > LINE_CAP - LINE_CAP // 4 and end - start > LINE_CAP:
        start = at - LINE_CAP // 4
    return text[start : min(nxt, start + LINE_CAP)].rstrip("\r\n"), nxt


class _Summaries:
    """The runner rows, compiled into one regex tried at line starts."""

    def __init__(self, runners: tuple[Summary, ...]) -> None:
        self.rows = {
            f"r{i}": (re.compile(r.failing) if r.failing else None, r.partial)
            for i, r in enumerate(runners)
        }
        self.counts = [r.count for r in runners if r.count]
        lead = r"\n[ ]*+(?:=++[ ]++)?"
        if all(r.starts for r in runners):  # a row without ``starts`` may begin anyhow
            lead = rf"\n(?=[ =]|{_starts(runners)})[ ]*+(?:=++[ ]++)?(?={_starts(runners)})"
        body = "|".join(f"(?P<r{i}>{r.summary})" for i, r in enumerate(runners))
        self.regex = re.compile(f"{lead}(?:{body})")

    def failing_in(self, text: str) -> int | None:
        """The failing-test count the summaries of a text give, or None when there is none."""
        tail = "\n" + text[-TAIL_CAP:]
        if "\x1b" in tail:
            tail = _ANSI.sub("", tail)
        found = False
        whole: dict[str, int] = {}
        parts: dict[str, int] = {}
        for m in self.regex.finditer(tail):
            found = True
            name = m.lastgroup or ""
            summary = m[name]
            failing, partial = self.rows[name]
            bad = 0
            if failing is not None:
                for hit in failing.finditer(summary):
                    bad += sum([int(g) for g in hit.groups() if g]) if failing.groups else 1
            into = parts if partial and partial in summary else whole
            into[name] = into.get(name, 0) + bad
        counted = 0
        for literal in self.counts:
            if literal[0] in text:
                counted += text.count(literal)
        if not (found or counted):
            return None
        total = sum(whole.values()) + counted
        return total + sum(bad for name, bad in parts.items() if name not in whole)


def _starts(runners: tuple[Summary, ...]) -> str:
    """How the summaries begin, as one regex: one class of the characters, then the others."""
    chars: list[str] = []
    others: list[str] = []
    for one in dict.fromkeys(r.starts for r in runners):
        if re.fullmatch(r"\\d|\[[^\]\\]*(?:\\.[^\]\\]*)*\]|\w", one):
            chars.append(one[1:-1] if one.startswith("[") else one)
        else:
            others.append(f"(?:{one})")
    return "|".join(([f"[{''.join(chars)}]"] if chars else []) + others)


class Engine:
    """The rows of one ``Rules``, compiled on first use, and the readings made with them."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self._passes: list[_Pass] | None = None
        self._finder: _Finder | None = None
        self._summaries: _Summaries | None = None

    def _compile_passes(self) -> list[_Pass]:
        groups: dict[str, list[tuple[int, Scrubber]]] = {}
        for order, row in enumerate(self.rules.scrubbers):
            key = f"{row.view}{row.needs}{row.lead}" if row.lead else f"row {order}"
            groups.setdefault(key, []).append((order, row))
        self._passes = [_Pass(rows) for rows in groups.values()]
        return self._passes

    def scrub_view(self, raw: bytes, view: bytes) -> bytes:
        """The bytes with their volatile values masked, ``raw`` itself when there is none."""
        spans: list[_Span] = []
        for one in self._passes or self._compile_passes():
            if one.needs and one.needs not in view:
                continue
            text = view if one.view else raw
            masks = one.masks
            for m in one.regex.finditer(text):
                mask = masks[m.lastgroup or ""]
                start = m.start()
                if mask.raw and not raw.startswith(mask.raw, start):
                    continue
                if mask.before is not None:
                    before = mask.before.search(text, max(0, start - mask.reach), start)
                    if before is None:
                        continue
                    if mask.wide:
                        start = before.start(1)
                spans.append((start, mask.order, m.end(), mask.token))
        if not spans:
            return raw
        spans.sort()
        parts: list[bytes] = []
        at = 0
        for start, _, end, token in spans:
            if start < at:  # overlaps an earlier replacement
                continue
            parts.append(raw[at:start])
            parts.append(token)
            at = end
        parts.append(raw[at:])
        return b"".join(parts)

    def finder(self) -> _Finder:
        """The error-line rows, compiled."""
        if self._finder is None:
            self._finder = _Finder(self.rules.errors)
        return self._finder

    def failing(self, texts: Iterable[str]) -> int | None:
        """The failing count of the summaries of the texts, summed; None without a summary."""
        summaries = self._summaries
        if summaries is None:
            summaries = self._summaries = _Summaries(self.rules.summaries)
        result: int | None = None
        for text in texts:
            if text:
                count = summaries.failing_in(text)
                if count is not None:
                    result = count if result is None else result + count
        return result


_engines: dict[Rules, Engine] = {}
_ENGINES = 16  # rule sets whose engines are kept, first in first out


def engine_for(rules: Rules) -> Engine:
    """The engine of a rule set: one per set (by identity), compiled as it is used."""
    engine = _engines.get(rules)
    if engine is None:
        engine = _engines[rules] = Engine(rules)
        if len(_engines) > _ENGINES:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread
                del _engines[next(iter(_engines))]
    return engine


def in_words(text: str, rules: Rules) -> str:
    """A scrubbed text as people and models read it: each placeholder's ``<...>`` as ``…``.

    Reasons and hints show a result's label or error line; the fingerprint keeps the
    placeholders (the same on every machine), the words keep none (a config's too).

    Example:
        >>> from antiloop.core.rules.ruleset import BUILTIN
        >>> in_words("took <dur> at 0x<hex>", BUILTIN), in_words("in /x <tm…", BUILTIN)
        ('took … at 0x…', 'in /x …')
    """
    if "<" not in text:
        return text
    for row in rules.scrubbers:
        token = row.placeholder
        if token in text:
            text = text.replace(token, re.sub(r"<[^<>]*>", "…", token))
    cut = text.rfind("<")
    if text.endswith("…") and cut >= 0 and ">" not in text[cut:]:  # a label cut in one
        text = text[:cut] + "…"
    return text
