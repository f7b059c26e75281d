"""``antiloop check``: one verdict per step of a JSON-lines stream (PROTOCOL.md section 7)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

from antiloop.config import GuardConfig, load_config
from antiloop.errors import BadStep
from antiloop.events import parse_line
from antiloop.guard import Guard
from antiloop.history import SessionState
from antiloop.stores.memory import MemoryStore
from antiloop.verdict import Action, invalid_wire

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_STOPPED = 3
EXIT_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away


class RecentSessions(MemoryStore):
    """A memory store that keeps the ``max_sessions`` most recently active sessions.

    Past that many, the least recently active one is forgotten; if it comes back it starts
    afresh (PROTOCOL.md section 7), so memory is bounded however many sessions a stream has.
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


def guard_for(config: GuardConfig) -> Guard:
    """The guard ``antiloop check`` judges with: sessions bounded by ``max_sessions``."""
    return Guard(config=config, store=RecentSessions(config.max_sessions))


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``antiloop check``."""
    parser.add_argument("file", nargs="?", default="-", help="a .jsonl file, or - for stdin")
    parser.add_argument("--config", help="a JSON or TOML config (PROTOCOL.md section 7)")
    parser.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    """Run ``antiloop check``."""
    return run_check(ns.file, ns.config)


def run_check(file: str, config_path: str | None) -> int:
    """Judge the stream in ``file`` (``-`` for stdin); returns the exit status."""
    config = load_config(config_path) if config_path else GuardConfig()
    try:
        if file == "-":
            return judge_stream(sys.stdin.buffer, sys.stdout, guard_for(config), flush=True)
        try:
            stream = Path(file).open("rb")  # noqa: SIM115 - closed below, after the loop
        except OSError as exc:
            print(f"antiloop: cannot read {file}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        with stream:
            code = judge_stream(stream, sys.stdout, guard_for(config))
            sys.stdout.flush()
            return code
    except BrokenPipeError:
        # The reader went away: the verdicts after it were not delivered, which is no success.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit-time flush must not fail again
        os.close(devnull)
        print("antiloop: stdout closed before every verdict was written", file=sys.stderr)
        return EXIT_PIPE


def judge_stream(source: IO[bytes], out: IO[str], guard: Guard, *, flush: bool = False) -> int:
    """Write one verdict line per non-blank input line; returns 3 if a session stopped."""
    stopped = False
    index = 0
    write = out.write
    for lineno, raw in enumerate(source, 1):
        if not raw.strip():
            continue
        line, stops = _judge_line(guard, raw, lineno, index)
        del raw  # a huge line is held once at a time, never two
        stopped = stopped or stops
        write(json.dumps(line, ensure_ascii=False) + "\n")
        if flush:
            out.flush()
        index += 1
    return EXIT_STOPPED if stopped else EXIT_OK


def _judge_line(
    guard: Guard, raw: bytes, lineno: int, index: int
) -> tuple[dict[str, object], bool]:
    """The verdict line for one input line, and whether it stopped its session."""
    try:
        step = parse_line(raw)
    except BadStep as exc:
        return invalid_wire(index, f"line {lineno}: {exc}"), False
    try:
        verdict = guard.record(step)
    except RecursionError:  # too deep for the engine though within the parser's limit
        return invalid_wire(index, f"line {lineno}: nested too deeply to judge"), False
    stops = verdict.action is Action.STOP and verdict.detector not in ("goal", "terminated")
    return verdict.to_wire(index), stops
