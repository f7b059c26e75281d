"""Deferred readings: a step's result text, kept until a later step can need its readings.

Reading a result (``antiloop.core.result.read_result``: scrubbing, the error line, the failing
count, match sets) matters only when a later step of the stream has the same procedure. So a
step keeps its raw result here, and its readings are made on first use: when a step with the
same procedure compares with it, when a detector reads them, or when a store encodes the state
(a store that persists the state thus persists the readings it always did, never the text).

All the texts kept, over every session, share ONE global byte budget (``BUDGET``): past it,
the oldest text is dropped first, its exact digest made as it goes. A step whose text is gone
still has that digest, its exit code and file states; its readings are then ``fallback`` ones,
which only the exact digest can match (``is_fallback``). That is sound: the same exact text
gives the same readings, so a match found on the digest is one that reading the texts would
have found; a loop whose texts differ only by volatile values is missed instead (never a false
stop). A step that its stream's later steps no longer compare with (beyond the longest cycle
period) lets its text go without a digest (``drop``): nothing in the core reads it again.

    >>> text = Deferred("grep", False, "a.py:1: x", None, None, {})
    >>> text.readings().match_count, text.readings() is text.readings()
    (1, True)
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Mapping
from typing import Final

from antiloop.core.result import Readings, read_result
from antiloop.core.rules.ruleset import BUILTIN, Rules
from antiloop.core.step import FileState

__all__ = ["BUDGET", "Deferred", "TextBudget", "exact_digest", "fallback", "is_fallback"]

Files = tuple[tuple[str, str | None, float | None], ...]
_OVERHEAD: Final = 64  # bytes charged per kept text beyond its characters (its entry, its object)


def exact_digest(output: str | None, error: str | None) -> str:
    """The exact digest of a result: the ``exact`` reading ``read_result`` would give."""
    h = hashlib.sha1(usedforsecurity=False)
    if output:
        h.update(output.encode("utf-8", "surrogatepass"))
    h.update(b"\xff")
    if error:
        h.update(error.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def fallback(exact: str, exit_code: int | None, files: Files) -> Readings:
    """The readings of a result whose text is gone: its exact digest, exit code and files."""
    return Readings(exact, exit_code, "", "", None, None, False, None, None, files)


def is_fallback(readings: Readings) -> bool:
    """Whether these are ``fallback`` readings (a real scrubbed digest is never empty)."""
    return not readings.scrubbed


class Deferred:
    """One step's result, read on first use; the text is held under ``BUDGET``.

    Args:
        operation: the step's operation; ``runs_something``: whether it runs something.
        output, error, exit_code: the result.
        file_states: the touched files' states, keyed by canonical path.
        rules: the rule set the readings are made by.
    """

    __slots__ = (
        "__weakref__",
        "_readings",
        "_text",
        "exact",
        "exit_code",
        "file_states",
        "operation",
        "rules",
        "runs",
    )

    def __init__(
        self,
        operation: str,
        runs_something: bool,
        output: str | None,
        error: str | None,
        exit_code: int | None,
        file_states: Mapping[str, FileState],
        rules: Rules = BUILTIN,
    ) -> None:
        self.operation = operation
        self.rules = rules
        self.runs = runs_something
        self.exit_code = exit_code
        self.file_states = file_states
        self._readings: Readings | None = None
        self._text: tuple[str | None, str | None] | None = (output, error)
        self.exact = ""  # made when the text has to go early (``TextBudget``), else not needed
        size = len(output or "") + len(error or "") + _OVERHEAD
        if size > BUDGET.limit // 16:  # too big to keep (it would push out every other): read
            self.readings()  # now, a slice at a time, and let it go
        else:
            BUDGET.keep(self, size)

    @property
    def made(self) -> Readings | None:
        """The readings if they are made already, else None."""
        return self._readings

    @property
    def kept(self) -> bool:
        """Whether the text is still here (readings can be made from it)."""
        return self._text is not None

    def readings(self) -> Readings:
        """The readings: read from the text on first use, ``fallback`` ones if it is gone."""
        found = self._readings
        if found is None:
            text = self._text
            if text is not None:
                found = read_result(
                    self.operation,
                    self.runs,
                    text[0],
                    text[1],
                    self.exit_code,
                    self.file_states,
                    self.rules,
                )
                self.exact = found.exact
                self.drop()
            else:
                files = tuple(sorted([(p, s.sha256, s.mtime) for p, s in self.file_states.items()]))
                found = fallback(self.exact, self.exit_code, files)
            self._readings = found
        return found

    def drop(self) -> None:
        """Let the text go: readings made stay; unmade ones will be ``fallback`` ones.

        Those have no exact digest either: no later step of the stream compares with this one.
        """
        if self._text is not None:
            self._text = None
            BUDGET.forget(self)

    def __repr__(self) -> str:
        return f"Deferred({self.operation!r}, exact={self.exact!r}, kept={self.kept})"


class TextBudget:
    """The texts kept for deferred readings, at most ``limit`` bytes in all: oldest out first.

    A text is held only as long as its step's record lives (a weak reference: a session that
    is forgotten lets its texts go at once). Thread-safe: one lock around each change.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._texts: dict[weakref.ref[Deferred], int] = {}
        self._dead: list[weakref.ref[Deferred]] = []  # records gone since the last change
        self._gone = self._release  # the weak references' callback, bound once
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TextBudget(limit={self.limit}, used={self.used}, texts={len(self)})"

    def __len__(self) -> int:
        with self._lock:
            self._settle()
            return len(self._texts)

    @property
    def used(self) -> int:
        """The bytes held now."""
        with self._lock:
            self._settle()
            return self._used

    def keep(self, text: Deferred, size: int) -> None:
        """Hold ``text`` (``size`` bytes); drop the oldest ones while the budget is exceeded."""
        ref = weakref.ref(text, self._gone)
        lock = self._lock
        lock.acquire()  # not ``with``: cheaper, and every step keeps a text
        try:
            if self._dead:
                self._settle()
            texts = self._texts
            texts[ref] = size
            self._used += size
            while self._used > self.limit:
                old_ref, old_size = next(iter(texts.items()))
                del texts[old_ref]
                self._used -= old_size
                old = old_ref()
                if old is not None and old._text is not None:
                    old.exact = exact_digest(*old._text)  # what a later match can still use
                    old._text = None
        finally:
            lock.release()

    def forget(self, text: Deferred) -> None:
        """Stop holding ``text`` (it was read, or released)."""
        lock = self._lock
        lock.acquire()  # as in ``keep``: each step's text is forgotten once
        try:
            size = self._texts.pop(weakref.ref(text), None)
            if size is not None:
                self._used -= size
        finally:
            lock.release()

    def clear(self) -> None:
        """Drop every text (tests; a process that wants its memory back)."""
        with self._lock:
            for ref in self._texts:
                text = ref()
                if text is not None:
                    text._text = None
            self._texts.clear()
            self._dead.clear()
            self._used = 0

    def _release(self, ref: weakref.ref[Deferred]) -> None:
        """A kept text's record is gone: its bytes come back now, or at the next change.

        Called by the garbage collector, maybe while this thread or another holds the lock:
        then the reference waits in ``_dead``.
        """
        if ref not in self._texts:  # read or released before (most records): nothing held
            return
        if self._lock.acquire(blocking=False):
            try:
                size = self._texts.pop(ref, None)
                if size is not None:
                    self._used -= size
            finally:
                self._lock.release()
        else:
            self._dead.append(ref)

    def _settle(self) -> None:
        dead = self._dead
        while dead:
            size = self._texts.pop(dead.pop(), None)
            if size is not None:
                self._used -= size


BUDGET: Final = TextBudget(32 * 1024 * 1024)
"""The one budget of every session's kept texts: 32 MiB (16,000 steps of 2 KB outputs)."""
