"""The session-state codec: ``SessionState`` to compact, versioned bytes and back.

Every text in it passes the redactor (``antiloop.core.redact``) on the way in: the goal, the
messages, each step's context, result head, error line and result label, and the verdicts'
fingerprints, reasons and hints. Procedures are digests where they would hold a secret
(``history.key_digest``); nothing else holds an argument. Detection compares digests, counts and
the (already redacted) error lines, so a stored state judges as the live one does; the one
difference is a goal or earlier message whose secret is now ``[REDACTED]``.

The bytes are one format byte (the version, now 2) and then nested tuples of plain values
written with ``marshal`` format 4 (strings, ints, floats, bools, None, bytes: no code,
nothing executable; five times faster than JSON here, and read by every Python 3 since 3.4)::

    (steps, goal, goal_vector, ((agent, stream), ...), ended, ((step_id, verdict), ...), spend)

(``spend``, ``((key, usage), ...)`` or None, is the budgets' spend: newer, optional when read.)

A stream is ``(window_len, (step, ...), messages_len, (message, ...), run, fail_tool,
fails, fail_steps, blanks, ((digest, fingerprint), ...), fail_errors, chains)``; the last
items (step ids, error digests; the opt-in detectors' ``chains``, ``((name, tuple), ...)`` or
None) are newer and optional when read; a step ``(index,
tool, operation, procedure, context, readings, same_as)``; in version 2 each stream and each
step is itself marshalled to bytes (version 1, still read, nests the tuples); readings are
their ten fields in order; a vector is ``(typecode, its little-endian bytes)``; a verdict
``(action, detector, outcome, fingerprint, reason, hint, evidence, escalate_to)``. The guard
keeps the windows to their bounds.

A window is mostly the previous step's window, and a step record never changes once in it:
its bytes are made once and memoised by identity, so writing a state copies a few byte
strings instead of walking a few hundred objects. Decoded readings are memoised too.

Example:
    >>> from antiloop.core.history import SessionState
    >>> decode_state(encode_state(SessionState(steps=3, goal="fix it"))).steps
    3
"""

from __future__ import annotations

import marshal
import sys
from array import array
from operator import is_
from typing import Any

from antiloop.core.errors import StoreError
from antiloop.core.history import MessageRecord, SessionState, StepRecord, StreamState
from antiloop.core.redact import redact_text
from antiloop.core.result import Readings, SameResult
from antiloop.core.semantic import mask_digits
from antiloop.core.verdict import Action, Verdict

__all__ = ["VERSION", "StateCache", "decode_state", "encode_state"]

VERSION = 2
"""The format version this antiloop writes (and the newest it reads; it reads 1 too)."""

_MARSHAL = 4
_HEADER = bytes([VERSION])
_READS = (1, 2)
_SWAP = sys.byteorder != "little"
_MEMO_MAX = 4096
_readings_memo: dict[tuple[Any, ...], Readings] = {}
# A step record is never changed once in a window, and a window is mostly the one before:
# each stream's encoded window is memoised by the stream's identity, with the records it was
# made of (kept in the entry, so neither their ids nor the stream's can be reused meanwhile).
_window_memo: dict[int, tuple[StreamState, tuple[StepRecord, ...], tuple[bytes, ...]]] = {}


def _vec_out(vec: array[Any] | None) -> tuple[str, bytes] | None:
    if vec is None:
        return None
    if _SWAP:
        vec = array(vec.typecode, vec)
        vec.byteswap()
    return (vec.typecode, vec.tobytes())


def _vec_in(data: tuple[str, bytes] | None) -> array[Any] | None:
    if data is None:
        return None
    vec = array(data[0])
    vec.frombytes(data[1])
    if _SWAP:
        vec.byteswap()
    return vec


def _text_out(text: str | None) -> str | None:
    return None if text is None else redact_text(text)


def _verdict_out(v: Verdict) -> tuple[Any, ...]:
    return (
        int(v.action),
        v.detector,
        v.outcome,
        _text_out(v.fingerprint),
        _text_out(v.reason),
        _text_out(v.hint),
        tuple(v.evidence),
        v.escalate_to,
    )


def _verdict_in(d: tuple[Any, ...]) -> Verdict:
    return Verdict(Action(d[0]), d[1], d[2], d[3], d[4], d[5], tuple(d[6]), d[7])


def _seen_out(seen: dict[str, object | None]) -> tuple[Any, ...]:
    return tuple(
        [(k, None if v is None else _verdict_out(v)) for k, v in seen.items()]  # type: ignore[arg-type]
    )


def _seen_in(d: tuple[Any, ...]) -> dict[str, object | None]:
    return {k: None if v is None else _verdict_in(v) for k, v in d}


def _step_out(r: StepRecord) -> bytes:
    g = r.readings
    data = (
        r.index,
        r.tool,
        r.operation,
        r.procedure,
        redact_text(r.context),
        (
            g.exact,
            g.exit_code,
            g.scrubbed,
            redact_text(g.head),
            g.matches,
            g.match_count,
            g.count_only,
            _text_out(g.error_line),
            g.failing,
            tuple(tuple(f) for f in g.files),
        ),
        tuple(None if s is None else (redact_text(s.label), s.digest) for s in r.same_as),
    )
    return marshal.dumps(data, _MARSHAL)


def _window_out(s: StreamState) -> tuple[bytes, ...]:
    window = tuple(s.window)
    memo = _window_memo
    hit = memo.pop(id(s), None)
    if hit is not None and hit[0] is s:
        done = hit[1]
        if len(done) == len(window) and all(map(is_, done, window)):
            out = hit[2]
        else:
            known = dict(zip(map(id, done), hit[2], strict=True))
            out = tuple([known.get(id(r)) or _step_out(r) for r in window])
    else:
        out = tuple([_step_out(r) for r in window])
    if len(memo) >= _MEMO_MAX:
        del memo[next(iter(memo))]
    memo[id(s)] = (s, window, out)
    return out


def _readings_in(g: tuple[Any, ...]) -> Readings:
    try:
        hit = _readings_memo.get(g)
    except TypeError:  # an unhashable value: a damaged state, reported by the caller
        hit = None
    if hit is not None:
        return hit
    readings = Readings(
        g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], tuple(tuple(f) for f in g[9])
    )
    if len(_readings_memo) >= _MEMO_MAX:
        _readings_memo.clear()
    _readings_memo[g] = readings
    return readings


def _step_in(data: tuple[Any, ...] | bytes) -> StepRecord:
    d: tuple[Any, ...] = (
        marshal.loads(data)  # noqa: S302 - plain values
        if isinstance(data, bytes)
        else data
    )
    same = tuple(None if s is None else SameResult(s[0], s[1]) for s in d[6])
    return StepRecord(d[0], d[1], d[2], d[3], d[4], _readings_in(d[5]), same)


def _message_out(m: MessageRecord) -> tuple[Any, ...]:
    text = redact_text(m.text)
    # Masking digits first can hide a secret's shape (AKIA...16 -> AKIA0...), so a text that
    # held one is masked again from its redacted form, as the guard masks it.
    masked = redact_text(m.masked) if text == m.text else mask_digits(text)
    return (m.index, text, masked, m.blank, _vec_out(m.vector))


def _stream_out(s: StreamState) -> tuple[Any, ...]:
    return (
        len(s.window),
        _window_out(s),
        len(s.messages),
        tuple([_message_out(m) for m in s.messages]),
        s.run,
        s.fail_tool,
        s.fails,
        tuple(s.fail_steps),
        s.blanks,
        tuple([(k, redact_text(fp)) for k, fp in s.stopped.items()]),
        s.fail_errors,
        None if s.chains is None else tuple(s.chains.items()),
    )


def _stream_in(data: tuple[Any, ...] | bytes) -> StreamState:
    d: tuple[Any, ...] = (
        marshal.loads(data)  # noqa: S302 - plain values
        if isinstance(data, bytes)
        else data
    )
    window = [_step_in(r) for r in d[1]]
    messages = [MessageRecord(m[0], m[1], m[2], m[3], _vec_in(m[4])) for m in d[3]]
    errors = tuple(d[10]) if len(d) > 10 else ()  # written since v1.1
    chains = dict(d[11]) if len(d) > 11 and d[11] is not None else None  # since the opt-ins
    return StreamState(
        window, messages, d[4], d[5], d[6], tuple(d[7]), d[8], dict(d[9]), errors, chains
    )


def encode_state(state: SessionState) -> bytes:
    """The state as compact bytes (format ``VERSION``)."""
    ended = state.ended
    if ended is not None and not isinstance(ended, Verdict):
        raise StoreError(f"cannot store a session ended by {type(ended).__name__}, not a Verdict")
    data = (
        state.steps,
        _text_out(state.goal),
        _vec_out(state.goal_vector),
        tuple(
            [(agent, marshal.dumps(_stream_out(s), _MARSHAL)) for agent, s in state.streams.items()]
        ),
        None if ended is None else _verdict_out(ended),
        _seen_out(state.seen),
        None if state.spend is None else tuple(state.spend.items()),
    )
    try:
        return _HEADER + marshal.dumps(data, _MARSHAL)
    except ValueError as exc:
        raise StoreError(f"a session state holds a value that cannot be stored: {exc}") from exc


def decode_state(data: bytes | bytearray | memoryview) -> SessionState:
    """The state that ``encode_state`` wrote.

    Raises:
        StoreError: the bytes are of an unknown format version, or are not a session state.
    """
    raw = bytes(data)
    if not raw:
        raise StoreError("a stored session state is empty")
    version = raw[0]
    if version not in _READS:
        if raw[:1] in (b"{", b"["):
            raise StoreError("a stored session state is JSON, not an antiloop format")
        newer = "a newer" if version > VERSION else "an older, unsupported"
        raise StoreError(
            f"a stored session state is in format version {version}, written by {newer} "
            f"antiloop; this one reads version {VERSION} (and 1): upgrade antiloop, or use "
            "another store"
        )
    try:
        steps, goal, goal_vec, streams, ended, *more = marshal.loads(raw[1:])  # noqa: S302
        state = SessionState(
            steps,
            goal,
            _vec_in(goal_vec),
            {agent: _stream_in(s) for agent, s in streams},
            None if ended is None else _verdict_in(ended),
            _seen_in(more[0]) if more else {},
            dict(more[1]) if len(more) > 1 and more[1] is not None else None,
        )
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, EOFError) as exc:
        raise StoreError(f"a stored session state (version {version}) is damaged: {exc}") from exc
    if not isinstance(steps, int) or not isinstance(state.streams, dict):
        raise StoreError(f"a stored session state (version {version}) is damaged")
    return state


class StateCache:
    """The states a store object saved last, to skip decoding (or reading) what it wrote.

    A store reads a session's bytes inside its lock; when they are the bytes this store object
    saved, the state object it saved is handed out again instead of a decoded copy. A store
    that can tell that nobody else wrote since (a data version that only others' writes
    change, read inside its lock) saves with that version and ``take``s the state without
    reading it at all. A failed transaction drops its session (the object may be half changed).
    """

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int = 256) -> None:
        self._entries: dict[str, tuple[bytes, SessionState, object]] = {}
        self._size = size

    def load(self, session: str, data: bytes | None) -> SessionState:
        """The state ``data`` holds (a new one for None)."""
        if data is None:
            self._entries.pop(session, None)
            return SessionState()
        hit = self._entries.pop(session, None)
        if hit is not None and hit[0] == data:
            return hit[1]
        return decode_state(data)

    def take(self, session: str, version: object) -> SessionState | None:
        """The state saved with ``version``, or None (absent, or saved with another version).

        A state handed out leaves the cache (the store saves it back); otherwise the entry
        stays, for ``load`` to compare with the bytes read.
        """
        entries = self._entries
        hit = entries.get(session)
        if hit is None or version is None or hit[2] != version:
            return None
        del entries[session]
        return hit[1]

    def pop(self, session: str) -> tuple[bytes, SessionState, object] | None:
        """Take a session's entry out: ``(bytes, state, version)``, or None."""
        return self._entries.pop(session, None)

    def saved(self, session: str, data: bytes, state: SessionState, version: object = None) -> None:
        """Remember that ``state`` was saved as ``data`` (at ``version``, if the store has one)."""
        entries = self._entries
        entries[session] = (data, state, version)
        if len(entries) > self._size:
            del entries[next(iter(entries))]

    def drop(self, session: str) -> None:
        """Forget a session (its transaction failed, or it was dropped)."""
        self._entries.pop(session, None)
