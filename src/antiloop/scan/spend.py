"""What the steps of a run spent: all of them, those inside its loops, those after its loop point.

``Usage`` sums the per-step costs a format records (``Run.costs``); a figure the format does not
record stays None rather than reading as zero. ``Waste`` is the usage after the first loop point,
with that point.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from antiloop.traces import StepCost


@dataclass(frozen=True, slots=True)
class Usage:
    """What some steps of a run spent.

    Attributes:
        steps: how many steps.
        input_tokens: their prompt tokens, or None when the format records none.
        output_tokens: their completion tokens, or None when the format records none.
        cost_usd: their cost in dollars, or None when the format records none.
    """

    steps: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def of(cls, costs: Sequence[StepCost], steps: Iterable[int]) -> Usage:
        """What the given steps (0-based indices, each counted once) spent.

        Args:
            costs: per-step usage (``Run.costs``), or empty when the format records none.
            steps: the steps to count.
        """
        chosen = sorted(set(steps))
        picked = [costs[i] for i in chosen if i < len(costs)]
        return cls(
            steps=len(chosen),
            input_tokens=_add(costs, "input_tokens", picked),
            output_tokens=_add(costs, "output_tokens", picked),
            cost_usd=_add(costs, "cost_usd", picked),
        )

    def plus(self, other: Usage) -> Usage:
        """Both usages summed; a figure recorded in either one is recorded in the sum."""

        def add(x: Any, y: Any) -> Any:
            return y if x is None else x if y is None else x + y

        return Usage(
            self.steps + other.steps,
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.cost_usd, other.cost_usd),
        )

    @property
    def recorded(self) -> bool:
        """The format records some tokens or cost for these steps."""
        return any(v is not None for v in (self.input_tokens, self.output_tokens, self.cost_usd))

    def to_json(self) -> dict[str, Any]:
        """The usage as the ``--json`` output writes it."""
        return {
            "steps": self.steps,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
        }

    def text(self) -> str:
        """``N steps, N tokens, $N`` for the parts that are recorded."""
        parts = [f"{self.steps} steps"]
        if self.input_tokens is not None or self.output_tokens is not None:
            parts.append(f"{(self.input_tokens or 0) + (self.output_tokens or 0):,} tokens")
        if self.cost_usd is not None:
            parts.append(f"${self.cost_usd:,.2f}")
        return ", ".join(parts)


NO_USAGE = Usage()
"""No steps, nothing recorded."""


@dataclass(frozen=True, slots=True)
class Waste(Usage):
    """What a run spent after its first loop point (its steps, tokens and dollars).

    Attributes:
        from_step: the first loop point, or None when no stopping loop was found.
    """

    from_step: int | None = None

    @classmethod
    def after(cls, point: int | None, run_steps: int, costs: Sequence[StepCost]) -> Waste:
        """What the steps after ``point`` spent (nothing when there is no loop point).

        Args:
            point: the first loop point, or None.
            run_steps: the number of steps in the run.
            costs: per-step usage (``Run.costs``), or empty when the format records none.
        """
        spent = Usage.of(costs, range(point + 1, run_steps) if point is not None else ())
        return cls(spent.steps, spent.input_tokens, spent.output_tokens, spent.cost_usd, point)

    def to_json(self) -> dict[str, Any]:
        """The waste as the ``--json`` output writes it: ``from_step``, then the usage."""
        return {"from_step": self.from_step, **Usage.to_json(self)}


def usage_of(
    run_steps: int, costs: Sequence[StepCost], steps: Iterable[int] | None = None
) -> Usage:
    """What the given steps of a run (every step by default) spent; see ``Usage.of``."""
    return Usage.of(costs, range(run_steps) if steps is None else steps)


def _add(costs: Sequence[StepCost], name: str, picked: Iterable[StepCost]) -> Any:
    """The sum of one figure over the picked steps; None when no step of the run records it."""
    if all(getattr(c, name) is None for c in costs):
        return None
    total: Any = 0.0 if name == "cost_usd" else 0
    for cost in picked:
        value = getattr(cost, name)
        if value is not None:
            total += value
    return total
