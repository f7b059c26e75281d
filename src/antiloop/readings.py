"""Result readings: when two results of one procedure are the same (docs/protocol.md section 4).

``read_result`` turns a step's result into a compact ``Readings`` (digests and a few small
values; no whole output is kept). ``same_result`` compares two readings: the same when AT LEAST
ONE criterion holds (exact text, scrubbed text, match set or count, error line, failing-test
count, no file changed) and NO state reading both have disagrees (exit code, failing count,
error line, match reading, file hash or mtime).

How it stays cheap (it runs on every step; a 2 KB output costs a few microseconds):

- Scrubbing works on the UTF-8 bytes the digest needs anyway. One ``bytes.translate`` lowers
  ASCII letters and turns every digit into ``0``, so the volatile-value patterns start with a
  single literal and the regex engine jumps between candidates instead of testing each
  character against a class. The rarer patterns (process ids, temporary paths, job ids) run
  only when a substring check says they can match. A text is handled in slices of about 1 MiB
  cut after a newline (volatile values never span lines), so a 100 MB output is never copied
  whole: its digests are fed slice by slice.
- Digests are SHA-1 (not for security: it is the fastest stable digest in ``hashlib`` here),
  cut to 16 hex digits. The scrubbed digest reuses the exact one when scrubbing changed
  nothing.
- Match sets (lines) are read only for ``grep`` and ``list`` operations.
- The error line and the failing count are read only from ``error`` and, for steps that run
  something, from the output. The error line is searched in the first 512 KiB of a text and,
  when not found there, in its last 64 KiB. Test-runner summaries are read from the last
  64 KiB (``go test``'s ``--- FAIL:`` lines are counted over the whole text).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any, AnyStr

from antiloop.events import FileState
from antiloop.redact import redact_text

__all__ = ["Readings", "SameResult", "read_result", "same_result", "scrub"]

MATCH_OPERATIONS = frozenset({"grep", "list"})
"""Operations whose output lists things found (files or matching lines)."""

HEAD_CHARS = 50
"""The longest result summary (docs/protocol.md section 6)."""

ERROR_HEAD_CAP = 512 * 1024
"""How much of a text's start is searched for its first error line."""

TAIL_CAP = 64 * 1024
"""How much of a text's end is searched for an error line (after the head) and summaries."""

LINE_CAP = 400
"""The longest error line kept; a longer one is cut (minified code, long JSON)."""

SLICE = 1024 * 1024
"""Texts are scrubbed and hashed in slices of about this many characters."""

SMALL = 256 * 1024
"""Output and error up to this many characters together are read whole, through the cache."""

KNOWN = 1024
"""How many recent texts' readings the cache keeps."""


def _source(pattern: AnyStr, flags: int = 0) -> tuple[AnyStr, int]:
    """A pattern's source and flags, compiled by ``_Patterns`` on first use."""
    return pattern, flags


class _Patterns:
    """The regular expressions, each compiled on first use.

    A hook starts a new process per tool call and reads one result: compiling every pattern
    at import time would cost more than the reading. After its first use a pattern is a plain
    instance attribute.
    """

    @cached_property
    def number_re(self) -> re.Pattern[bytes]:
        return re.compile(*_NUMBER_RE_SRC)

    @cached_property
    def month_before(self) -> re.Pattern[bytes]:
        return re.compile(*_MONTH_BEFORE_SRC)

    @cached_property
    def pid_before(self) -> re.Pattern[bytes]:
        return re.compile(*_PID_BEFORE_SRC)

    @cached_property
    def tmp_re(self) -> re.Pattern[bytes]:
        return re.compile(*_TMP_RE_SRC)

    @cached_property
    def win_tmp_re(self) -> re.Pattern[bytes]:
        return re.compile(*_WIN_TMP_RE_SRC)

    @cached_property
    def fail_prefix(self) -> re.Pattern[str]:
        return re.compile(*_FAIL_PREFIX_SRC)

    @cached_property
    def fail_word(self) -> re.Pattern[str]:
        return re.compile(*_FAIL_WORD_SRC)

    @cached_property
    def no_error_re(self) -> re.Pattern[str]:
        return re.compile(*_NO_ERROR_RE_SRC)

    @cached_property
    def traceback_end(self) -> re.Pattern[str]:
        return re.compile(*_TRACEBACK_END_SRC)

    @cached_property
    def ansi_re(self) -> re.Pattern[str]:
        return re.compile(*_ANSI_RE_SRC)

    @cached_property
    def timeout_re(self) -> re.Pattern[str]:
        return re.compile(*_TIMEOUT_RE_SRC)

    @cached_property
    def error_re(self) -> re.Pattern[str]:
        return re.compile(*_ERROR_RE_SRC)

    @cached_property
    def summary_re(self) -> re.Pattern[str]:
        return re.compile(*_SUMMARY_RE_SRC)

    @cached_property
    def pytest_bad(self) -> re.Pattern[str]:
        return re.compile(*_PYTEST_BAD_SRC)

    @cached_property
    def failed(self) -> re.Pattern[str]:
        return re.compile(*_FAILED_SRC)

    @cached_property
    def unittest_bad(self) -> re.Pattern[str]:
        return re.compile(*_UNITTEST_BAD_SRC)

    @cached_property
    def junit_errors(self) -> re.Pattern[str]:
        return re.compile(*_JUNIT_ERRORS_SRC)

    @cached_property
    def count_only_re(self) -> re.Pattern[str]:
        return re.compile(*_COUNT_ONLY_RE_SRC)

    @cached_property
    def none_found_re(self) -> re.Pattern[str]:
        return re.compile(*_NONE_FOUND_RE_SRC)

    @cached_property
    def header_re(self) -> re.Pattern[bytes]:
        return re.compile(*_HEADER_RE_SRC)


_RX = _Patterns()


# --------------------------------------------------------------------------------------------
# Scrubbing. Patterns run over the "class view" of the bytes: ASCII letters lower-cased and
# digits 1-9 turned into 0, the same length as the bytes, so a span in the view is a span in
# the bytes.

_VIEW = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ123456789", b"abcdefghijklmnopqrstuvwxyz000000000"
)
_UNIT = rb"(?:ns|us|\xc2\xb5s|\xce\xbcs|ms|s|secs?|seconds?|mins?|minutes?|hrs?|hours?|h)"
_MONTHS = rb"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_TIME_TAIL = rb"(?:[.,]0+)?(?: ?[ap]m(?!\w))?(?:z(?!\w)|[+-]00:?00(?!0))?"

# Starts at the first digit of a number (not inside a word, a decimal or a file:line). After
# the digits, a lookahead drops at once the numbers no volatile value can continue (most). A
# number after "pid ", "process ", "[1] " ... is a candidate process id, checked afterwards.
_NUMBER_RE_SRC = _source(
    rb"0(?<![\w.:]0)(?:0*+(?=[-/:x.hmnust,\xc2\xce]| [nusmhjfaod0\xc2\xce])(?:"
    # 0.52s, 412ms, 3 ms, 4.1 s, 1m30s, 2h30m, 1.5 seconds
    rb"(?P<dur>(?:\.0++)?(?:[hm]0++(?:\.0++)?)*+ ?" + _UNIT + rb"(?!\w)|h00?m(?!\w))"
    # 04:28:00, 4:28:00.123 pm, 04:28:00+01:00
    rb"|(?P<time>:(?<![0-9]{3}:)00:00(?![0-9:])" + _TIME_TAIL + rb")"
    # 2025-11-30, 2025/11/30, with an optional time (ISO 8601); 30/11/2025; 30 Nov 2025
    rb"|(?P<date>[-/](?<![0-9]{5}[-/])(?<=[0-9]{4}[-/])00?[-/]00?(?!0)"
    rb"(?:[t ]00?:00(?::00)?(?!0)" + _TIME_TAIL + rb")?"
    rb"|[-/](?<![0-9]{3}[-/])00?[-/]0000(?!0)"
    rb"| (?<![0-9]{3} )" + _MONTHS + rb",? 0000(?!0))"
    # 0x7f3a9c2e1b40 (the first digit is checked to be 0)
    rb"|(?P<hex>x(?<![0-9]{2}x)[0-9a-f]{4,}(?!\w))"
    # the day and year of a month-first date (Nov 30, 2025): the month is checked before it
    rb"|(?P<mday>(?<![0-9]{3})(?:st|nd|rd|th)?,? 0000(?!0))"
    rb")"
    # pid 4242, PID: 4242, ppid=1, pgid 17, process 4242; "[1] 4242" (shell job control)
    rb"|(?P<pid>(?:(?<=[dsp\]+][ \t:=#]0)|(?<=[ds]: 0))0*+(?![0-9])))"
)
_MONTH_BEFORE_SRC = _source(rb"(?:^|[^\w])" + _MONTHS + rb" $")
_PID_BEFORE_SRC = _source(
    rb"(?:(?:^|[^\w])(?:p?pid|pgid|process(?: group)?(?: id)?)[ \t]*[:=#]?[ \t]*"
    rb"|(?:^|[^\w\[])\[0+\]\+? )$"
)
_TMP_END = rb"[^\s'\"`:,;()\[\]{}<>|]*"
# /tmp/..., /var/tmp/..., /var/folders/... (macOS), /private/var/folders/..., /dev/shm/...
_TMP_RE_SRC = _source(
    rb"(?P<tmp>/(?<![\w.]/)(?:private/)?(?:tmp|var/tmp|var/folders|dev/shm)(?![\w.-])"
    rb"(?:/" + _TMP_END + rb")?)"
)
# C:\Users\me\AppData\Local\Temp\..., C:\Windows\Temp\...
_WIN_TMP_RE_SRC = _source(
    rb"(?P<tmp>\\(?<![\w.]\\)(?:[^\s\\]+\\)*?(?:appdata\\local\\temp|windows\\temp)(?![\w.-])"
    rb"(?:\\[^\s'\"`:,;()\[\]{}<>|]*)?)"
)
_PLACEHOLDER = {
    "date": b"<date>",
    "mday": b"<date>",
    "time": b"<time>",
    "hex": b"0x<hex>",
    "dur": b"<dur>",
    "pid": b"<pid>",
    "tmp": b"<tmp>",
}
_Span = tuple[int, int, bytes]


def _number_spans(view: bytes, raw: bytes, spans: list[_Span]) -> None:
    for m in _RX.number_re.finditer(view):
        kind = m.lastgroup
        start = m.start()
        if kind == "hex":
            if raw[start] != 0x30:  # "0x", not "5x"
                continue
        elif kind == "mday":
            before = _RX.month_before.search(view, max(0, start - 14), start)
            if before is None:
                continue
            start = before.start() + (0 if view[before.start()] in b"jfmasond" else 1)
        elif kind == "pid" and _RX.pid_before.search(view, max(0, start - 24), start) is None:
            continue
        spans.append((start, m.end(), _PLACEHOLDER[kind or "dur"]))


def _group_spans(pattern: re.Pattern[bytes], view: bytes, spans: list[_Span]) -> None:
    for m in pattern.finditer(view):
        kind = m.lastgroup or "pid"
        spans.append((m.start(kind), m.end(kind), _PLACEHOLDER[kind]))


def _scrub_bytes(raw: bytes) -> bytes:
    """The bytes of a text with its volatile values replaced; ``raw`` itself when none."""
    return _scrub_view(raw, raw.translate(_VIEW))


def _scrub_view(raw: bytes, view: bytes) -> bytes:
    """``_scrub_bytes`` given the class view of ``raw``."""
    spans: list[_Span] = []
    if b"0" in view:
        _number_spans(view, raw, spans)
    if b"/" in view:
        _group_spans(_RX.tmp_re, view, spans)
    if b"\\" in view:
        _group_spans(_RX.win_tmp_re, view, spans)
    if not spans:
        return raw
    spans.sort()
    parts: list[bytes] = []
    at = 0
    for start, end, token in spans:
        if start < at:  # overlaps an earlier replacement
            continue
        parts.append(raw[at:start])
        parts.append(token)
        at = end
    parts.append(raw[at:])
    return b"".join(parts)


def _slices(text: str) -> Iterator[str]:
    """The text in slices of about SLICE characters, each cut after a newline where possible."""
    size = len(text)
    if size <= SLICE:
        yield text
        return
    start = 0
    while start < size:
        cut = text.find("\n", start + SLICE, start + 2 * SLICE)
        end = size if start + SLICE >= size else (cut + 1 if cut >= 0 else start + SLICE)
        yield text[start:end]
        start = end


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def scrub(text: str) -> str:
    """Replace the volatile values of a text by placeholders.

    Durations (``0.52s``, ``412ms``, ``3 ms``), clock times, dates, hex addresses, process and
    process-group ids and temporary paths become ``<dur>``, ``<time>``, ``<date>``,
    ``0x<hex>``, ``<pid>`` and ``<tmp>``. Plain numbers (counts, line numbers, percentages)
    stay. A text with nothing to replace comes back as it is.

    Example:
        >>> scrub("3 failed, 10 passed in 0.52s")
        '3 failed, 10 passed in <dur>'
    """
    if not text:
        return text
    pieces: list[str] = []
    changed = False
    for part in _slices(text):
        raw = _encode(part)
        done = _scrub_bytes(raw)
        if done is raw:
            pieces.append(part)
        else:
            changed = True
            pieces.append(done.decode("utf-8", "surrogatepass"))
    return "".join(pieces) if changed else text


# --------------------------------------------------------------------------------------------
# Digests.

_SEPARATOR = b"\xff"  # never occurs in UTF-8: output and error cannot run into each other


def _new_hash() -> hashlib._Hash:
    return hashlib.sha1(usedforsecurity=False)


def _short(text: str) -> str:
    h = _new_hash()
    h.update(_encode(text))
    return h.hexdigest()[:16]


class _TextDigests:
    """Feeds texts to the exact and the scrubbed digest; keeps what the readings need."""

    __slots__ = ("exact", "head", "lines", "scrubbed")

    def __init__(self, want_lines: bool) -> None:
        self.exact = _new_hash()
        self.scrubbed: hashlib._Hash | None = None
        self.head: bytes = b""
        self.lines: list[bytes] | None = [] if want_lines else None

    def feed(self, text: str, keep: bool) -> None:
        """Hash one text; with ``keep``, remember its scrubbed head (and lines when wanted)."""
        first = True
        for part in _slices(text):
            raw = _encode(part)
            done = _scrub_bytes(raw)
            if done is not raw and self.scrubbed is None:
                self.scrubbed = self.exact.copy()
            self.exact.update(raw)
            if self.scrubbed is not None:
                self.scrubbed.update(done)
            if keep:
                if first:
                    self.head = done[: 16 * HEAD_CHARS]
                if self.lines is not None:
                    self.lines.extend(done.split(b"\n"))
            first = False

    def separate(self) -> None:
        """Mark the end of one text (output) before the next (error)."""
        self.exact.update(_SEPARATOR)
        if self.scrubbed is not None:
            self.scrubbed.update(_SEPARATOR)

    def digests(self) -> tuple[str, str]:
        exact = self.exact.hexdigest()[:16]
        return exact, (self.scrubbed.hexdigest()[:16] if self.scrubbed is not None else exact)


# --------------------------------------------------------------------------------------------
# Error lines.

_KEYWORDS = ("error", "exception", "fatal")
_CASED = {"error": "Error", "exception": "Exception"}
_FAIL_PREFIX_SRC = _source(r"[ \t]*(?:--- )?$")
_FAIL_WORD_SRC = _source(r"FAIL(?:ED)?\b")
_TRACEBACK = "Traceback (most recent call last):"
# A line that says there is no error: "Error: (none)", "0 errors", "no errors", "errors: 0".
_NO_ERROR_RE_SRC = _source(
    r"(?i)\b(?:no|0|zero|without)\s+errors?(?:\(s\))?(?!\w)"
    r"|\berrors?(?:\(s\))?\s*[:=]\s*(?:\(none\)|none\s*$|0(?![\w.]))"
)
# After "Traceback (most recent call last):", the indented frames, then the exception line.
_TRACEBACK_END_SRC = _source(r"(?:[ \t][^\n]*\n|\n)*([^\n]+)")
_ANSI_RE_SRC = _source(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
# A line that says the command timed out (section 4, v1.1): "timed out" in any case, the word
# Timeout (capitalised or upper case: not a setting such as "timeout=30" or a plugin name such
# as "timeout-2.3.1"), TimeoutExpired, and jest's "Exceeded timeout of 5000 ms".
_TIMEOUT_RE_SRC = _source(
    r"(?<![\w.-])(?i:timed out)(?!\w)"
    r"|(?<![\w.=/-])(?:Timeout|TIMEOUT)(?![\w=./-])"
    r"|\bTimeoutExpired\b"
    r"|(?i:\bexceeded (?:the )?timeout\b)"
)
_TIMEOUT_HINTS = ("imed out", "IMED OUT", "imeout", "IMEOUT")
# The slow path, for the rare text whose lower-casing changes its length.
_ERROR_RE_SRC = _source(
    r"(?i:(?<!\w)(?:error|exception|fatal)(?!\w))|(?:Error|Exception):"
    r"|^[ \t]*(?:--- )?FAIL(?:ED)?\b|^Traceback \(most recent call last\):"
    r"|" + _TIMEOUT_RE_SRC[0],
    re.MULTILINE,
)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _next_keyword(text: str, low: str, word: str, pos: int, end: int) -> int:
    """Where ``word`` next reads as an error (whole word, or ``…Error:``), or -1."""
    size = len(word)
    cased = _CASED.get(word)
    while True:
        at = low.find(word, pos, end)
        if at < 0:
            return -1
        after = at + size
        if (at == 0 or not _is_word(low[at - 1])) and (
            after >= len(low) or not _is_word(low[after])
        ):
            return at
        if cased is not None and text.startswith(cased, at) and text.startswith(":", after):
            return at
        pos = at + 1


_VIEW_KEYWORDS = tuple((word.encode(), _CASED.get(word)) for word in _KEYWORDS)
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _next_keyword_in_view(
    text: str, view: bytes, word: bytes, cased: str | None, pos: int, end: int
) -> int:
    """``_next_keyword`` on the class view of an ASCII text (already lower-cased)."""
    size = len(word)
    while True:
        at = view.find(word, pos, end)
        if at < 0:
            return -1
        after = at + size
        if (at == 0 or view[at - 1] not in _WORD_BYTES) and (
            after >= len(view) or view[after] not in _WORD_BYTES
        ):
            return at
        if cased is not None and text.startswith(cased, at) and text.startswith(":", after):
            return at
        pos = at + 1


def _line_start_at(text: str, at: int) -> bool:
    start = text.rfind("\n", max(0, at - LINE_CAP), at) + 1
    return _RX.fail_prefix.match(text, start, at) is not None


def _next_line_start(text: str, needle: str, pos: int, end: int) -> int:
    """Where a line starting (after blanks or ``--- ``) with ``FAIL``/``FAILED``/a traceback is."""
    while True:
        at = text.find(needle, pos, end)
        if at < 0:
            return -1
        if needle == _TRACEBACK:
            if at == 0 or text[at - 1] == "\n":
                return at
        elif _RX.fail_word.match(text, at) and _line_start_at(text, at):
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


def _next_candidate(text: str, low: str | bytes, pos: int) -> int:
    """The earliest position from ``pos`` on that may start an error line, or -1.

    ``low`` is the lower-cased text, or the class view of an ASCII text (same positions).
    """
    best = len(text)
    if isinstance(low, bytes):
        for view_word, cased in _VIEW_KEYWORDS:
            if view_word == b"exception" and b"x" not in low:
                continue
            found = _next_keyword_in_view(text, low, view_word, cased, pos, best)
            if found >= 0:
                best = found
    else:
        for word in _KEYWORDS:
            found = _next_keyword(text, low, word, pos, best)
            if found >= 0:
                best = found
    for needle in ("FAIL", _TRACEBACK):
        if needle[0] in text:  # one byte searched by memchr, far cheaper than the word
            found = _next_line_start(text, needle, pos, best)
            if found >= 0:
                best = found
    if any(hint in text for hint in _TIMEOUT_HINTS):
        timeout = _RX.timeout_re.search(text, pos, best)
        if timeout is not None:
            best = timeout.start()
    return best if best < len(text) else -1


def _slow_candidate(text: str, pos: int) -> int:
    m = _RX.error_re.search(text, pos)
    return -1 if m is None else m.start()


def _first_error_in(text: str, view: bytes | None = None) -> str | None:
    """The first error line of a text (or of a capped part of one).

    ``view`` is the class view of the text when it is ASCII: it is already lower-cased.
    """
    low: str | bytes = text.lower() if view is None else view
    fast = len(low) == len(text)  # lower-casing kept every position (nearly always)
    pos = 0
    while pos < len(text):
        at = _next_candidate(text, low, pos) if fast else _slow_candidate(text, pos)
        if at < 0:
            return None
        line, nxt = _line_around(text, at)
        if line.lstrip().startswith(_TRACEBACK):
            last = _RX.traceback_end.match(text, nxt)
            return last.group(1)[:LINE_CAP] if last else line
        if not _RX.no_error_re.search(line):
            return line
        pos = nxt
    return None


def _first_error_line(text: str, view: bytes | None = None) -> str | None:
    """The first line of ``text`` that reads as an error (docs/protocol.md section 4), unscrubbed.

    ``view``: the class view of the text when it is ASCII, or None.
    """
    size = len(text)
    if size <= ERROR_HEAD_CAP + TAIL_CAP:
        if "\x1b" not in text:
            return _first_error_in(text, view)
        parts = [text]
    else:
        parts = [text[:ERROR_HEAD_CAP], text[size - TAIL_CAP :]]
    for part in parts:
        if "\x1b" in part:
            part = _RX.ansi_re.sub("", part)
        found = _first_error_in(part)
        if found is not None:
            return found
    return None


def _error_line(texts: Iterable[str], views: Iterable[bytes | None] = ()) -> str | None:
    """The scrubbed first error line of the first text that has one.

    ``views``: for each text, its class view when the text is ASCII, else None.
    """
    views = iter(views)
    for text in texts:
        view = next(views, None)
        if text:
            line = _first_error_line(text, view)
            if line is not None:
                line = " ".join(scrub(line).split())
                if line:
                    return line
    return None


# --------------------------------------------------------------------------------------------
# Failing tests, from test-runner summaries. One pattern, tried at each line start only (the
# tail is read with a "\n" in front); lookaheads drop at once the lines no summary begins
# (before and after the leading blanks), so the alternatives run on few lines.

_SUMMARY_RE_SRC = _source(
    r"\n(?=[ =0-9TRt\[oPFn])[ ]*+(?:=++[ ]++)?(?=[\dnTR\[oPF]|test result: )(?:"
    # pytest: "=== 3 failed, 10 passed, 1 error in 0.52s ===", "2 failed in 1.10 seconds"
    r"(?P<pytest>(?:\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?"
    r"|rerun)(?:, |[ ]))+|no tests ran[ ])in \d+(?:\.\d+)?[ ]?s"
    # mocha: "  3 failing" (after "  5 passing (12ms)")
    r"|(?P<mocha>\d+) failing\b|\d+ passing \((?P<mocha_ok>)"
    # RSpec: "5 examples, 2 failures"
    r"|\d+ examples?, (?P<rspec>\d+) failures?"
    # jest: "Tests:       2 failed, 5 passed, 7 total" (not "Test Suites:")
    r"|Tests:[ ]+(?P<jest>[^\n]*\btotal)"
    # vitest: " Tests  2 failed | 5 passed (7)"
    r"|Tests[ ]{2,}(?P<vitest>\d+ [a-z]+(?: \| \d+ [a-z]+)*[ ]+\(\d+\))"
    # Maven Surefire / JUnit: "[ERROR] Tests run: 10, Failures: 2, Errors: 1, Skipped: 0";
    # the per-class lines go on with ", Time elapsed: ..." and count only without a summary
    r"|(?:\[[A-Z]+\][ ]+)?Tests run: \d+,[ ]+Failures: (?P<junit_f>\d+)(?P<junit>[^\n]*)"
    # unittest: "Ran 7 tests in 0.003s", a blank line, "FAILED (failures=2, errors=1)" or "OK"
    r"|Ran \d+ tests? in [^\n]*\n++(?:OK\b(?P<unittest_ok>)|FAILED \((?P<unittest>[^)\n]*)\))"
    # cargo test: "test result: FAILED. 3 passed; 2 failed; ..." (one line per test binary)
    r"|test result: (?:ok|FAILED)\. \d+ passed; (?P<cargo>\d+) failed;"
    # go test: a package verdict line (the "--- FAIL:" lines are counted apart)
    r"|(?:ok[ ]+\S+\t|PASS(?=\n|$)|FAIL\t)(?P<go>)"
    r")"
)
_PYTEST_BAD_SRC = _source(r"(\d+) (?:failed|errors?)\b")
_FAILED_SRC = _source(r"(\d+) failed\b")
_UNITTEST_BAD_SRC = _source(r"(?:^|, )(?:failures|errors)=(\d+)")
_JUNIT_ERRORS_SRC = _source(r",[ ]+Errors: (\d+)")


def _failing_in(text: str) -> int | None:
    """The failing-test count the runner summaries of a text give, or None when there is none."""
    tail = "\n" + text[-TAIL_CAP:]
    if "\x1b" in tail:
        tail = _RX.ansi_re.sub("", tail)
    found = False
    total = 0
    junit_summary: int | None = None
    junit_classes = 0
    for m in _RX.summary_re.finditer(tail):
        found = True
        kind = m.lastgroup
        if kind == "pytest":
            total += sum(map(int, _RX.pytest_bad.findall(m[kind])))
        elif kind in ("jest", "vitest"):
            total += sum(map(int, _RX.failed.findall(m[kind])))
        elif kind in ("mocha", "rspec", "cargo"):
            total += int(m[kind])
        elif kind == "unittest":
            total += sum(map(int, _RX.unittest_bad.findall(m[kind])))
        elif kind == "junit":
            rest = m[kind]
            errors = _RX.junit_errors.match(rest)
            bad = int(m["junit_f"]) + (int(errors[1]) if errors else 0)
            if "Time elapsed" in rest:
                junit_classes += bad
            else:
                junit_summary = (junit_summary or 0) + bad
    go_fails = text.count("--- FAIL:") if "F" in text else 0
    if not (found or go_fails):
        return None
    return total + go_fails + (junit_classes if junit_summary is None else junit_summary)


def _failing(texts: Iterable[str]) -> int | None:
    result: int | None = None
    for text in texts:
        if text:
            count = _failing_in(text)
            if count is not None:
                result = count if result is None else result + count
    return result


# --------------------------------------------------------------------------------------------
# Match sets, for grep and list operations.

_COUNT_WORDS = r"(?:files?|matches|match|results?|lines?|occurrences?|items?|entries|paths?)"
_COUNT_ONLY_RE_SRC = _source(
    r"\s*(?:found\s+)?(\d+)(?:\s+(?:total\s+)?" + _COUNT_WORDS + r"(?:\s+found)?)?"
    r"(?:\s+(?:in|across)\s+\d+\s+files?)?\s*\.?\s*",
    re.IGNORECASE,
)
_NONE_FOUND_RE_SRC = _source(
    r"\s*(?:no\s+" + _COUNT_WORDS + r"\s+found|(?:found\s+)?0\s+\w+(?:\s+found)?)\s*\.?\s*",
    re.IGNORECASE,
)
_HEADER_RE_SRC = _source(rb"\s*found\s+\d+\s+(?:total\s+)?[a-z]+", re.IGNORECASE)
_EMPTY_SET = hashlib.sha1(b"", usedforsecurity=False).hexdigest()[:16]


def _match_reading(lines: list[bytes]) -> tuple[str, int, bool]:
    """(digest of the set of lines, how many found, whether only a number was given)."""
    found = set(map(bytes.strip, lines))
    found.discard(b"")
    if not found:
        return _EMPTY_SET, 0, True
    if len(found) == 1:
        (only,) = found
        if len(only) < 80:
            text = only.decode("utf-8", "replace")
            if _RX.none_found_re.fullmatch(text):
                return _EMPTY_SET, 0, True
            count = _RX.count_only_re.fullmatch(text)
            if count is not None:
                number = int(count[1])
                return _short(f"#{number}"), number, True
    if len(found) > 1:
        header = lines[0] if lines[0].strip() else next(line for line in lines if line.strip())
        if _RX.header_re.match(header):  # "Found 3 files" above the list
            found.discard(header.strip())
    h = _new_hash()
    h.update(b"\n".join(sorted(found)))
    return h.hexdigest()[:16], len(found), False


# --------------------------------------------------------------------------------------------
# Readings and their comparison.


@dataclass(frozen=True, slots=True)
class Readings:
    """What a result reads as: digests, and the state readings the extractors found.

    Attributes:
        exact: a short digest of (output, error), for the byte-identical comparison.
        exit_code: the process exit code, where there is one.
        scrubbed: a short digest of the scrubbed output and error.
        head: the start of the scrubbed output (without output, of the error): one line,
            white space collapsed, at most 50 characters.
        matches: for ``grep``/``list`` operations, a digest of the set of scrubbed non-empty
            lines (any order); ``None`` for other operations.
        match_count: for ``grep``/``list``: the number of lines found, or the number the
            output gives when it gives only one ("Found 12 files"); 0 for an empty output.
        count_only: the match reading is only a number (compare counts, not sets).
        error_line: the scrubbed first error line, from ``error`` and, for steps that run
            something, from the output.
        failing: failing tests from test-runner summaries (0 for a summary without failures);
            ``None`` when there is no summary.
        files: ``(path, sha256, mtime)`` of the touched files after the step, sorted by path.
    """

    exact: str
    exit_code: int | None
    scrubbed: str
    head: str
    matches: str | None
    match_count: int | None
    count_only: bool
    error_line: str | None
    failing: int | None
    files: tuple[tuple[str, str | None, float | None], ...]


@dataclass(frozen=True, slots=True)
class SameResult:
    """How two results are the same: the result part of a fingerprint.

    Attributes:
        label: the summary, at most 50 characters: ``no change``, ``3 failing``, the error
            line, ``12 matches``, or the start of the scrubbed output.
        digest: the first 8 hex digits of a digest of the canonical result (the matched
            readings, or the scrubbed text); the same in every process and on every machine.
    """

    label: str
    digest: str


def _cut(text: str, limit: int = HEAD_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _head(scrubbed_start: bytes) -> str:
    """The start of a scrubbed text on one line, white space collapsed, cut at HEAD_CHARS.

    A few bytes more than HEAD_CHARS nearly always give more than HEAD_CHARS characters; what
    a start gives, up to its last blank (no word, so no secret, is cut short), is the start of
    what all would give, so the cut is the same.
    """
    for size in (2 * HEAD_CHARS, 5 * HEAD_CHARS):
        if len(scrubbed_start) <= size:
            break
        start = scrubbed_start[:size]
        end = max(start.rfind(b" "), start.rfind(b"\n"), start.rfind(b"\t"))
        short = redact_text(" ".join(start[: max(end, 0)].decode("utf-8", "ignore").split()))
        if len(short) > HEAD_CHARS:  # redacted before the cut: no secret is left half-cut
            return short[: HEAD_CHARS - 1].rstrip() + "…"
    return _cut(redact_text(" ".join(scrubbed_start.decode("utf-8", "ignore").split())))


def read_result(
    operation: str,
    runs_something: bool,
    output: str | None,
    error: str | None,
    exit_code: int | None,
    file_states: Mapping[str, FileState],
) -> Readings:
    """Read a step's result into the readings ``same_result`` compares.

    Args:
        operation: the step's operation (docs/protocol.md section 3.1): ``grep``, ``read``, ...
        runs_something: the step runs something (``bash``, ``test``, ``build``, tools outside
            the table): only then does its output give an error line and a failing count.
        output: the tool's output text.
        error: the tool's error text.
        exit_code: the process exit code, where there is one.
        file_states: the touched files' states after the step.

    Returns:
        The readings. The head and the error line are kept in session state and shown in
        fingerprints, so secrets in them are redacted (``antiloop.redact``).

    Example:
        >>> r = read_result("test", True, "=== 3 failed, 10 passed in 0.52s ===", None, 1, {})
        >>> (r.failing, r.exit_code, r.head)
        (3, 1, '=== 3 failed, 10 passed in <dur> ===')
    """
    out = output or ""
    err = error or ""
    wants_matches = operation in MATCH_OPERATIONS
    files: tuple[tuple[str, str | None, float | None], ...] = ()
    if file_states:
        files = tuple(sorted([(p, s.sha256, s.mtime) for p, s in file_states.items()]))
    if len(out) + len(err) <= SMALL:
        return _read_small(wants_matches, runs_something, out, err, exit_code, files)

    texts = _TextDigests(wants_matches)
    if out:
        texts.feed(out, keep=True)
    texts.separate()
    if err:
        texts.feed(err, keep=not out)
    exact, scrubbed = texts.digests()

    matches: str | None = None
    match_count: int | None = None
    count_only = False
    if texts.lines is not None:
        matches, match_count, count_only = _match_reading(texts.lines if out else [])

    error_line: str | None = None
    failing: int | None = None
    if runs_something and (out or err):
        error_line = _error_line((err, out))
        failing = _failing((err, out))
    elif err:
        error_line = _error_line((err,))
        failing = _failing((err,))

    return Readings(
        exact=exact,
        exit_code=exit_code,
        scrubbed=scrubbed,
        head=_head(texts.head),
        matches=matches,
        match_count=match_count,
        count_only=count_only,
        error_line=error_line and redact_text(error_line),
        failing=failing,
        files=files,
    )


_Files = tuple[tuple[str, str | None, float | None], ...]
# (``Readings.__new__`` and the fields by name also work compiled, where it is a native class)
_SETTERS: dict[str, Callable[[Readings, Any], None]] = {
    f.name: getattr(Readings, f.name).__set__ for f in fields(Readings)
}
_SET_EXACT = _SETTERS["exact"]
_SET_EXIT = _SETTERS["exit_code"]
_SET_SCRUBBED = _SETTERS["scrubbed"]
_SET_HEAD = _SETTERS["head"]
_SET_MATCHES = _SETTERS["matches"]
_SET_COUNT = _SETTERS["match_count"]
_SET_COUNT_ONLY = _SETTERS["count_only"]
_SET_ERROR = _SETTERS["error_line"]
_SET_FAILING = _SETTERS["failing"]
_SET_FILES = _SETTERS["files"]
_new_object = Readings.__new__


def _readings(
    exact: str,
    exit_code: int | None,
    scrubbed: str,
    head: str,
    matches: str | None,
    match_count: int | None,
    count_only: bool,
    error_line: str | None,
    failing: int | None,
    files: _Files,
) -> Readings:
    """``Readings(...)``, built through the slots (a frozen dataclass's ``__init__`` is slow)."""
    r: Readings = _new_object(Readings)
    _SET_EXACT(r, exact)
    _SET_EXIT(r, exit_code)
    _SET_SCRUBBED(r, scrubbed)
    _SET_HEAD(r, head)
    _SET_MATCHES(r, matches)
    _SET_COUNT(r, match_count)
    _SET_COUNT_ONLY(r, count_only)
    _SET_ERROR(r, error_line)
    _SET_FAILING(r, failing)
    _SET_FILES(r, files)
    return r


# a step takes 2.5% more instructions without this cache (bench/results/compiled.md)
_known: dict[tuple[bytes, bool, bool], Readings] = {}
"""Readings of recent texts by (digest of output and error, match operation, runs something)."""


def _read_small(
    wants_matches: bool,
    runs_something: bool,
    out: str,
    err: str,
    exit_code: int | None,
    files: _Files,
) -> Readings:
    """``read_result`` for texts of one slice each: one encoding, one view, a cache.

    An agent repeats itself: the readings of a text seen recently are taken from the cache
    (only the exit code and the file states are the step's own).
    """
    raw_out = _encode(out)
    raw_err = _encode(err)
    h = _new_hash()
    h.update(raw_out)
    h.update(_SEPARATOR)
    h.update(raw_err)
    digest = h.digest()
    key = (digest, wants_matches, runs_something)
    known = _known.get(key)
    if known is not None:
        if known.exit_code == exit_code and known.files == files:
            return known
        return _readings(
            known.exact,
            exit_code,
            known.scrubbed,
            known.head,
            known.matches,
            known.match_count,
            known.count_only,
            known.error_line,
            known.failing,
            files,
        )

    exact = digest[:8].hex()
    view_out = raw_out.translate(_VIEW)
    done_out = _scrub_view(raw_out, view_out) if raw_out else raw_out
    view_err = raw_err.translate(_VIEW)
    done_err = _scrub_view(raw_err, view_err) if raw_err else raw_err
    scrubbed = exact
    if done_out is not raw_out or done_err is not raw_err:
        h = _new_hash()
        h.update(done_out)
        h.update(_SEPARATOR)
        h.update(done_err)
        scrubbed = h.hexdigest()[:16]

    matches: str | None = None
    match_count: int | None = None
    count_only = False
    if wants_matches:
        matches, match_count, count_only = _match_reading(done_out.split(b"\n") if out else [])

    error_line: str | None = None
    failing: int | None = None
    if err or (runs_something and out):
        ascii_err = view_err if err.isascii() else None
        if runs_something:
            ascii_out = view_out if out.isascii() else None
            error_line = _error_line((err, out), (ascii_err, ascii_out))
            failing = _failing((err, out))
        else:
            error_line = _error_line((err,), (ascii_err,))
            failing = _failing((err,))

    readings = _readings(
        exact,
        exit_code,
        scrubbed,
        _head(done_out[: 16 * HEAD_CHARS] if out else done_err[: 16 * HEAD_CHARS]),
        matches,
        match_count,
        count_only,
        error_line and redact_text(error_line),
        failing,
        files,
    )
    if len(files) > 8:  # the cache keeps few file states
        return readings
    _known[key] = readings
    if len(_known) > KNOWN:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # evicted already
            del _known[next(iter(_known))]
    return readings


def _files_same(a: Readings, b: Readings) -> bool | None:
    """True when no touched file changed, False when one did, None when it cannot be told.

    A file compares by its hash where both have one, else by its mtime where both have one.
    "No change" needs the same files, each comparable; a file only one result knows, or one
    without a comparable reading, is no veto.
    """
    if not a.files or not b.files:
        return None
    theirs = {path: (sha, mtime) for path, sha, mtime in b.files}
    comparable = len(a.files) == len(b.files)
    for path, sha, mtime in a.files:
        other = theirs.get(path)
        if other is None:
            comparable = False
        elif sha is not None and other[0] is not None:
            if sha != other[0]:
                return False
        elif mtime is not None and other[1] is not None:
            if mtime != other[1]:
                return False
        else:
            comparable = False
    return True if comparable else None


def _matches_same(a: Readings, b: Readings) -> bool | None:
    if a.matches is None or b.matches is None:
        return None
    if a.count_only or b.count_only:
        return a.match_count == b.match_count
    return a.matches == b.matches


def same_result(a: Readings, b: Readings) -> SameResult | None:
    """Say how two results of the same procedure are the same, or None when they are not.

    The same when at least one criterion holds (the same output and error exactly; the same
    scrubbed text; for ``grep``/``list`` the same match set, or count when only a number is
    given; the same error line; the same failing count; no touched file changed) and no state
    reading both results have disagrees (exit code, failing count, error line, match reading,
    file hash or mtime).

    Example:
        >>> a = read_result("test", True, "2 failed, 1 passed in 0.5s", None, 1, {})
        >>> b = read_result("test", True, "2 failed, 1 passed in 0.7s", None, 1, {})
        >>> same_result(a, b).label
        '2 failing'
    """
    # Vetoes: a state reading both have, that differs.
    if a.exit_code is not None and b.exit_code is not None and a.exit_code != b.exit_code:
        return None
    if a.failing is not None and b.failing is not None and a.failing != b.failing:
        return None
    if a.error_line is not None and b.error_line is not None and a.error_line != b.error_line:
        return None
    matches = _matches_same(a, b)
    if matches is False:
        return None
    files = _files_same(a, b)
    if files is False:
        return None

    # Criteria, in the order of the fingerprint summary: the first names the result, all the
    # matched readings make its digest.
    label: str | None = None
    readings: list[str] = []
    if files:
        label = "no change"
        # no modification time: the same no-op edit has one fingerprint at every hour (6)
        readings.append(f"files:{[(path, sha) for path, sha, _ in a.files]!r}")
    if a.failing is not None and a.failing == b.failing:
        label = label or f"{a.failing} failing"
        readings.append(f"failing:{a.failing}")
    if a.error_line is not None and a.error_line == b.error_line:
        label = label or _cut(redact_text(a.error_line))
        readings.append(f"error:{a.error_line}")
    if matches:
        count = a.match_count or 0
        label = label or (f"{count} match" if count == 1 else f"{count} matches")
        only_count = a.count_only or b.count_only
        readings.append(f"count:{count}" if only_count else f"set:{a.matches}")
    if label is not None:
        return SameResult(label, _short("\n".join(readings))[:8])
    if a.exact == b.exact or a.scrubbed == b.scrubbed:
        return SameResult(a.head or "no output", a.scrubbed[:8])
    return None
