"""Opt-in detectors: repeats that the steps in between hide from the rule (protocol section 5).

The rule sees a repeat only in adjacent steps. Two loops slip through it:

- ``HiddenRepeat`` (config name ``hidden-repeat``): the same step with the same result, with
  only edits that changed nothing between (read, failed edit, read, failed edit, read).
- ``CosmeticRerun`` (``cosmetic-rerun``): a command re-run with the same result after edits
  that only touched comments or white space (``python repro.py``, add a comment, the same run).

Neither is in the default ``detectors``; switch them on by name, or compose them yourself::

    guard = Guard(Repeat(2) | HiddenRepeat(3) | CosmeticRerun(2))

What an edit did (``edit_effect``) is known from the step alone, never guessed from what
follows it:

- **changed nothing** (``noop``): the edit failed (an error or a non-zero exit) and it is an
  edit that writes nothing when it fails: an editor tool, ``sed -i`` or ``git apply`` (not a
  redirection, which empties its file first, nor ``patch``, which applies the hunks it can);
  or its output says it was not applied (``No replacement was performed``, SWE-agent's
  ``Your proposed edit has introduced new syntax error(s)``..., or an editor tool's output
  starts with ``ERROR:``, as OpenHands' does); or every file it touched has
  a sha256 equal to the last one the stream saw for that path; or its old and new text are
  equal; or it writes a whole file with exactly the content the stream last saw written there.
- **only comments or white space** (``cosmetic``): the editor's ``old_str``/``new_str`` (also
  ``old_string``/``new_string``, MultiEdit's ``edits``, an ``insert``'s ``new_str``), the
  change blocks of a diff (``patch``/``diff``/``input`` arguments, a heredoc fed to
  ``git apply`` or ``patch``: unified, ``apply_patch`` and SEARCH/REPLACE forms), or a whole
  file written (``content``/``file_text``, ``cat > f <<EOF``) compared with the last content
  the stream saw written to that file, are equal once reduced by ``antiloop.code_shape.shape``
  for the language of the file's extension (comments, blank lines and white space that is not
  syntax dropped; strings and pragma comments kept).
- anything else is a change, and breaks the chain; so is a shell chain that also runs something
  (``git apply p.diff && python setup.py develop``), whatever its edits.

The last states are the ones the stream's own steps reported: a command that rewrites a file
without reporting its state goes unseen. That is one reason why a loop also needs the same
result each time (docs/protocol.md, section 4): an edit wrongly taken for a no-op that did
change what the step sees gives another result, and no loop.

Cost: the detectors keep, per stream, one small tuple each in ``StreamState.chains`` (the
procedure digest, the readings of the last occurrence, counters, at most 32 step indices) and
a shared one with the last sha256 of at most 16 paths and the digests of at most 8 files
written whole: no output is kept. A stream that no opt-in detector judges has ``chains`` None
and pays nothing. They follow the stream themselves, so they must see every step: compose them
with ``|`` (``AnyOf`` calls every part), not behind an ``&``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from antiloop import fingerprint
from antiloop.code_shape import diff_changes, only_cosmetic, shape
from antiloop.detectors import Detector
from antiloop.history import History, StepRecord
from antiloop.readings import Readings, same_result
from antiloop.verdict import Verdict

if TYPE_CHECKING:
    from antiloop.config import GuardConfig

__all__ = ["CosmeticRerun", "HiddenRepeat", "edit_effect", "opt_in_detectors"]

_OBSERVED = "~observed"
_FILES_KEPT = 16
_WRITTEN_KEPT = 8
_EVIDENCE_KEPT = 32
_PATH_KEYS = ("path", "file_path", "filepath", "file", "filename", "target_file")
_PAIRS = (("old_str", "new_str"), ("old_string", "new_string"), ("old_text", "new_text"))
_DIFF_KEYS = ("patch", "diff", "input")
_NOT_APPLIED = re.compile(
    r"No replacement was performed|did not appear verbatim|"
    r"Your proposed edit has introduced new syntax error|edit not applied|"
    r"No changes to make|old_string and new_string are (?:exactly )?the same|"
    r"String to replace not found|No (?:edits|changes) (?:were|was) (?:made|applied)",
    re.IGNORECASE,
)
_EDITOR_ERROR = re.compile(r"\s*(?:ERROR|Error):")
_ATOMIC_SHELL = re.compile(r"(?:^|[;&|(]\s*)(?:sed\s+(?:-\w+\s+)*-i|git\s+apply)\b")
_HEREDOC = re.compile(
    r"\A\s*(?:cd\s+\S+\s*&&\s*)?cat\s+"
    r"(?:(>>?)\s*(\S+)\s*<<-?\s*(['\"]?)(\w+)\3|<<-?\s*(['\"]?)(\w+)\5\s*(>>?)\s*(\S+))"
    r"[ \t]*\n(.*?)\n[ \t]*(?:\4|\6)\s*\Z",
    re.DOTALL,
)
_FEEDS_DIFF = re.compile(r"\b(?:git\s+apply|patch)\b")


# --- what an edit did ----------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _path_of(args: Mapping[str, Any], paths: tuple[str, ...]) -> str | None:
    for key in _PATH_KEYS:
        value = _text(args.get(key))
        if value:
            return value
    return paths[0] if len(paths) == 1 else None


def _pure(history: History) -> bool:
    """The edit writes nothing when it fails: an editor tool, or a lone ``sed -i``/``git apply``."""
    parts = history.procedure.parts
    if not parts:
        return True
    command = _text(history.step.args.get("command")) or ""
    return len(parts) == 1 and ">" not in command and bool(_ATOMIC_SHELL.search(command))


def _replacements(history: History) -> list[tuple[str | None, str, str]] | None:
    """``(path, old, new)`` of each replacement the edit's arguments spell out, or None."""
    args = history.step.args
    proc = history.procedure
    path = _path_of(args, proc.paths)
    edits = args.get("edits")
    if isinstance(edits, list) and edits:
        found = []
        for edit in edits:
            if not isinstance(edit, Mapping):
                return None
            pair = _pair(edit)
            if pair is None:
                return None
            found.append((path, *pair))
        return found
    pair = _pair(args)
    if pair is not None:
        return [(path, *pair)]
    if args.get("command") == "insert" and _text(args.get("new_str")) is not None:
        return [(path, "", args["new_str"])]
    for key in _DIFF_KEYS:
        body = _text(args.get(key))
        if body:
            return diff_changes(body, path) or None
    command = _text(args.get("command")) or ""
    if proc.parts and _FEEDS_DIFF.search(command) and "\n@@" in command:
        return diff_changes(command, path) or None
    return None


def _pair(args: Mapping[str, Any]) -> tuple[str, str] | None:
    for old_key, new_key in _PAIRS:
        old, new = _text(args.get(old_key)), _text(args.get(new_key))
        if old is not None and new is not None:
            return old, new
    return None


def _whole_write(history: History) -> tuple[str, str, bool] | None:
    """``(path, text, appends)`` of an edit that writes a whole file (or appends), or None."""
    args = history.step.args
    proc = history.procedure
    if len(proc.paths) != 1:
        return None
    if not proc.parts:
        text = _text(args.get("content"))
        if text is None and args.get("command") in (None, "create"):
            text = _text(args.get("file_text"))
        if text is None:
            return None
        return proc.paths[0], text, history.step.tool.lower() == "insert_content"
    command = _text(args.get("command"))
    match = _HEREDOC.match(command) if command and len(proc.parts) == 1 else None
    if match is None:
        return None
    appends = (match.group(1) or match.group(7)) == ">>"
    return proc.paths[0], match.group(9), appends


def edit_effect(
    history: History,
    known: Mapping[str, str] | None = None,
    written: Mapping[str, tuple[str, str]] | None = None,
) -> str:
    """What an edit step did: ``noop``, ``cosmetic`` or ``change`` (see the module docstring).

    Args:
        history: the edit step (its ``procedure.operation`` is ``edit``).
        known: the last sha256 the stream saw for each path.
        written: for files the stream saw written whole, ``(exact digest, shape digest)``.
    """
    step = history.step
    if _pure(history):
        if step.failed:
            return "noop"
        said = f"{(step.output or '')[:2000]}\n{(step.error or '')[:2000]}"
        if _NOT_APPLIED.search(said):
            return "noop"
        if not history.procedure.parts and _EDITOR_ERROR.match(step.output or ""):
            return "noop"  # an editor tool that answers with its error as output (OpenHands)
    if any(op != "edit" for _, op in history.procedure.parts):
        return "change"  # a shell chain that also runs something: who knows what it did
    record = history.record
    if record is not None and known and _unchanged(record.readings, known):
        return "noop"
    replacements = _replacements(history)
    if replacements:
        if all(old == new for _, old, new in replacements):
            return "noop"
        if all(only_cosmetic(old, new, path) for path, old, new in replacements):
            return "cosmetic"
        return "change"
    whole = _whole_write(history)
    if whole is not None:
        path, text, appends = whole
        if appends:
            return "noop" if not text else "cosmetic" if only_cosmetic("", text, path) else "change"
        before = (written or {}).get(path)
        if before is not None:
            exact, shaped = _write_digests(path, text)
            if exact == before[0]:
                return "noop"
            if shaped == before[1]:
                return "cosmetic"
    return "change"


def _unchanged(readings: Readings, known: Mapping[str, str]) -> bool:
    files = readings.files
    return bool(files) and all(sha is not None and known.get(p) == sha for p, sha, _ in files)


@functools.lru_cache(maxsize=8)  # a write is compared, then remembered: one reduction
def _write_digests(path: str, text: str) -> tuple[str, str]:
    return fingerprint.digest8(text), fingerprint.digest8(shape(text, path))


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
    whole = _whole_write(history)
    if whole is not None and not whole[2]:
        path, text = whole[0], whole[1]
        return _bounded(kept, ((path, *_write_digests(path, text)),), _WRITTEN_KEPT)
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
            _occurrence(chain, record, index)
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


def _occurrence(chain: _Chain | None, record: StepRecord, index: int) -> _Chain:
    if chain is None or chain.procedure != record.procedure or not chain.wanted:
        return _start(index, record)
    same = same_result(_readings_of(chain.readings), record.readings)
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
        times = _times(chain.occurrences)
        return Verdict.stop(
            "hidden-repeat",
            outcome="loop",
            reason=f"{op} {chain.context!r} ran {times} with the same result ({chain.label}); "
            f"the edits between changed nothing.",
            fingerprint=fp,
            hint=(
                f"Your edits between the runs of {op} on {chain.context!r} changed nothing "
                "(refused, failed, or the files are as they were), so it gave the same result "
                f"({chain.label}) {times}. Read the edit's error, copy "
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
        times = _times(chain.occurrences)
        return Verdict.ask(
            "cosmetic-rerun",
            outcome="loop",
            reason=f"{chain.context!r} ran {times} with the same result ({chain.label}); the edits "
            "between only touched comments or white space.",
            fingerprint=fp,
            hint=(
                f"The edits before this run of {chain.context!r} only changed comments or white "
                f"space, so it gave the same result ({chain.label}). Make a change that can "
                "matter, or stop re-running it."
            ),
            evidence=chain.evidence,
        )


def opt_in_detectors(config: GuardConfig) -> list[Detector]:
    """The opt-in detectors ``config.detectors`` names, with the config's thresholds."""
    on = config.detectors
    parts: list[Detector] = []
    if "hidden-repeat" in on:
        parts.append(HiddenRepeat(config.hidden_repeat_threshold))
    if "cosmetic-rerun" in on:
        parts.append(CosmeticRerun(config.cosmetic_rerun_threshold))
    return parts
