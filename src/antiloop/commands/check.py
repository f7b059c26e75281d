"""``antiloop check``: one verdict per step of a JSON-lines stream (docs/protocol.md section 7)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from antiloop.budgets import Budgets
from antiloop.config import GuardConfig, read_settings
from antiloop.core.errors import BadStep
from antiloop.core.history import SessionState
from antiloop.core.step import Step, parse_line
from antiloop.core.verdict import Action, Verdict, invalid_wire
from antiloop.guard import Guard
from antiloop.stores.memory import MemoryStore

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_STOPPED = 3
SUMMARY_VERSION = "antiloop-check/1"
EXPORT_LIMIT = 5.0  # seconds the spans of a run may take to export before check exits
EXIT_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away


class RecentSessions(MemoryStore):
    """A memory store that keeps the ``max_sessions`` most recently active sessions.

    Past that many, the least recently active one is forgotten; if it comes back it starts
    afresh (docs/protocol.md section 7), so memory is bounded however many sessions a stream has.
    """

    def __init__(self, max_sessions: int) -> None:
        super().__init__()
        self.max_sessions = max_sessions
        self._states: OrderedDict[str, SessionState] = OrderedDict()  # O(1) at both ends

    def transaction(self, session: str) -> Any:
        """The session's live state, the session now the most recent one."""
        tx = super().transaction(session)
        states = self._states
        states.move_to_end(session)
        while len(states) > self.max_sessions:
            states.popitem(last=False)
        return tx


def guard_for(config: GuardConfig, budgets: Budgets | None = None) -> Guard:
    """The guard ``antiloop check`` judges with: sessions bounded by ``max_sessions``."""
    return Guard(config=config, store=RecentSessions(config.max_sessions), budgets=budgets)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop check``."""
    parser.add_argument("file", nargs="?", default="-", help="a .jsonl file, or - for stdin")
    parser.add_argument(
        "--config",
        help="a JSON or TOML config (docs/protocol.md section 7; default: ANTILOOP_CONFIG, or "
        "antiloop.toml here or in the nearest parent that has one)",
    )
    parser.add_argument(
        "--no-config", action="store_true", help="read no config file: the defaults apply"
    )
    parser.add_argument(
        "--summary-json",
        metavar="FILE",
        help="write a summary for CI: why the run ended, steps, spend, loops and fingerprints",
    )
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop check``."""
    from antiloop.config import find_config, say_config

    path, how = (None, "none") if ns.no_config else find_config(ns.config)
    say_config(path, how, "check")
    code = run_check(ns.file, str(path) if path else None, ns.summary_json)
    if "antiloop.telemetry" in sys.modules:  # the OTLP environment asked for spans
        from antiloop.telemetry import flush_all

        flush_all(EXPORT_LIMIT)  # a collector that is down: the SDK says so, once it gave up
    return code


def run_check(file: str, config_path: str | None, summary_path: str | None = None) -> int:
    """Judge the stream in ``file`` (``-`` for stdin); returns the exit status.

    With ``summary_path``, the run's summary (``RunSummary``) is written there, however the
    run ended; a spend line goes to stderr when the steps carried usage.
    """
    config, budgets = GuardConfig(), None
    if config_path:
        settings = read_settings(config_path)
        config = settings.config()
        if "budgets" in settings.tables:
            budgets = Budgets.from_mapping(settings.tables["budgets"], settings.source)
    summary = RunSummary(sessions=set() if summary_path is not None else None)
    code, ended = _check(file, config, summary, budgets)
    if ended != "unreadable input" and not summary.steps:
        name = "standard input" if file == "-" else file
        what = f"its {summary.invalid} lines are all invalid" if summary.invalid else "it is empty"
        print(f"antiloop: read no step from {name}: {what}", file=sys.stderr)
    if summary.spend.steps:
        print(f"antiloop: {summary.spend_line()}", file=sys.stderr)
    if summary_path is not None:
        try:
            Path(summary_path).write_text(
                json.dumps(summary.to_dict(ended, code), indent=2) + "\n", encoding="utf-8"
            )
        except OSError as exc:
            print(f"antiloop: cannot write {summary_path}: {exc.strerror or exc}", file=sys.stderr)
            return code or EXIT_USAGE
    return code


def _check(
    file: str, config: GuardConfig, summary: RunSummary, budgets: Budgets | None = None
) -> tuple[int, str]:
    """The exit status and why the run ended."""
    try:
        if file == "-":
            if sys.stdin.isatty():  # a person at a terminal: say what is awaited, not wait mute
                print(
                    "antiloop check: reading steps as JSON lines from the terminal "
                    "(Ctrl-D ends; give a FILE to judge one)",
                    file=sys.stderr,
                )
            typed = sys.stdin.isatty()  # a terminal's end of input is read once: no peek
            if not typed and (why := not_text(_head(sys.stdin.buffer))) is not None:
                print(f"antiloop: standard input is not UTF-8 text ({why})", file=sys.stderr)
                return EXIT_USAGE, "unreadable input"
            code = judge_stream(
                sys.stdin.buffer,
                sys.stdout,
                guard_for(config, budgets),
                flush=True,
                summary=summary,
            )
            return code, _ended(code)
        try:
            stream = Path(file).open("rb")  # noqa: SIM115 - closed below, after the loop
        except OSError as exc:
            print(f"antiloop: cannot read {file}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE, "unreadable input"
        with stream:
            if not stream.isatty() and (why := not_text(_head(stream))) is not None:
                print(f"antiloop: {file} is not UTF-8 text ({why})", file=sys.stderr)
                return EXIT_USAGE, "unreadable input"
            code = judge_stream(stream, sys.stdout, guard_for(config, budgets), summary=summary)
            sys.stdout.flush()
            return code, _ended(code)
    except BrokenPipeError:
        # The reader went away: the verdicts after it were not delivered, which is no success.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit-time flush must not fail again
        os.close(devnull)
        print("antiloop: stdout closed before every verdict was written", file=sys.stderr)
        return EXIT_PIPE, "stdout closed"


def _head(stream: IO[bytes]) -> bytes:
    """The first bytes of a stream, left in it (a buffered reader's peek; else none)."""
    peek = getattr(stream, "peek", None)
    return peek(_HEAD)[:_HEAD] if peek is not None else b""


_HEAD = 65536


def not_text(head: bytes) -> str | None:
    """Why the start of a stream is not UTF-8 text (a binary file), or None when it is.

    A character cut at the end of ``head`` is no fault: the stream goes on past it.

    Example:
        >>> not_text(b'{"tool": "grep"}'), not_text(bytes([0x7F, 69, 76, 70, 2, 1, 0]))
        (None, 'a NUL byte at offset 6')
        >>> not_text(bytes([0xFF]))
        'byte 0xff at offset 0'
    """
    if b"\x00" in head:
        return f"a NUL byte at offset {head.index(0)}"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and exc.end == len(head):
            return None
        return f"byte 0x{head[exc.start]:02x} at offset {exc.start}"
    return None


def _ended(code: int) -> str:
    return "stopped" if code == EXIT_STOPPED else "end of input"


def judge_stream(
    source: IO[bytes],
    out: IO[str],
    guard: Guard,
    *,
    flush: bool = False,
    summary: RunSummary | None = None,
) -> int:
    """Write one verdict line per non-blank input line; returns 3 if a session stopped."""
    stopped = False
    index = 0
    write = out.write
    last: Verdict | None = None  # the verdict written last, and its line after the index
    tail = ""
    for lineno, raw in enumerate(source, 1):
        if not raw or raw.isspace():  # as ``not raw.strip()``, without copying the line
            continue
        verdict, stops = _judge_line(guard, raw, lineno, index, summary)
        del raw  # a huge line is held once at a time, never two
        stopped = stopped or stops
        if isinstance(verdict, dict):
            write(wire_text(verdict))
        else:
            if verdict is not last:  # most steps get the one plain ``continue``: written once
                last, tail = verdict, wire_text(verdict.to_wire(0))[len(_INDEX_0) :]
            write(f'{{"index": {index}, {tail}')
        if flush:
            out.flush()
        index += 1
    return EXIT_STOPPED if stopped else EXIT_OK


_INDEX_0 = '{"index": 0, '
_WIRE_KEYS = ("index", "action", "detector", "outcome", "fingerprint", "reason")
_text_of = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) writes for a str


def wire_text(line: dict[str, object]) -> str:
    """``json.dumps(line, ensure_ascii=False)`` and a newline, written directly for a verdict.

    A verdict line (``Verdict.to_wire``) has six keys in order, an int index and texts or
    nulls: each text goes through the encoder ``json.dumps`` itself uses, so the line is the
    same to the byte, in a third of the time. Any other line goes to ``json.dumps``.
    """
    if tuple(line) == _WIRE_KEYS and type(index := line["index"]) is int:
        parts = []
        for key in _WIRE_KEYS[1:]:
            value = line[key]
            if value is None:
                parts.append("null")
            elif type(value) is str:
                parts.append(_text_of(value))
            else:
                break
        else:
            action, detector, outcome, fingerprint, reason = parts
            return (
                f'{{"index": {index}, "action": {action}, "detector": {detector}, '
                f'"outcome": {outcome}, "fingerprint": {fingerprint}, "reason": {reason}}}\n'
            )
    return json.dumps(line, ensure_ascii=False) + "\n"


def _judge_line(
    guard: Guard, raw: bytes, lineno: int, index: int, summary: RunSummary | None = None
) -> tuple[Verdict | dict[str, object], bool]:
    """The verdict on one input line (an ``invalid`` line's object), and whether it stopped."""
    try:
        step = parse_line(raw)
    except BadStep as exc:
        if summary is not None:
            summary.invalid += 1
        return invalid_wire(index, f"line {lineno}: {exc}"), False
    try:
        verdict = guard.record(step)
    except RecursionError:  # too deep for the engine though within the parser's limit
        if summary is not None:
            summary.invalid += 1
        return invalid_wire(index, f"line {lineno}: nested too deeply to judge"), False
    stops = verdict.action is Action.STOP and verdict.detector not in ("goal", "terminated")
    if summary is not None:
        state = guard.store.peek(step.session)
        summary.add(step, verdict, index, state.steps - 1 if state else 0, stops)
    return verdict, stops


@dataclass
class Spend:
    """Usage summed over steps (PROTOCOL section 2's ``tokens_in``, ``tokens_out``, ``cost_usd``).

    Attributes:
        steps: the steps that carried any usage.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    steps: int = 0

    def add(self, usage: tuple[int | None, int | None, float | None]) -> None:
        """Add one step's usage."""
        tokens_in, tokens_out, cost = usage
        self.tokens_in += tokens_in or 0
        self.tokens_out += tokens_out or 0
        self.cost_usd += cost or 0.0
        self.steps += 1

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": round(self.cost_usd, 6),
            "steps_with_usage": self.steps,
        }

    def line(self) -> str:
        """One line for people."""
        return (
            f"{self.tokens_in} tokens in, {self.tokens_out} out, ${self.cost_usd:.4f} "
            f"({self.steps} steps with usage)"
        )


Usage = tuple[int | None, int | None, float | None]


@dataclass
class _Loop:
    session: str
    agent: str
    fingerprint: str
    detector: str | None
    action: str
    first: int
    evidence: set[int] = field(default_factory=set)


@dataclass
class RunSummary:
    """What ``--summary-json`` writes: why the run ended, the steps, the spend, the loops.

    ``ended`` is ``end of input``, ``stopped`` (a session stopped: exit 3), ``stdout closed``
    or ``unreadable input``; ``loops`` holds one entry per fingerprint and session, with the
    stream index of its first verdict and the session's step indices of its evidence.

    The spend inside loops is the usage of the steps that make a loop verdict's evidence.
    Usage is kept per session only for steps that carry it; ``sessions`` (the names seen) only
    when it is a set, since a stream may have any number of them.
    """

    steps: int = 0
    invalid: int = 0
    spend: Spend = field(default_factory=Spend)
    stopped: list[dict[str, object]] = field(default_factory=list)
    _usage: dict[str, dict[int, Usage]] = field(default_factory=dict)
    _loops: dict[tuple[str, str], _Loop] = field(default_factory=dict)
    sessions: set[str] | None = None

    def add(self, step: Step, verdict: Verdict, index: int, at: int, stops: bool) -> None:
        """One judged step: its stream index, its index in its session, whether it stopped."""
        self.steps += 1
        if self.sessions is not None:
            self.sessions.add(step.session)
        if step.tokens_in is not None or step.tokens_out is not None or step.cost_usd is not None:
            usage = (step.tokens_in, step.tokens_out, step.cost_usd)
            self.spend.add(usage)
            self._usage.setdefault(step.session, {})[at] = usage
        if verdict.outcome == "loop" and verdict.fingerprint:
            key = (step.session, verdict.fingerprint)
            loop = self._loops.get(key)
            if loop is None:
                loop = _Loop(
                    step.session,
                    step.agent,
                    verdict.fingerprint,
                    verdict.detector,
                    verdict.action.wire,
                    index,
                )
                self._loops[key] = loop
            loop.evidence.update(verdict.evidence or (at,))
        if stops:
            self.stopped.append(
                {
                    "session": step.session,
                    "index": index,
                    "detector": verdict.detector,
                    "outcome": verdict.outcome,
                    "fingerprint": verdict.fingerprint,
                    "reason": verdict.reason,
                }
            )

    def _spend_of(self, session: str, indices: set[int]) -> Spend:
        spend = Spend()
        usage = self._usage.get(session, {})
        for i in sorted(indices):
            if i in usage:
                spend.add(usage[i])
        return spend

    def loop_spend(self) -> Spend:
        """The usage of every step inside a loop, each counted once."""
        inside: dict[str, set[int]] = {}
        for loop in self._loops.values():
            inside.setdefault(loop.session, set()).update(loop.evidence)
        total = Spend()
        for session, indices in inside.items():
            part = self._spend_of(session, indices)
            total.tokens_in += part.tokens_in
            total.tokens_out += part.tokens_out
            total.cost_usd += part.cost_usd
            total.steps += part.steps
        return total

    def spend_line(self) -> str:
        """The spend, and the spend inside loops, in one line."""
        return f"spend {self.spend.line()}; inside loops {self.loop_spend().line()}"

    def to_dict(self, ended: str, exit_code: int) -> dict[str, object]:
        """The JSON summary."""
        return {
            "summary": SUMMARY_VERSION,
            "ended": ended,
            "exit_code": exit_code,
            "steps": self.steps,
            "invalid": self.invalid,
            "sessions": None if self.sessions is None else len(self.sessions),
            "spend": self.spend.to_dict(),
            "loop_spend": self.loop_spend().to_dict(),
            "stopped": self.stopped,
            "loops": [
                {
                    "session": loop.session,
                    "agent": loop.agent,
                    "fingerprint": loop.fingerprint,
                    "detector": loop.detector,
                    "action": loop.action,
                    "first_index": loop.first,
                    "session_steps": sorted(loop.evidence),
                    "spend": self._spend_of(loop.session, loop.evidence).to_dict(),
                }
                for loop in self._loops.values()
            ],
        }
