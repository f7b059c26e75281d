"""One rule set: every row the procedure and the result are read by, passed in where used.

A :class:`Rules` holds the rows of both halves: ``programs``, ``wrappers`` and ``runners``
(``antiloop.core.rules.programs``, read by the shell engine) and ``summaries``, ``errors`` and
``scrubbers`` (``antiloop.core.rules.readings``, read by the text engine). Rows enter one way,
``Rules.extend``: ``BUILTIN`` is the empty set extended by the built-in rows, and
``load_rules`` extends ``BUILTIN`` by the rows of a config's ``[canonical]`` and ``[readings]``
tables. Nothing is installed: the ``Policy`` carries the set, and ``procedure_of`` and
``read_result`` take it. A set compares and hashes by identity, so caches key on it.

Example:
    >>> from antiloop.core.rules.programs import Runner
    >>> ward = BUILTIN.extend(runners=[Runner("ward", "test")])
    >>> ward.runners["ward"][0].kind, "ward" in BUILTIN.runners
    ('test', False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from antiloop.core.rules import programs, readings
from antiloop.core.rules.programs import Program, Runner, Wrapper
from antiloop.core.rules.readings import ErrorRule, Scrubber, Summary

__all__ = ["BUILTIN", "EMPTY", "Rules", "load_rules"]


@dataclass(frozen=True, slots=True, eq=False)
class Rules:
    """The rows one guard reads by. Equal only to itself: caches key on its identity.

    Attributes:
        programs: how each program reads its arguments, by name (an alias too).
        wrappers: the commands that run the command after them, by name.
        runners: the programs whose run is a test or a build, by program.
        summaries: how test runners' summaries read, in the order they are tried.
        errors: the error-line rules, in order.
        scrubbers: the volatile values masked before comparing, in order.
    """

    programs: Mapping[str, Program]
    wrappers: Mapping[str, tuple[Wrapper, ...]]
    runners: Mapping[str, tuple[Runner, ...]]
    summaries: tuple[Summary, ...] = ()
    errors: tuple[ErrorRule, ...] = ()
    scrubbers: tuple[Scrubber, ...] = ()

    def extend(
        self,
        programs: Iterable[Program] = (),
        wrappers: Iterable[Wrapper] = (),
        runners: Iterable[Runner] = (),
        summaries: Iterable[Summary] = (),
        errors: Iterable[ErrorRule] = (),
        scrubbers: Iterable[Scrubber] = (),
    ) -> Rules:
        """These rules and more rows, a new set.

        A program or wrapper named as one here replaces it; runners go before the ones of
        their program; summaries, error rules and scrubbers go after the ones here.
        """
        progs = dict(self.programs)
        for p in programs:
            for name in (p.name, *p.aliases):
                progs[name] = p
        wraps = dict(self.wrappers)
        for w in wrappers:
            wraps[w.name] = (w, *(o for o in wraps.get(w.name, ()) if o.sub != w.sub))
        runs = dict(self.runners)
        for r in reversed(list(runners)):
            runs[r.program] = (r, *runs.get(r.program, ()))
        return Rules(
            progs,
            wraps,
            runs,
            (*self.summaries, *summaries),
            (*self.errors, *errors),
            (*self.scrubbers, *scrubbers),
        )


EMPTY = Rules({}, {}, {})
"""No rows at all."""

BUILTIN = EMPTY.extend(
    programs.PROGRAMS,
    programs.WRAPPERS,
    programs.RUNNERS,
    readings.SUMMARIES,
    readings.ERROR_RULES,
    readings.SCRUBBERS,
)
"""The rows of docs/protocol.md sections 3.1-3.2 and 4."""


def load_rules(tables: Mapping[str, Any], source: str = "config") -> Rules:
    """``BUILTIN`` extended by the rows of a config's ``[canonical]`` and ``[readings]`` tables.

    Other tables are left to the parts they configure. Without either table: ``BUILTIN``
    itself. Reading rows installs nothing.

    Raises:
        ConfigError: a bad key or value, named in one line.
    """
    canonical = tables.get("canonical")
    reading = tables.get("readings")
    if canonical is None and reading is None:
        return BUILTIN
    shell = programs.rows_of_table(canonical, source) if canonical is not None else {}
    text = readings.rows_of_table(reading, source) if reading is not None else {}
    return BUILTIN.extend(**shell, **text)
