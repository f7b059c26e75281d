"""Calibration of the semantic thresholds on a labelled set, per embedder.

A labelled set is JSON lines, one item each, of two kinds::

    {"id": "g001", "kind": "goal", "split": "train", "goal": "Fix the failing login test.",
     "output": "The login test passes now.", "reached": true, "tag": "completion"}
    {"id": "s001", "kind": "stagnation", "split": "test",
     "messages": ["Retry 4: same error.", "Retry 5: same error.", "Retry 6: same error."],
     "stalled": true, "tag": "counter"}

A stagnation item's last message is judged against the ones before it. ``split`` (``train``
or ``test``) is optional: the cut is chosen on the train part and reported on the test part.

Both decisions are the detectors' own (:func:`antiloop.core.semantic.goal_reached` and
:func:`antiloop.core.semantic.stalled`), so a threshold found here means the same in the guard.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from antiloop.core import semantic
from antiloop.core.errors import ConfigError
from antiloop.embed import Embedder

#: The cut keeps at least this precision when it can (a false stop costs more than a miss).
MIN_PRECISION = 0.9


@dataclass(frozen=True, slots=True)
class GoalItem:
    """A goal and an agent's output, labelled reached or not."""

    id: str
    split: str
    goal: str
    output: str
    reached: bool
    tag: str = ""


@dataclass(frozen=True, slots=True)
class StagnationItem:
    """Consecutive agent messages, labelled stalled (the last says nothing new) or not."""

    id: str
    split: str
    messages: tuple[str, ...]
    stalled: bool
    tag: str = ""


Item = GoalItem | StagnationItem


@dataclass(frozen=True, slots=True)
class Scored:
    """An item with what the detector sees of it, for any threshold."""

    item: Item
    similarity: float
    signals: semantic.GoalSignals | None = None
    similarities: tuple[float, ...] = ()
    progressed: tuple[bool, ...] = ()
    blank: bool = False

    @property
    def label(self) -> bool:
        """The item's label: reached, or stalled."""
        return self.item.reached if isinstance(self.item, GoalItem) else self.item.stalled

    def decide(self, threshold: float) -> bool:
        """The detector's decision at ``threshold``."""
        if self.signals is not None:
            return semantic.goal_reached(self.similarity, self.signals, threshold)
        return self.blank or semantic.stalled(self.similarities, self.progressed, threshold)


@dataclass(frozen=True, slots=True)
class Row:
    """Counts and rates at one threshold."""

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        """The share of firings that are right (1.0 when nothing fires)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """The share of positives found (1.0 when there are none)."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        """The harmonic mean of precision and recall."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def f05(self) -> float:
        """F-beta with beta 0.5: precision weighs twice recall (a false stop costs more)."""
        p, r = self.precision, self.recall
        return 1.25 * p * r / (0.25 * p + r) if p + r else 0.0


def load_labelled(path: str | Path) -> list[Item]:
    """Read a labelled set (JSON lines); a bad line is a ``ConfigError`` naming it.

    ``path`` is a file, or a directory whose ``*.jsonl`` files are read in name order (the
    shipped set keeps its held-out goal part in a file of its own). Ids must be unique.
    """
    file = Path(path)
    files = sorted(file.glob("*.jsonl")) if file.is_dir() else [file]
    if not files:
        raise ConfigError(f"no *.jsonl labelled set in {file}")
    items: list[Item] = []
    for one in files:
        items.extend(_load_file(one))
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise ConfigError(f"{file}: the id {item.id!r} is used twice")
        seen.add(item.id)
    return items


def _load_file(file: Path) -> list[Item]:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read labelled set {file}: {exc.strerror or exc}") from None
    items: list[Item] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            items.append(parse_item(json.loads(line), f"{file}:{number}"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{file}:{number}: not a labelled item: {exc}") from None
    return items


def parse_item(data: dict[str, object], where: str = "item") -> Item:
    """One labelled item from its JSON object."""
    kind = data.get("kind")
    ident = str(data.get("id", where))
    split = str(data.get("split", "all"))
    tag = str(data.get("tag", ""))
    if kind == "goal":
        goal, output, reached = data["goal"], data["output"], data["reached"]
        if (
            not isinstance(goal, str)
            or not isinstance(output, str)
            or not isinstance(reached, bool)
        ):
            raise ValueError("a goal item needs string 'goal' and 'output' and boolean 'reached'")
        return GoalItem(ident, split, goal, output, reached, tag)
    if kind == "stagnation":
        messages, stalled = data["messages"], data["stalled"]
        if (
            not isinstance(messages, list)
            or len(messages) < 2
            or not all(isinstance(m, str) for m in messages)
            or not isinstance(stalled, bool)
        ):
            raise ValueError("a stagnation item needs 2+ string 'messages' and boolean 'stalled'")
        return StagnationItem(ident, split, tuple(messages), stalled, tag)
    raise ValueError(f"'kind' must be 'goal' or 'stagnation', not {kind!r}")


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum(x * y for x, y in zip(a, b, strict=False)))


def score(items: Iterable[Item], embedder: Embedder) -> list[Scored]:
    """Embed every text once (digits masked, as the detectors do) and score each item."""
    items = list(items)
    texts: dict[str, int] = {}
    for item in items:
        parts = (item.goal, item.output) if isinstance(item, GoalItem) else item.messages
        for text in parts:
            texts.setdefault(semantic.mask_digits(text), len(texts))
    vectors = embedder.embed(list(texts)) if texts else []

    def vec(text: str) -> Sequence[float]:
        return vectors[texts[semantic.mask_digits(text)]]

    out: list[Scored] = []
    for item in items:
        if isinstance(item, GoalItem):
            out.append(
                Scored(
                    item,
                    _dot(vec(item.goal), vec(item.output)),
                    signals=semantic.goal_signals(item.goal, item.output),
                )
            )
            continue
        current, earlier = item.messages[-1], item.messages[-2::-1]
        if all(semantic.is_blank(m) for m in item.messages):
            out.append(Scored(item, 1.0, blank=True))
            continue
        sims = tuple(_dot(vec(current), vec(m)) for m in earlier)
        progressed = tuple(semantic.numbers_progress(m, current) for m in earlier)
        out.append(Scored(item, semantic.decayed_similarity(sims), None, sims, progressed))
    return out


def sweep(scored: Sequence[Scored], thresholds: Iterable[float]) -> list[Row]:
    """Counts at each threshold."""
    rows = []
    for t in thresholds:
        tp = fp = fn = tn = 0
        for s in scored:
            fired = s.decide(t)
            if fired and s.label:
                tp += 1
            elif fired:
                fp += 1
            elif s.label:
                fn += 1
            else:
                tn += 1
        rows.append(Row(round(t, 4), tp, fp, fn, tn))
    return rows


def grid(low: float = 0.0, high: float = 1.0, step: float = 0.01) -> list[float]:
    """Thresholds from ``low`` to ``high`` inclusive."""
    n = round((high - low) / step)
    return [round(low + i * step, 4) for i in range(n + 1)]


def best_cut(rows: Sequence[Row], min_precision: float = MIN_PRECISION) -> Row:
    """The cut with the best F0.5 among those with precision >= ``min_precision`` (else any).

    Among equally good cuts the middle one is taken, away from both edges of the plateau.
    """
    if not rows:
        raise ConfigError("no thresholds to choose from")
    useful = [r for r in rows if r.tp > 0 and r.precision >= min_precision] or list(rows)
    top = max(round(r.f05, 9) for r in useful)
    plateau = [r for r in useful if round(r.f05, 9) == top]
    return plateau[len(plateau) // 2]


@dataclass(frozen=True, slots=True)
class KindReport:
    """Calibration of one decision (goal or stagnation) for one embedder."""

    kind: str
    rows: tuple[Row, ...]
    best: Row
    held_out: Row | None
    train_size: int
    test_size: int


@dataclass(frozen=True, slots=True)
class Report:
    """What ``antiloop calibrate`` prints: per kind, the sweep, the cut and the held-out check."""

    embedder: str
    kinds: tuple[KindReport, ...]

    def thresholds(self) -> dict[str, float]:
        """The chosen cut per kind."""
        return {k.kind: k.best.threshold for k in self.kinds}


def calibrate(
    items: Sequence[Item],
    embedder: Embedder,
    thresholds: Sequence[float] | None = None,
    min_precision: float = MIN_PRECISION,
) -> Report:
    """Choose each threshold on the train part (all items without a split) and test it.

    Items whose ``split`` is ``test`` are held out: the cut is chosen without them and then
    measured on them. Without any test item, ``held_out`` is ``None``.
    """
    grid_ = list(thresholds) if thresholds is not None else grid()
    scored = score(items, embedder)
    kinds = []
    for kind, cls in (("goal", GoalItem), ("stagnation", StagnationItem)):
        mine = [s for s in scored if isinstance(s.item, cls)]
        if not mine:
            continue
        train = [s for s in mine if s.item.split != "test"]
        test = [s for s in mine if s.item.split == "test"]
        rows = sweep(train or mine, grid_)
        best = best_cut(rows, min_precision)
        held = sweep(test, [best.threshold])[0] if test else None
        kinds.append(KindReport(kind, tuple(rows), best, held, len(train), len(test)))
    return Report(embedder.id, tuple(kinds))


def _fmt(row: Row) -> str:
    return (
        f"| {row.threshold:.2f} | {row.precision:.3f} | {row.recall:.3f} | {row.f05:.3f} "
        f"| {row.tp} | {row.fp} | {row.fn} | {row.tn} |"
    )


def format_report(report: Report, every: int = 1) -> str:
    """The report as markdown: each kind's sweep (every ``every``-th row), cut and held-out row."""
    out = [f"Embedder `{report.embedder}`.", ""]
    for k in report.kinds:
        out.append(f"### {k.kind} ({k.train_size} train, {k.test_size} held out)")
        out.append("")
        out.append("| threshold | precision | recall | F0.5 | TP | FP | FN | TN |")
        out.append("|---|---|---|---|---|---|---|---|")
        for i, row in enumerate(k.rows):
            if i % every == 0 or row is k.best:
                mark = " <- best cut" if row is k.best else ""
                out.append(_fmt(row) + mark)
        out.append("")
        out.append(
            f"Best cut: **{k.best.threshold:.2f}** (train precision {k.best.precision:.3f}, "
            f"recall {k.best.recall:.3f})."
        )
        if k.held_out is not None:
            h = k.held_out
            out.append(
                f"Held out at {h.threshold:.2f}: precision **{h.precision:.3f}**, recall "
                f"**{h.recall:.3f}** (TP {h.tp}, FP {h.fp}, FN {h.fn}, TN {h.tn})."
            )
        out.append("")
    return "\n".join(out)
