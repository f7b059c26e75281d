"""The corpus summary of a scan, kept as the runs stream past (nothing per run is kept)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from antiloop.scan.engine import RunScan, Unreadable
from antiloop.scan.spend import Usage

TOP_FINGERPRINTS = 10
UNREADABLE_LISTED = 10


@dataclass(slots=True)
class Summary:
    """Counts over every run scanned: loops by kind, common fingerprints, total waste.

    Feed it with ``add`` (a ``RunScan`` or an ``Unreadable`` input); ``to_json`` gives the final
    ``{"summary": ...}`` object of ``--json``. Unreadable inputs are counted apart: they are in
    none of the run counts.
    """

    files: int = 0
    """Files with at least one run read (``unreadable`` holds what could not be read)."""
    runs: int = 0
    steps: int = 0
    runs_with_loops: int = 0
    """Runs with any loop: the ones that stop and the ones with warnings only."""
    runs_stopping: int = 0
    """Runs with a loop that stops the run (a first loop point, ``STOPPING``)."""
    loops: int = 0
    runs_by_kind: Counter[str] = field(default_factory=Counter)
    loops_by_kind: Counter[str] = field(default_factory=Counter)
    runs_by_format: Counter[str] = field(default_factory=Counter)
    fingerprint_runs: Counter[str] = field(default_factory=Counter)
    fingerprint_kind: dict[str, str] = field(default_factory=dict)
    waste: Usage = field(default_factory=Usage)
    """What the runs spent after their first loop points."""
    spend: Usage = field(default_factory=Usage)
    """What every run spent, where the formats record it."""
    loop_spend: Usage = field(default_factory=Usage)
    """What the steps inside loops spent."""
    unreadable: list[Unreadable] = field(default_factory=list)
    partial: list[tuple[str, str]] = field(default_factory=list)
    """Runs read with some results missing: (run name, why); counted as runs too."""
    _last_file: str | None = None

    def add(self, item: RunScan | Unreadable) -> None:
        """Count one run, or one input that could not be read."""
        if isinstance(item, Unreadable):
            self.unreadable.append(item)
            return
        if item.file != self._last_file:
            self.files += 1
            self._last_file = item.file
        self.runs += 1
        self.steps += item.steps
        self.runs_by_format[item.format] += 1
        if item.partial:
            name = item.file + (f"#{item.record}" if item.record is not None else "")
            self.partial.append((name, item.partial_reason or "some results not found"))
        if item.loops:
            self.runs_with_loops += 1
            self.runs_stopping += item.first_loop is not None
            self.loops += len(item.loops)
            self.runs_by_kind.update({loop.detector for loop in item.loops})
            self.loops_by_kind.update(loop.detector for loop in item.loops)
            prints = {loop.fingerprint: loop.detector for loop in item.loops if loop.fingerprint}
            self.fingerprint_runs.update(list(prints))
            for fp, kind in prints.items():
                self.fingerprint_kind.setdefault(fp, kind)
        self.waste = self.waste.plus(item.waste)
        self.spend = self.spend.plus(item.spend)
        self.loop_spend = self.loop_spend.plus(item.loop_spend)

    def top_fingerprints(self, n: int = TOP_FINGERPRINTS) -> list[tuple[str, int]]:
        """The ``n`` fingerprints found in the most runs, with their run counts."""
        return sorted(self.fingerprint_runs.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def to_json(self) -> dict[str, Any]:
        """The summary object of ``--json``."""
        return {
            "files": self.files,
            "runs": self.runs,
            "steps": self.steps,
            "unreadable": [u.to_json() for u in self.unreadable],
            "partial": [{"run": name, "reason": why} for name, why in self.partial],
            "runs_by_format": dict(sorted(self.runs_by_format.items())),
            "runs_with_loops": self.runs_with_loops,
            "runs_with_stopping_loops": self.runs_stopping,
            "runs_with_warnings_only": self.runs_with_loops - self.runs_stopping,
            "loops": self.loops,
            "runs_with_loops_by_kind": dict(sorted(self.runs_by_kind.items())),
            "loops_by_kind": dict(sorted(self.loops_by_kind.items())),
            "top_fingerprints": [
                {"fingerprint": fp, "detector": self.fingerprint_kind[fp], "runs": runs}
                for fp, runs in self.top_fingerprints()
            ],
            "waste": _rounded(self.waste),
            "spend": _rounded(self.spend),
            "loop_spend": _rounded(self.loop_spend),
        }

    def text(self) -> str:
        """The summary for people, a few lines."""
        lines = [
            f"Scanned {self.runs} runs ({self.steps} steps) in {self.files} files"
            + (f"; {len(self.unreadable)} unreadable" if self.unreadable else "")
            + (f"; {len(self.partial)} partial" if self.partial else "")
            + ".",
        ]
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.runs_by_kind.items()))
        share = f" ({100 * self.runs_with_loops / self.runs:.0f}%)" if self.runs else ""
        warned = self.runs_with_loops - self.runs_stopping
        split = (
            f": {self.runs_stopping} stopped at a loop point, {warned} with warnings only"
            if warned
            else ""
        )
        lines.append(
            f"Runs with loops: {self.runs_with_loops}{share}{split}"
            + (f"; by kind: {kinds}" if kinds else "")
        )
        lines.append(f"Waste after the first loop point: {self.waste.text()}.")
        if self.spend.recorded:
            lines.append(f"Spend: {self.spend.text()}; inside loops: {self.loop_spend.text()}.")
        top = self.top_fingerprints(5)
        if top:
            lines.append("Most common fingerprints (runs):")
            lines.extend(f"  {runs:>4}  {fp}" for fp, runs in top)
        if self.partial:
            lines.append(
                f"Partial runs (steps whose result was not found, judged as unknown, never as "
                f"empty): {len(self.partial)}"
            )
            lines.extend(f"  {name}: {why}" for name, why in self.partial[:UNREADABLE_LISTED])
            more = len(self.partial) - UNREADABLE_LISTED
            if more > 0:
                lines.append(f"  and {more} more")
        if self.unreadable:
            lines.append(f"Unreadable (not counted as runs): {len(self.unreadable)}")
            lines.extend(
                f"  {unreadable_name(u)}: {u.reason}" for u in self.unreadable[:UNREADABLE_LISTED]
            )
            more = len(self.unreadable) - UNREADABLE_LISTED
            if more > 0:
                lines.append(f"  and {more} more")
        return "\n".join(lines)


def _rounded(usage: Usage) -> dict[str, Any]:
    out = usage.to_json()
    if usage.cost_usd is not None:
        out["cost_usd"] = round(usage.cost_usd, 6)
    return out


def unreadable_name(item: Unreadable) -> str:
    """The unreadable input's path, with ``#record`` for a record of a multi-run file."""
    return item.file + (f"#{item.record}" if item.record is not None else "")


def ranges(indices: Sequence[int]) -> str:
    """Step indices as ranges: ``1-3, 7`` for (1, 2, 3, 7)."""
    parts: list[str] = []
    start = prev = -2
    for i in indices:
        if i == prev + 1:
            prev = i
            continue
        if start >= 0:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = i
    if start >= 0:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ", ".join(parts)
