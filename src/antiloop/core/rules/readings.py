r"""The rows result readings are read by (docs/protocol.md section 4): data, not code.

Three tables, each a tuple of frozen rows that ``antiloop.core.text.engine`` compiles once:

- ``SUMMARIES``: how each test runner's summary reads (pytest, unittest, jest, vitest, mocha,
  RSpec, JUnit/Maven/Gradle, cargo test, go test) and which of its numbers are failing tests;
- ``ERROR_RULES``: which lines are the error line (whole words, line starts, a traceback's
  last line, timeouts) and which say there is none; the first line any rule finds wins;
- ``SCRUBBERS``: what is masked before comparing (durations, clock times, dates, hex
  addresses, process ids, temporary paths) and by which placeholder.

The rule set ``antiloop.core.rules.ruleset.BUILTIN`` is made of them. A config adds rows
(``[readings]`` in ``antiloop.toml``, read by ``rows_of_table``), after the built-in ones::

    [[readings.test_runners]]
    name = "tap"
    summary = '# fail +\d+'     # a summary line, at a line start (after blanks or "=== ")
    failing = '(\d+)'           # the numbers its groups take add up (a match without one: 1)

    [[readings.scrubbers]]
    name = "build id"
    pattern = 'build-[0-9a-f]{8}'  # matched in any case
    placeholder = "<build>"

    [[readings.error_lines]]
    name = "panic"
    pattern = '^panic: '         # a line where it matches is an error line
    no_error = false             # true: a line where it matches says there is no error
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any

from antiloop.core.errors import ConfigError
from antiloop.core.text.suggest import unknown

__all__ = [
    "ERROR_RULES",
    "SCRUBBERS",
    "SUMMARIES",
    "Block",
    "ErrorRule",
    "NoError",
    "Pattern",
    "Scrubber",
    "Summary",
    "Word",
    "rows_of_table",
]


@dataclass(frozen=True, slots=True)
class Summary:
    """A test runner's summary line and the failing tests it names.

    Attributes:
        name: the runner, as errors name the row.
        summary: a regex of a summary; it is tried at each line start of a text's last 64 KiB,
            after blanks and a ``===`` rule.
        failing: a regex searched in the summary: the numbers its groups take add up to the
            failing count (a match without groups counts one); empty, the summary reads 0.
        partial: a summary holding this text is a part's line (a test class), counted only
            where the runner printed no whole summary.
        count: a text counted over the whole output, each a failing test (``--- FAIL:``).
        starts: a regex of how a summary begins (a fast filter); empty: it may begin anyhow.
    """

    name: str
    summary: str
    failing: str = ""
    partial: str = ""
    count: str = ""
    starts: str = ""


@dataclass(frozen=True, slots=True)
class Word:
    """A whole word, in any case, makes an error line; or ``cased`` + ``:`` inside a word."""

    name: str
    word: str
    cased: str = ""


@dataclass(frozen=True, slots=True)
class Block:
    """A line starting with ``literal`` makes an error line.

    Attributes:
        after: a regex the text must match at the literal; empty: any.
        before: a regex the line's start up to the literal must match; empty: nothing precedes.
        then: a regex matched after such a line; its group 1 is the error line (a traceback's
            last line). Any error line that starts (after blanks) with the literal is read so.
    """

    name: str
    literal: str
    after: str = ""
    before: str = ""
    then: str = ""


@dataclass(frozen=True, slots=True)
class Pattern:
    """A line where the regex matches is an error line; tried only where a hint occurs."""

    name: str
    pattern: str
    hints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NoError:
    """A line where the regex matches says there is no error: the search goes on after it."""

    name: str
    pattern: str


ErrorRule = Word | Block | Pattern | NoError


@dataclass(frozen=True, slots=True)
class Scrubber:
    """A volatile value and the placeholder that masks it.

    Attributes:
        pattern: the regex of the value; matched in any case (rows with ``view``: in the class
            view, ASCII lower-cased with every digit read as ``0``; there ``0`` is any digit).
        placeholder: what replaces the value.
        lead: rows with one lead are one regex (lead, then one of their patterns).
        view: match the class view rather than the text.
        needs: a character the view must hold for the row to run (a fast filter).
        before: a regex the text just before the value must match (within ``reach``
            characters, up to the value); its group 1, if any, is masked too.
        raw: the text itself must start with this where the value starts (``0x``, not ``5x``).
    """

    name: str
    pattern: str
    placeholder: str
    lead: str = ""
    view: bool = False
    needs: str = ""
    before: str = ""
    reach: int = 24
    raw: str = ""


SUMMARIES = (
    # "=== 3 failed, 10 passed, 1 error in 0.52s ===", "2 failed in 1.10 seconds"
    Summary(
        "pytest",
        r"(?:(?:\d+ (?:failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?"
        r"|rerun)(?:, |[ ]))+|no tests ran[ ])in \d+(?:\.\d+)?[ ]?s",
        failing=r"(\d+) (?:failed|errors?)\b",
        starts=r"[\dn]",
    ),
    # "  3 failing" (after "  5 passing (12ms)")
    Summary("mocha", r"\d+ failing\b|\d+ passing \(", r"(\d+) failing", starts=r"\d"),
    Summary("rspec", r"\d+ examples?, \d+ failures?", r"(\d+) failures?", starts=r"\d"),
    # "Tests:       2 failed, 5 passed, 7 total" (not "Test Suites:")
    Summary("jest", r"Tests:[ ]+[^\n]*\btotal", r"(\d+) failed\b", starts="T"),
    # " Tests  2 failed | 5 passed (7)"
    Summary(
        "vitest",
        r"Tests[ ]{2,}\d+ [a-z]+(?: \| \d+ [a-z]+)*[ ]+\(\d+\)",
        r"(\d+) failed\b",
        starts="T",
    ),
    # "[ERROR] Tests run: 10, Failures: 2, Errors: 1, Skipped: 0"; the per-class lines go on
    # with ", Time elapsed: ..." and count only without a summary (Maven, Gradle, JUnit 4)
    Summary(
        "junit",
        r"(?:\[[A-Z]+\][ ]+)?Tests run: \d+,[ ]+Failures: \d+[^\n]*",
        r"^(?:\[[A-Z]+\][ ]+)?Tests run: \d+,[ ]+Failures: (\d+)(?:,[ ]+Errors: (\d+))?",
        partial="Time elapsed",
        starts=r"[\[T]",
    ),
    # "Ran 7 tests in 0.003s", a blank line, "FAILED (failures=2, errors=1)" or "OK"
    Summary(
        "unittest",
        r"Ran \d+ tests? in [^\n]*\n++(?:OK\b|FAILED \([^)\n]*\))",
        r"(?:FAILED \(|, )(?:failures|errors)=(\d+)",
        starts="R",
    ),
    # "test result: FAILED. 3 passed; 2 failed; ..." (one line per test binary)
    Summary(
        "cargo",
        r"test result: (?:ok|FAILED)\. \d+ passed; \d+ failed;",
        r"(\d+) failed;",
        starts="test result: ",
    ),
    # a package verdict line; each "--- FAIL:" line, over the whole text, is one failing test
    Summary("go", r"ok[ ]+\S+\t|PASS(?=\n|$)|FAIL\t", count="--- FAIL:", starts="[oPF]"),
)

# A line that says the command timed out: "timed out" in any case, the word Timeout (capitalised
# or upper case: not a setting such as "timeout=30" or a plugin such as "timeout-2.3.1"),
# TimeoutExpired, and jest's "Exceeded timeout of 5000 ms".
_TIMEOUT = (
    r"(?<![\w.-])(?i:timed out)(?!\w)|(?<![\w.=/-])(?:Timeout|TIMEOUT)(?![\w=./-])"
    r"|\bTimeoutExpired\b|(?i:\bexceeded (?:the )?timeout\b)"
)
ERROR_RULES: tuple[ErrorRule, ...] = (
    Word("error", "error", "Error"),  # Error:, error[E0425], npm error, KeyError: 'x'
    Word("exception", "exception", "Exception"),
    Word("fatal", "fatal"),
    Block("FAIL", "FAIL", r"FAIL(?:ED)?\b", r"[ \t]*(?:--- )?$"),  # FAIL, FAILED, --- FAIL
    # after the header, the indented frames, then the exception line
    Block("traceback", "Traceback (most recent call last):", then=r"(?:[ \t][^\n]*\n|\n)*([^\n]+)"),
    Pattern("timeout", _TIMEOUT, ("imed out", "IMED OUT", "imeout", "IMEOUT")),
    # "Error: (none)", "0 errors", "no errors", "errors: 0"
    NoError(
        "no error",
        r"(?i:\b(?:no|0|zero|without)\s+errors?(?:\(s\))?(?!\w)"
        r"|\berrors?(?:\(s\))?\s*[:=]\s*(?:\(none\)|none\s*$|0(?![\w.])))",
    ),
)

_UNIT = r"(?:ns|us|\xc2\xb5s|\xce\xbcs|ms|s|secs?|seconds?|mins?|minutes?|hrs?|hours?|h)"
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_TIME_TAIL = r"(?:[.,]0+)?(?: ?[ap]m(?!\w))?(?:z(?!\w)|[+-]00:?00(?!0))?"
# A number's first digit (not inside a word, a decimal or a file:line), where its digits go on
# with one of the few characters a volatile value goes on with, or follow "pid " or "[1] " (most
# numbers stop here).
_NUMBER = (
    r"0(?<![\w.:]0)(?=0*+(?:[-/:x.hmnust,\xc2\xce]| [nusmhjfaod0\xc2\xce])"
    r"|(?<=[dsp\]+][ \t:=#]0)|(?<=[ds]: 0))"
)
_TMP_END = r"[^\s'\"`:,;()\[\]{}<>|]*"


def _number(name: str, pattern: str, placeholder: str, **more: Any) -> Scrubber:
    return Scrubber(name, pattern, placeholder, lead=_NUMBER, view=True, needs="0", **more)


SCRUBBERS = (
    # 0.52s, 412ms, 3 ms, 4.1 s, 1m30s, 2h30m, 1.5 seconds
    _number(
        "duration",
        r"0*+(?:(?:\.0++)?(?:[hm]0++(?:\.0++)?)*+ ?" + _UNIT + r"(?!\w)|h00?m(?!\w))",
        "<dur>",
    ),
    # 04:28:00, 4:28:00.123 pm, 04:28:00+01:00
    _number("time", r"0*+:(?<![0-9]{3}:)00:00(?![0-9:])" + _TIME_TAIL, "<time>"),
    # 2025-11-30, 2025/11/30, with an optional time (ISO 8601); 30/11/2025; 30 Nov 2025
    _number(
        "date",
        r"0*+(?:[-/](?<![0-9]{5}[-/])(?<=[0-9]{4}[-/])00?[-/]00?(?!0)"
        r"(?:[t ]00?:00(?::00)?(?!0)" + _TIME_TAIL + r")?"
        r"|[-/](?<![0-9]{3}[-/])00?[-/]0000(?!0)"
        r"| (?<![0-9]{3} )" + _MONTHS + r",? 0000(?!0))",
        "<date>",
    ),
    # 0x7f3a9c2e1b40
    _number("hex", r"0*+x(?<![0-9]{2}x)[0-9a-f]{4,}(?!\w)", "0x<hex>", raw="0"),
    # the day and year of a month-first date (Nov 30, 2025), the month masked with them
    _number(
        "month day",
        r"0*+(?<![0-9]{3})(?:st|nd|rd|th)?,? 0000(?!0)",
        "<date>",
        before=r"(?:^|[^\w])(" + _MONTHS + r") $",
        reach=14,
    ),
    # pid 4242, PID: 4242, ppid=1, pgid 17, process 4242; "[1] 4242" (shell job control)
    _number(
        "process id",
        r"(?:(?<=[dsp\]+][ \t:=#]0)|(?<=[ds]: 0))0*+(?![0-9])",
        "<pid>",
        before=r"(?:(?:^|[^\w>])(?:p?pid|pgid|process(?: group)?(?: id)?)[ \t]*[:=#]?[ \t]*"
        r"|(?:^|[^\w\[>])\[0+\]\+? )$",
    ),
    # the line counter of a shell's own messages: "/bin/bash: line 290:", "bash: -c: line 1:",
    # "sh: 1:" (dash), "zsh:3:", "ksh: line 2:" (a script's "./run.sh: line 3:" is no counter)
    Scrubber(
        "shell line",
        r"(?:(?<=bash: line )|(?<=ksh: line )|(?<=/sh: line )|(?<=\nsh: line )|(?<=\Ash: line )"
        r"|(?<=-c: line )|(?<=/sh: )|(?<=\nsh: )|(?<=\Ash: )|(?<=zsh:))0++(?=:)",
        "<line>",
        view=True,
        needs="sh",
    ),
    # /tmp/..., /var/tmp/..., /var/folders/... (macOS), /private/var/folders/..., /dev/shm/...
    Scrubber(
        "temporary path",
        r"/(?<![\w.>]/)(?:private/)?(?:tmp|var/tmp|var/folders|dev/shm)(?![\w.-])(?:/"
        + _TMP_END
        + ")?",
        "<tmp>",
        view=True,
        needs="/",
    ),
    # C:\Users\me\AppData\Local\Temp\..., C:\Windows\Temp\...
    Scrubber(
        "windows temporary path",
        r"\\(?<![\w.>]\\)(?:[^\s\\]+\\)*?(?:appdata\\local\\temp|windows\\temp)(?![\w.-])"
        r"(?:\\" + _TMP_END + ")?",
        "<tmp>",
        view=True,
        needs="\\",
    ),
)

# -- rows from a config ---------------------------------------------------------------------

_KINDS: dict[str, tuple[type[Any], ...]] = {
    "test_runners": (Summary,),
    "scrubbers": (Scrubber,),
    "error_lines": (Pattern, NoError),
}
_REGEXES = ("starts", "summary", "failing", "pattern", "before", "after", "then", "lead")


def rows_of_table(table: Mapping[str, Any], source: str = "config") -> dict[str, list[Any]]:
    """The rows of a ``[readings]`` table (``test_runners``, ``scrubbers``, ``error_lines``).

    Returned by the name ``Rules.extend`` takes them by: summaries, scrubbers, errors.

    Raises:
        ConfigError: one line naming the table, the row and what is wrong with it.
    """
    where = f"{source}: [readings]"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table, not {table!r}")
    found: dict[str, list[Any]] = {kind: [] for kind in _KINDS}
    for kind, rows in table.items():
        if kind not in _KINDS:
            raise ConfigError(f"{where}: {unknown('key', kind, _KINDS)}")
        if not isinstance(rows, Sequence) or isinstance(rows, str):
            raise ConfigError(f"{where} {kind} must be a list of tables ([[readings.{kind}]])")
        for index, row in enumerate(rows):
            found[kind].append(_row(kind, index, row, where))
    return {
        "summaries": found["test_runners"],
        "errors": found["error_lines"],
        "scrubbers": found["scrubbers"],
    }


def _row(kind: str, index: int, row: object, where: str) -> Any:
    name = row.get("name") if isinstance(row, Mapping) else None
    label = f"{where} {kind}[{index}]" + (f" {name!r}" if isinstance(name, str) else "")
    if not isinstance(row, Mapping):
        raise ConfigError(f"{label} must be a table, not {row!r}")
    values: dict[str, Any] = dict(row)
    cls = _KINDS[kind][0]
    if kind == "error_lines":
        no_error = values.pop("no_error", False)
        if not isinstance(no_error, bool):
            raise ConfigError(f"{label}: 'no_error' must be true or false, not {no_error!r}")
        cls = NoError if no_error else Pattern
    known = {f.name: f for f in fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{label}: {unknown('key', key, known)}")
        want = {"bool": bool, "int": int, "tuple[str, ...]": list}.get(str(known[key].type), str)
        if not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
            if want is list
            else type(value) is want
        ):
            kind_name = "list of strings" if want is list else want.__name__
            raise ConfigError(f"{label}: {key!r} must be a {kind_name}, not {value!r}")
        if key in _REGEXES and value:
            try:
                named = re.compile(f"(?:{value})").groupindex  # as the engine joins it
            except re.error as exc:
                raise ConfigError(f"{label}: {key!r} is not a valid regex: {exc}") from None
            if named:
                raise ConfigError(f"{label}: {key!r} has a named group: name none")
    required = [f.name for f in fields(cls) if f.default is MISSING]
    missing = [key for key in required if not values.get(key)]
    if missing:
        raise ConfigError(f"{label}: {missing[0]!r} is required")
    if "hints" in values:
        values["hints"] = tuple(values["hints"])
    return cls(**values)
