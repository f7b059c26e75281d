"""The scan engine: a recorded run in, the loops it holds and what they cost out.

A scan judges a finished run with the guard's own detectors, but it does not stop at the first
loop: it wants every loop of the run. So the scanner hands the ``Guard`` one *collecting*
detector that calls each configured detector, keeps every verdict that fires, and returns
nothing. The guard therefore never ends the session (as in ``shadow`` mode), while the scan
still sees each detector's verdict when several fire at one step, which shadow mode would fold
into the worst one.

A loop is counted once however long it goes on: a detector that fires again at the next steps
of the same loop (a repeat that runs for 30 steps fires 29 times) extends the loop found first,
whose evidence grows to every step that took part. Two firings are the same loop when their
evidence overlaps (repeat, cycle, stagnation), when the failure streak runs on unbroken
(fail-streak), or always (max-steps); and a loop that comes back later in the run with the same
fingerprint is still the same loop.

The *first loop point* of a run is the first step where a detector that stops the session
(repeat, cycle, stagnation, max-steps; hidden-repeat when named) fired: a guard in front of the
agent would have ended the run there. Everything after it is *waste*: its steps, and the tokens
and dollars of those steps where the format records them. A failure streak asks a person rather
than stopping, so it is reported as a loop but does not start the waste (nor does the opt-in
cosmetic-rerun, which asks too).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from antiloop.config import KNOWN_DETECTORS, GuardConfig
from antiloop.core.detectors import FailStreak
from antiloop.core.history import History
from antiloop.core.step import Step
from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard, default_detector
from antiloop.scan.pool import scan_files
from antiloop.scan.spend import NO_USAGE, Usage, Waste, usage_of
from antiloop.scan.vectors import ScanVectors
from antiloop.traces import Run, StepCost, UnknownFormat, iter_paths, read_runs

if TYPE_CHECKING:
    from antiloop.embed import Embedder

SCAN_DETECTORS = ("repeat", "cycle", "fail-streak", "stagnation")
"""The detectors a scan runs by default: the loop detectors, without goal and step budget."""

DEFAULT_EMBEDDER = "ngram"
"""The embedder of the stagnation check in a scan: fast, offline, deterministic."""

STOPPING = frozenset({"repeat", "cycle", "stagnation", "max-steps", "hidden-repeat"})
"""Detectors whose verdict ends a session: the first of them is the run's loop point."""

_COMMAND_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Loop:
    """One loop found in a run.

    Attributes:
        step: the step where the detector first fired (0-based, canonical step order).
        detector: ``repeat``, ``cycle``, ``fail-streak``, ``stagnation``, ``max-steps``, or an
            opt-in detector named in the config (``hidden-repeat``, ``cosmetic-rerun``).
        fingerprint: the loop's fingerprint at its first firing (None for max-steps).
        evidence: every step that makes the evidence, over the whole loop, sorted.
        last: the last step at which the detector still fired for this loop.
        agent: the stream's agent.
        reason: the detector's sentence at its first firing.
    """

    step: int
    detector: str
    fingerprint: str | None
    evidence: tuple[int, ...]
    last: int
    agent: str = "agent"
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The loop as the ``--json`` output writes it."""
        return {
            "step": self.step,
            "detector": self.detector,
            "fingerprint": self.fingerprint,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class StepView:
    """What the HTML timeline shows of one step.

    Attributes:
        operation: the canonical operation (``read``, ``edit``, ``bash``, ``test``, ...).
        failed: the step failed (an error or a non-zero exit code).
        tool: the tool name.
        command: the command or arguments, cut to a few hundred characters.
        no_result: the reader found no result for the step (it was judged as unknown).
    """

    operation: str
    failed: bool
    tool: str
    command: str
    no_result: bool = False


@dataclass(frozen=True, slots=True)
class RunScan:
    """The scan of one run.

    Attributes:
        file: the path the run was read from.
        record: the 0-based line of the run in a multi-run file, else None.
        format: the trace format.
        steps: the number of steps.
        loops: the loops found, in the order of their first step.
        waste: what the run spent after its first loop point.
        spend: what the whole run spent.
        loop_spend: what the steps inside its loops (their evidence) spent.
        cost_recorded: the format records tokens or cost per step.
        views: per step, what a timeline shows (empty unless asked for).
        problems: things the reader could not read.
        missing_results: the steps whose result the reader could not find (a partial run):
            each was judged as a result no other step has, never as an empty output.
        partial_reason: which steps and why, in one line; None for a whole run.
    """

    file: str
    record: int | None
    format: str
    steps: int
    loops: tuple[Loop, ...]
    waste: Waste
    spend: Usage = NO_USAGE
    loop_spend: Usage = NO_USAGE
    cost_recorded: bool = False
    views: tuple[StepView, ...] = ()
    problems: tuple[str, ...] = ()
    missing_results: tuple[int, ...] = ()
    partial_reason: str | None = None

    @property
    def partial(self) -> bool:
        """Whether some step's result could not be found."""
        return bool(self.missing_results)

    @property
    def first_loop(self) -> int | None:
        """The first loop point (the first stopping loop's step), or None."""
        return self.waste.from_step

    def to_json(self) -> dict[str, Any]:
        """The run's ``--json`` line: file, record, format, steps, loops, waste."""
        return {
            "file": self.file,
            "record": self.record,
            "format": self.format,
            "steps": self.steps,
            "loops": [loop.to_json() for loop in self.loops],
            "waste": self.waste.to_json(),
            "spend": self.spend.to_json(),
            "loop_spend": self.loop_spend.to_json(),
            "partial": (
                {"missing_results": list(self.missing_results), "reason": self.partial_reason}
                if self.partial
                else None
            ),
        }


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An input the scan could not read as a run, and why; never counted as a clean run.

    A file of no known format, a file that cannot be read, and a file or record that reads
    as no steps are each unreadable.

    Attributes:
        file: the path.
        reason: why, in one line.
        record: the 0-based line of the record in a multi-run file, else None.
        format: the format the file was read as, or None when none fits.
    """

    file: str
    reason: str
    record: int | None = None
    format: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The input as the ``--json`` summary lists it."""
        return {
            "file": self.file,
            "record": self.record,
            "format": self.format,
            "reason": self.reason,
        }


UNKNOWN_RESULT = "\x00antiloop: no result was recorded for step {index}"


def unknown_result(step: Step, index: int) -> Step:
    """A step whose result the reader could not find, as the scan judges it.

    Its result is unknown, not empty: it is given a text no other step's result has, so it is
    never the same result as another step (no repeat, cycle or no-change through it), and it
    neither fails nor passes on an exit code.
    """
    return dataclasses.replace(
        step, output=UNKNOWN_RESULT.format(index=index), error=None, exit_code=None
    )


def no_steps_reason(run: Run) -> str:
    """Why a run that reads as no steps is unreadable: its format, and what the reader saw."""
    where = f"read as {run.format}"
    if run.problems:
        shown = "; ".join(run.problems[:3])
        more = len(run.problems) - 3
        return f"{where}, no steps: {shown}" + (f" (and {more} more)" if more > 0 else "")
    return f"{where}, no steps in it"


def scan_config(
    config: GuardConfig | None = None, *, names_budget: bool | None = None
) -> GuardConfig:
    """The config a scan runs with: no goal check, and no step budget unless one is named.

    Args:
        config: a guard config (``--config``), or None for the scan defaults.
        names_budget: the config names a step budget; by default, when it sets ``max_steps``
            or ``task_type`` (docs/protocol.md section 5: a scan applies no budget otherwise).

    Returns:
        The config with ``detectors`` restricted accordingly; without a config, the loop
        detectors of ``SCAN_DETECTORS``.
    """
    if config is None:
        return GuardConfig(detectors=SCAN_DETECTORS, embedder=DEFAULT_EMBEDDER)
    if names_budget is None:
        names_budget = config.max_steps is not None or config.task_type is not None
    detectors = tuple(
        d
        for d in config.detectors
        if d != "goal" and (d != "max-steps" or names_budget) and d in KNOWN_DETECTORS
    )
    return dataclasses.replace(config, detectors=detectors)


FileScan = list[RunScan | Unreadable]
"""What the scan of one file gives: its runs, or why it could not be read."""


@dataclass(slots=True)
class _Firing:
    index: int
    agent: str
    verdict: Verdict
    continues: bool


@dataclass(slots=True)
class _Collector:
    """The detector the scan gives the guard: runs every part, keeps what fires, returns None."""

    parts: tuple[Any, ...]
    fail_threshold: int
    views: list[StepView] | None
    missing: frozenset[int] = frozenset()
    fired: list[_Firing] = field(default_factory=list)

    def __call__(self, history: History) -> Verdict | None:
        index = history.count - 1
        if self.views is not None:
            step = history.step
            self.views.append(
                StepView(
                    history.procedure.operation,
                    step.failed,
                    step.tool,
                    _command(step.args),
                    no_result=index in self.missing,
                )
            )
        for part in self.parts:
            verdict = part(history)
            if verdict is None or verdict.action is Action.CONTINUE:
                continue
            continues = isinstance(part, FailStreak) and history.stream.fails > part.threshold
            self.fired.append(_Firing(index, history.agent, verdict, continues))
        return None


def _command(args: Mapping[str, Any]) -> str:
    """The command of a step's arguments, or the arguments compactly, cut short."""
    command = args.get("command")
    if isinstance(command, str) and command.strip():
        text = command
    else:
        text = ", ".join(f"{k}={v!r}" for k, v in args.items() if k != "thought")
    text = text.strip()
    return text if len(text) <= _COMMAND_LIMIT else text[: _COMMAND_LIMIT - 1] + "…"


def group_loops(fired: Iterable[_Firing]) -> list[Loop]:
    """Fold the verdicts fired in one run into loops, each counted once.

    A firing joins an earlier loop of the same detector and agent when it goes on from the
    loop's latest firing (see the module docstring) or has the same fingerprint: a loop that
    comes back later in the run is the same loop.
    """
    loops: list[Loop] = []
    latest: dict[tuple[str, str], int] = {}  # (detector, agent) -> position in loops
    by_fingerprint: dict[tuple[str, str, str], int] = {}
    for f in fired:
        v = f.verdict
        detector = v.detector or "unknown"
        key = (detector, f.agent)
        at = latest.get(key)
        if at is None or not _continues(loops[at], f, detector):
            at = by_fingerprint.get((*key, v.fingerprint)) if v.fingerprint else None
        if at is not None:
            old = loops[at]
            loops[at] = dataclasses.replace(
                old,
                evidence=tuple(sorted(set(old.evidence).union(v.evidence, (f.index,)))),
                last=f.index,
            )
        else:
            at = len(loops)
            loops.append(
                Loop(
                    step=f.index,
                    detector=detector,
                    fingerprint=v.fingerprint,
                    evidence=tuple(sorted(set(v.evidence) | {f.index})),
                    last=f.index,
                    agent=f.agent,
                    reason=v.reason,
                )
            )
            if v.fingerprint:
                by_fingerprint[(*key, v.fingerprint)] = at
        latest[key] = at
    return loops


def _continues(loop: Loop, firing: _Firing, detector: str) -> bool:
    if detector == "max-steps":
        return True
    if detector == "fail-streak":
        return firing.continues
    return not set(loop.evidence).isdisjoint(firing.verdict.evidence)


def waste_of(run_steps: int, costs: Sequence[StepCost], loops: Sequence[Loop]) -> Waste:
    """The waste after the first stopping loop of a run.

    Args:
        run_steps: the number of steps in the run.
        costs: per-step usage (``Run.costs``), or empty when the format records none.
        loops: the run's loops.
    """
    points = [loop.step for loop in loops if loop.detector in STOPPING]
    return Waste.after(min(points) if points else None, run_steps, costs)


def loop_steps(loops: Sequence[Loop]) -> set[int]:
    """The steps inside a run's loops: their evidence (a step budget is no loop)."""
    return {i for loop in loops if loop.detector != "max-steps" for i in loop.evidence}


class Scanner:
    """Scans runs with one config and one embedder (loaded once, shared by every run).

    Args:
        config: the scan config; see ``scan_config`` (the default: loop detectors, ngram).
        embedder: the embedder of the stagnation check; by default ``config.embedder``.
        views: keep per-step views for a timeline (the HTML report).
        jobs: how many processes scan files at once in ``scan_paths`` (1: in this process).

    Attributes:
        vectors: the scan's vectors by text, around ``embedder`` (each distinct message is
            embedded once per process).

    Example::

        scanner = Scanner()
        for result in scanner.scan_paths([Path("runs/")]):
            print(result.file, [loop.detector for loop in result.loops])
    """

    def __init__(
        self,
        config: GuardConfig | None = None,
        *,
        embedder: Embedder | None = None,
        views: bool = False,
        jobs: int = 1,
    ) -> None:
        self.config = config if config is not None else scan_config()
        self._given_embedder = embedder  # None: each worker builds config.embedder
        self.jobs = max(1, jobs)
        if embedder is None:
            from antiloop.embed import get_embedder

            # Not the process-wide cache: the scan keeps its own, bounded, for its own texts.
            embedder = get_embedder(self.config.embedder, cached=False)
        self.embedder: Embedder = embedder
        self.views = views
        self.vectors = ScanVectors(embedder)
        self._parts = default_detector(self.config, self.vectors).detectors

    def scan_run(self, run: Run) -> RunScan:
        """Scan one run: every loop in it, and the waste after its first loop point.

        A run of no steps gives a ``RunScan`` of no loops here; ``scan_file`` and
        ``scan_paths`` report such a run as ``Unreadable`` instead.
        """
        views: list[StepView] | None = [] if self.views else None
        missing = frozenset(run.missing_results)
        collector = _Collector(self._parts, self.config.failure_streak, views, missing)
        guard = Guard(
            collector, config=self.config, embedder=self.vectors, audit=False, telemetry=False
        )  # recorded runs are no live steps: no spans
        steps = run.steps
        if steps and any(s.session != steps[0].session for s in steps):
            steps = tuple(dataclasses.replace(s, session="run") for s in steps)
        if missing:
            steps = tuple(unknown_result(s, i) if i in missing else s for i, s in enumerate(steps))
        record = guard.record
        for step in steps:
            record(step)
        loops = tuple(group_loops(collector.fired))
        return RunScan(
            file=run.file,
            record=run.record,
            format=run.format,
            steps=len(steps),
            loops=loops,
            waste=waste_of(len(steps), run.costs, loops),
            spend=usage_of(len(steps), run.costs),
            loop_spend=usage_of(len(steps), run.costs, loop_steps(loops)),
            cost_recorded=bool(run.costs),
            views=tuple(views) if views is not None else (),
            problems=run.problems,
            missing_results=run.missing_results,
            partial_reason=run.partial_reason,
        )

    def scan_file(self, path: Path, format: str = "auto") -> Iterator[RunScan | Unreadable]:
        """Scan every run of one trace file; a run that reads as no steps is ``Unreadable``.

        Raises:
            UnknownFormat: the file is no known trace (raised before the first run).
            OSError: the file cannot be read.
        """
        for run in read_runs(path, format):
            if run.steps:
                yield self.scan_run(run)
            else:
                yield Unreadable(run.file, no_steps_reason(run), run.record, run.format)

    def scan_one(self, path: Path, format: str = "auto") -> FileScan:
        """Every run of one file scanned; a file that cannot be read ends as ``Unreadable``."""
        return list(self._scan_or_say(path, format))

    def _scan_or_say(self, path: Path, format: str) -> Iterator[RunScan | Unreadable]:
        try:
            yield from self.scan_file(path, format)
        except (UnknownFormat, OSError) as exc:
            yield Unreadable(str(path), _reason(exc, path))
        except RecursionError:  # a reader's JSON, or a step, deeper than Python can follow
            yield Unreadable(str(path), "nested too deeply to read")

    def scan_paths(
        self,
        paths: Sequence[Path],
        format: str = "auto",
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[RunScan | Unreadable]:
        """Scan files and directories (recursively); what cannot be read is ``Unreadable``.

        With ``jobs`` above 1, files are scanned in that many processes; the results are the
        same, in the same order (see ``antiloop.scan.pool``).

        Args:
            paths: files and directories.
            format: ``auto`` or one of the trace formats.
            progress: called with (files done, files in all) after each file.

        Raises:
            FileNotFoundError: a path does not exist (before anything is scanned).
        """
        files = list(iter_paths(paths))
        results: Iterator[Iterable[RunScan | Unreadable]] | None = None
        if self.jobs > 1 and len(files) > 1:
            build = functools.partial(
                Scanner, self.config, embedder=self._given_embedder, views=self.views
            )
            results = scan_files(build, files, format, self.jobs, local=self)
        if results is None:  # in this process, each run given as soon as it is scanned
            results = (self._scan_or_say(path, format) for path in files)
        for done, items in enumerate(results, start=1):
            yield from items
            if progress is not None:
                progress(done, len(files))


def _reason(exc: BaseException, path: Path) -> str:
    text = str(exc)
    prefix = f"{path}: "
    if isinstance(exc, OSError):
        return f"cannot read: {exc.strerror or exc}"
    return text[len(prefix) :] if text.startswith(prefix) else text
