"""Opt-in detectors: repeats that the steps in between hide from the rule (protocol section 5).

The rule sees a repeat only in adjacent steps. Two loops slip through it:

- ``HiddenRepeat`` (config name ``hidden-repeat``): the same step with the same result, with
  only edits that changed nothing between (read, failed edit, read, failed edit, read).
- ``CosmeticRerun`` (``cosmetic-rerun``): a command re-run with the same result after edits
  that only touched comments or white space (``python repro.py``, add a comment, the same run).

Neither is in the default ``detectors``; switch them on by name, or compose them yourself::

    guard = Guard(Repeat(2) | HiddenRepeat(3) | CosmeticRerun(2))

What an edit did is ``antiloop.core.extra.edits.edit_effect``.

Cost: the detectors keep, per stream, one small tuple each in ``StreamState.chains`` (the
procedure digest, the readings of the last occurrence, counters, at most 32 step indices) and
a shared one with the last sha256 of at most 16 paths and the digests of at most 8 files
written whole: no output is kept. A stream that no opt-in detector judges has ``chains`` None
and pays nothing. They follow the stream themselves, so they must see every step: compose them
with ``|`` (``AnyOf`` calls every part), not behind an ``&``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from antiloop.core import decide, fingerprint
from antiloop.core.detectors import Detector
from antiloop.core.extra.edits import edit_effect, whole_write, write_digests
from antiloop.core.history import History, StepRecord
from antiloop.core.result import Readings, SameResult
from antiloop.core.text.engine import in_words
from antiloop.core.verdict import Verdict

__all__ = ["CosmeticRerun", "HiddenRepeat", "edit_effect"]

_OBSERVED = "~observed"
_FILES_KEPT = 16
_WRITTEN_KEPT = 8
_EVIDENCE_KEPT = 32


# --- following the stream ------------------------------------------------------------------


def _observe(history: History) -> str:
    """The step's effect, worked out once per step and shared by the opt-in detectors.

    ``hidden`` (a step allowed to repeat: invisible), ``step`` (not an edit), or the edit's
    effect. Updates the stream's last known file hashes and whole-file writes.
    """
    stream = history.stream
    chains = stream.chains
    if chains is None:
        chains = stream.chains = {}
    index = history.count - 1
    seen = chains.get(_OBSERVED)
    if seen is not None and seen[0] == index:
        return str(seen[1])
    files: tuple[tuple[str, str], ...] = seen[2] if seen is not None else ()
    written: tuple[tuple[str, str, str], ...] = seen[3] if seen is not None else ()
    record = history.record
    if record is None:
        effect = "hidden"
    elif history.procedure.operation != "edit":
        effect = "step"
    else:
        effect = edit_effect(
            history, dict(files), {p: (e, s) for p, e, s in written} if written else None
        )
        written = _after_write(history, effect, written)
    if record is not None and record.readings.files:
        files = _bounded(
            files, ((p, sha) for p, sha, _ in record.readings.files if sha), _FILES_KEPT
        )
    chains[_OBSERVED] = (index, effect, files, written)
    return effect


def _after_write(
    history: History, effect: str, written: tuple[tuple[str, str, str], ...]
) -> tuple[tuple[str, str, str], ...]:
    """The whole-file writes known after an edit: a write replaces, any other edit forgets."""
    if effect == "noop":
        return written
    paths = set(history.procedure.paths)
    kept = tuple(w for w in written if w[0] not in paths)
    whole = whole_write(history)
    if whole is not None and not whole[2]:
        path, text = whole[0], whole[1]
        return _bounded(kept, ((path, *write_digests(path, text)),), _WRITTEN_KEPT)
    return kept


def _bounded(old: tuple[Any, ...], new: Iterable[tuple[Any, ...]], limit: int) -> tuple[Any, ...]:
    """``old`` with ``new`` entries (keyed by their first item) put last, at most ``limit``."""
    items = {entry[0]: entry for entry in old}
    for entry in new:
        items.pop(entry[0], None)
        items[entry[0]] = entry
    out = tuple(items.values())
    return out[-limit:]


class _Chain(NamedTuple):
    """One detector's chain: the last occurrence of a step and the edits after it."""

    at: int  # the last step this chain saw
    procedure: str
    context: str
    readings: tuple[Any, ...]  # the last occurrence's readings, as a plain tuple
    occurrences: int  # each after a gap of the detector's kind
    gap: int  # edits since the last occurrence
    wanted: bool  # the gap holds an edit of the detector's own kind
    evidence: tuple[int, ...]
    label: str = ""
    digest: str = ""


def _readings_tuple(r: Readings) -> tuple[Any, ...]:
    return (
        r.exact,
        r.exit_code,
        r.scrubbed,
        r.head,
        r.matches,
        r.match_count,
        r.count_only,
        r.error_line,
        r.failing,
        r.files,
    )


def _readings_of(t: tuple[Any, ...]) -> Readings:
    return Readings(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], tuple(t[9]))


def _start(index: int, record: StepRecord) -> _Chain:
    return _Chain(
        index, record.procedure, record.context, _readings_tuple(record.readings), 1, 0, False,
        (index,),
    )  # fmt: skip


def _advance(
    history: History, name: str, neutral: frozenset[str], kind: str, runs: bool
) -> _Chain | None:
    """Move the chain of detector ``name`` on by one step; returns it (None: no chain).

    ``neutral`` are the edit effects a gap may hold, ``kind`` the one it must hold at least
    once; ``runs`` keeps only steps that run something as occurrences.
    """
    effect = _observe(history)
    chains = history.stream.chains
    if chains is None:  # made by _observe; for the type checker
        chains = history.stream.chains = {}
    index = history.count - 1
    raw = chains.get(name)
    chain = _Chain(*raw) if raw is not None else None
    if chain is not None and chain.at == index:
        return chain
    record = history.record
    if effect == "hidden":
        new = chain
    elif effect == "step" and record is not None:
        new = (
            _occurrence(chain, history, record, index)
            if not runs or history.procedure.runs_something
            else None
        )
    elif chain is not None and effect in neutral:
        new = chain._replace(
            at=index,
            gap=chain.gap + 1,
            wanted=chain.wanted or effect == kind,
            evidence=(*chain.evidence, index)[-_EVIDENCE_KEPT:],
        )
    else:
        new = None
    if new is None:
        chains.pop(name, None)
    else:
        chains[name] = tuple(new)
    return new


def _occurrence(chain: _Chain | None, history: History, record: StepRecord, index: int) -> _Chain:
    if chain is None or chain.procedure != record.procedure or not chain.wanted:
        return _start(index, record)
    same = _same_as_last(chain, history, record)
    if same is None:
        return _start(index, record)
    return chain._replace(
        at=index,
        readings=_readings_tuple(record.readings),
        occurrences=chain.occurrences + 1,
        gap=0,
        wanted=False,
        evidence=(*chain.evidence, index)[-_EVIDENCE_KEPT:],
        label=same.label,
        digest=same.digest,
    )


def _same_as_last(chain: _Chain, history: History, record: StepRecord) -> SameResult | None:
    """How the step is the same as the chain's last occurrence, as ``decide`` decided it.

    Read from ``record.same_as`` when that step is within the lookback, else by the same rule.
    """
    if chain.gap < len(chain.evidence):
        last = chain.evidence[-chain.gap - 1]
        window = history.stream.window
        for back, same in enumerate(record.same_as, 1):
            if back < len(window) and window[-1 - back].index == last:
                return same
    return decide.same_readings(_readings_of(chain.readings), record.readings)


def _fired(history: History, chain: _Chain | None, threshold: int) -> bool:
    return (
        chain is not None
        and chain.occurrences >= threshold
        and chain.evidence[-1] == history.count - 1
    )


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


_NOOP = frozenset({"noop"})
_COSMETIC = frozenset({"noop", "cosmetic"})


@dataclass(frozen=True, slots=True)
class HiddenRepeat(Detector):
    """The same step with the same result ``threshold`` times, only no-op edits between: stop.

    Each pair of occurrences has at least one edit between them, and every edit between them
    changed nothing (``edit_effect`` is ``noop``: it failed, said it was not applied, or left
    every file's sha256 as the stream last saw it); any other step between breaks the chain,
    and an adjacent pair is the plain repeat's. The default threshold 3 lets one re-read after
    a failed edit pass (reading the text again to copy it exactly is how an agent recovers);
    the third identical read over unchanged files is the repeat the failed edits hide. It
    stops, as the repeat does: by then nothing has changed twice over.

    Example:
        >>> HiddenRepeat(3)
        HiddenRepeat(threshold=3)
    """

    threshold: int = 3

    def __call__(self, history: History) -> Verdict | None:
        chain = _advance(history, "hidden-repeat", _NOOP, "noop", runs=False)
        if chain is None or not _fired(history, chain, self.threshold):
            return None
        op = history.procedure.operation
        fp = fingerprint.build(
            history.agent, "hidden-repeat", chain.context, chain.label, chain.digest
        )
        times, label = _times(chain.occurrences), in_words(chain.label, history.rules)
        return Verdict.stop(
            "hidden-repeat",
            outcome="loop",
            reason=f"{op} {chain.context!r} ran {times} with the same result ({label}); "
            f"the edits between changed nothing.",
            fingerprint=fp,
            hint=(
                f"Your edits between the runs of {op} on {chain.context!r} changed nothing "
                "(refused, failed, or the files are as they were), so it gave the same result "
                f"({label}) {times}. Read the edit's error, copy "
                "the exact text, or change approach; running it again changes nothing."
            ),
            evidence=chain.evidence,
        )


@dataclass(frozen=True, slots=True)
class CosmeticRerun(Detector):
    """A command re-run with the same result after edits of only comments or white space: ask.

    An occurrence is a step that runs something (``bash``, ``test``, ``build``, tools outside
    the table); between each pair at least one edit only touched comments or white space,
    every other edit there changed nothing, and no other step came between. The default
    threshold 2 fires at the first such re-run, whose result could not change. It asks rather
    than stops: "only comments" is judged from the text by the file's extension, and
    re-running once after a clean-up to check that nothing broke is fair; a person says which.

    Example:
        >>> CosmeticRerun(2)
        CosmeticRerun(threshold=2)
    """

    threshold: int = 2

    def __call__(self, history: History) -> Verdict | None:
        chain = _advance(history, "cosmetic-rerun", _COSMETIC, "cosmetic", runs=True)
        if chain is None or not _fired(history, chain, self.threshold):
            return None
        fp = fingerprint.build(
            history.agent, "cosmetic-rerun", chain.context, chain.label, chain.digest
        )
        times, label = _times(chain.occurrences), in_words(chain.label, history.rules)
        return Verdict.ask(
            "cosmetic-rerun",
            outcome="loop",
            reason=f"{chain.context!r} ran {times} with the same result ({label}); the edits "
            "between only touched comments or white space.",
            fingerprint=fp,
            hint=(
                f"The edits before this run of {chain.context!r} only changed comments or white "
                f"space, so it gave the same result ({label}). Make a change that can "
                "matter, or stop re-running it."
            ),
            evidence=chain.evidence,
        )
