"""Result readings: when two results of one procedure are the same (docs/protocol.md section 4).

``read_result`` turns a step's result into a compact ``Readings`` (digests and a few small
values; no whole output is kept). ``same_result`` compares two readings: the same when AT LEAST
ONE criterion holds (exact text, scrubbed text, match set or count, error line, failing-test
count, no file changed) and NO state reading both have disagrees (exit code, failing count,
error line, match reading, file hash or mtime).

What is read comes from the rows of a rule set (``antiloop.core.rules.ruleset.Rules``: test
runners' summaries, error-line rules, scrubbers), passed in (the built-in rows by default) and
compiled by its engine (``antiloop.core.text.engine``). ``read_result`` is the one read path:

- Output and error up to 256 KiB together are read whole, and the readings of a text seen
  recently come from the one cache (``_known``, keyed by ``ReadKey``): an agent repeats
  itself. A larger text is read in slices of about 1 MiB cut after a newline (volatile values
  never span lines), so a 100 MB output is never copied whole; its digests are fed slice by
  slice.
- Digests are SHA-1 (not for security: the fastest stable digest in ``hashlib`` here), cut to
  16 hex digits. The scrubbed digest is the exact one when scrubbing changed nothing.
- Match sets (lines) are read only for ``grep`` and ``list`` operations; the error line and
  the failing count only from ``error`` and, for steps that run something, from the output.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

from antiloop.core.redact import redact_text
from antiloop.core.rules.ruleset import BUILTIN, Rules
from antiloop.core.step import FileState
from antiloop.core.text.engine import VIEW, Engine, engine_for

__all__ = ["ReadKey", "Readings", "SameResult", "read_result", "same_result", "scrub"]

MATCH_OPERATIONS = frozenset({"grep", "list"})
"""Operations whose output lists things found (files or matching lines)."""

HEAD_CHARS = 50
"""The longest result summary (docs/protocol.md section 6)."""

SLICE = 1024 * 1024
"""Texts are scrubbed and hashed in slices of about this many characters."""

SMALL = 256 * 1024
"""Output and error up to this many characters together are read whole, through the cache."""

KNOWN = 1024
"""How many recent texts' readings the cache keeps."""

_SEPARATOR = b"\xff"  # never occurs in UTF-8: output and error cannot run into each other
_Files = tuple[tuple[str, str | None, float | None], ...]


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


class ReadKey(NamedTuple):
    """What the cache knows a text's readings by."""

    digest: bytes  # SHA-1 of the output, a separator and the error
    matches: bool  # read as a grep or list operation (its match set)
    runs: bool  # the step runs something (its output's error line and failing count)
    rules: Rules  # the rule set it was read by


_known: dict[ReadKey, Readings] = {}
"""The one cache: readings of recent texts, oldest out first (``KNOWN`` of them)."""


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _new_hash() -> hashlib._Hash:
    return hashlib.sha1(usedforsecurity=False)


def _short(text: str) -> str:
    h = _new_hash()
    h.update(_encode(text))
    return h.hexdigest()[:16]


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


def scrub(text: str, rules: Rules = BUILTIN) -> str:
    """Replace the volatile values of a text by placeholders.

    Durations (``0.52s``, ``412ms``, ``3 ms``), clock times, dates, hex addresses, process and
    process-group ids and temporary paths become ``<dur>``, ``<time>``, ``<date>``,
    ``0x<hex>``, ``<pid>`` and ``<tmp>`` (and the scrubbers of ``rules`` beyond the built-in
    ones, their placeholders). Plain
    numbers (counts, line numbers, percentages) stay. A text with nothing to replace comes
    back as it is.

    Example:
        >>> scrub("3 failed, 10 passed in 0.52s")
        '3 failed, 10 passed in <dur>'
    """
    if not text:
        return text
    engine = engine_for(rules)
    pieces: list[str] = []
    changed = False
    for part in _slices(text):
        raw = _encode(part)
        done = engine.scrub_view(raw, raw.translate(VIEW))
        if done is raw:
            pieces.append(part)
        else:
            changed = True
            pieces.append(done.decode("utf-8", "surrogatepass"))
    return "".join(pieces) if changed else text


def _error_line(
    texts: Iterable[str], views: Iterable[bytes | None] = (), rules: Rules = BUILTIN
) -> str | None:
    """The scrubbed first error line of the first text that has one, unredacted.

    ``views``: for each text, its class view when the text is ASCII, else None.
    """
    finder = engine_for(rules).finder()
    views = iter(views)
    for text in texts:
        view = next(views, None)
        if text:
            line = finder.first_line(text, view)
            if line is not None:
                line = " ".join(scrub(line, rules).split())
                if line:
                    return line
    return None


def read_result(
    operation: str,
    runs_something: bool,
    output: str | None,
    error: str | None,
    exit_code: int | None,
    file_states: Mapping[str, FileState],
    rules: Rules = BUILTIN,
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
        rules: the rule set whose summaries, error rules and scrubbers read the texts.

    Returns:
        The readings. The head and the error line are kept in session state and shown in
        fingerprints, so secrets in them are redacted (``antiloop.core.redact``).

    Example:
        >>> r = read_result("test", True, "=== 3 failed, 10 passed in 0.52s ===", None, 1, {})
        >>> (r.failing, r.exit_code, r.head)
        (3, 1, '=== 3 failed, 10 passed in <dur> ===')
    """
    out = output or ""
    err = error or ""
    wants_matches = operation in MATCH_OPERATIONS
    files: _Files = ()
    if file_states:
        files = tuple(sorted([(p, s.sha256, s.mtime) for p, s in file_states.items()]))
    engine = engine_for(rules)

    key: ReadKey | None = None
    views: tuple[bytes | None, bytes | None] = (None, None)  # (error, output) when ASCII
    if len(out) + len(err) > SMALL:
        exact, scrubbed, head, lines = _read_slices(engine, out, err, wants_matches)
    else:
        raw_out = _encode(out)
        raw_err = _encode(err)
        h = _new_hash()
        h.update(raw_out)
        h.update(_SEPARATOR)
        h.update(raw_err)
        key = ReadKey(h.digest(), wants_matches, runs_something, rules)
        known = _known.get(key)
        if known is not None:
            if known.exit_code == exit_code and known.files == files:
                return known
            return replace(known, exit_code=exit_code, files=files)
        view_out = raw_out.translate(VIEW)
        view_err = raw_err.translate(VIEW)
        done_out = engine.scrub_view(raw_out, view_out) if raw_out else raw_out
        done_err = engine.scrub_view(raw_err, view_err) if raw_err else raw_err
        exact = scrubbed = key.digest[:8].hex()
        if done_out is not raw_out or done_err is not raw_err:
            h = _new_hash()
            h.update(done_out)
            h.update(_SEPARATOR)
            h.update(done_err)
            scrubbed = h.hexdigest()[:16]
        head = (done_out if out else done_err)[: 16 * HEAD_CHARS]
        lines = done_out.split(b"\n") if wants_matches and out else []
        views = (view_err if err.isascii() else None, view_out if out.isascii() else None)

    matches: str | None = None
    match_count: int | None = None
    count_only = False
    if wants_matches:
        matches, match_count, count_only = _match_reading(lines)

    error_line: str | None = None
    failing: int | None = None
    if err or (runs_something and out):
        both = runs_something
        error_line = _error_line((err, out) if both else (err,), views, rules)
        failing = engine.failing((err, out) if both else (err,))

    readings = Readings(
        exact,
        exit_code,
        scrubbed,
        _head(head),
        matches,
        match_count,
        count_only,
        error_line and redact_text(error_line),
        failing,
        files,
    )
    if key is not None and len(files) <= 8:  # the cache keeps few file states
        _known[key] = readings
        if len(_known) > KNOWN:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # evicted already
                del _known[next(iter(_known))]
    return readings


def _read_slices(
    engine: Engine, out: str, err: str, wants_matches: bool
) -> tuple[str, str, bytes, list[bytes]]:
    """(exact digest, scrubbed digest, head, lines) of texts too large to copy whole: by slices."""
    exact = _new_hash()
    scrubbed: hashlib._Hash | None = None  # made at the first volatile value
    head = b""
    lines: list[bytes] = []
    for index, text in enumerate((out, err)):
        if index:
            exact.update(_SEPARATOR)
            if scrubbed is not None:
                scrubbed.update(_SEPARATOR)
        for number, part in enumerate(_slices(text)):
            raw = _encode(part)
            done = engine.scrub_view(raw, raw.translate(VIEW))
            if done is not raw and scrubbed is None:
                scrubbed = exact.copy()
            exact.update(raw)
            if scrubbed is not None:
                scrubbed.update(done)
            if number == 0 and (index == 0 or not out):
                head = done[: 16 * HEAD_CHARS]
            if wants_matches and index == 0:
                lines.extend(done.split(b"\n"))
    digest = exact.hexdigest()[:16]
    return digest, (scrubbed.hexdigest()[:16] if scrubbed is not None else digest), head, lines


# --------------------------------------------------------------------------------------------
# Match sets, for grep and list operations.

_COUNT_WORDS = r"(?:files?|matches|match|results?|lines?|occurrences?|items?|entries|paths?)"
_COUNT_ONLY = re.compile(
    r"\s*(?:found\s+)?(\d+)(?:\s+(?:total\s+)?" + _COUNT_WORDS + r"(?:\s+found)?)?"
    r"(?:\s+(?:in|across)\s+\d+\s+files?)?\s*\.?\s*",
    re.IGNORECASE,
)
_NONE_FOUND = re.compile(
    r"\s*(?:no\s+" + _COUNT_WORDS + r"\s+found|(?:found\s+)?0\s+\w+(?:\s+found)?)\s*\.?\s*",
    re.IGNORECASE,
)
_HEADER = re.compile(rb"\s*found\s+\d+\s+(?:total\s+)?[a-z]+", re.IGNORECASE)
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
            if _NONE_FOUND.fullmatch(text):
                return _EMPTY_SET, 0, True
            count = _COUNT_ONLY.fullmatch(text)
            if count is not None:
                number = int(count[1])
                return _short(f"#{number}"), number, True
    if len(found) > 1:
        header = lines[0] if lines[0].strip() else next(line for line in lines if line.strip())
        if _HEADER.match(header):  # "Found 3 files" above the list
            found.discard(header.strip())
    h = _new_hash()
    h.update(b"\n".join(sorted(found)))
    return h.hexdigest()[:16], len(found), False


# --------------------------------------------------------------------------------------------
# Comparison.


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
