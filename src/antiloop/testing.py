"""Helpers for tests, ours and yours: scripted embedders, recording listeners, step builders."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from antiloop.core.step import Step
from antiloop.core.verdict import Verdict
from antiloop.guard import Guard
from antiloop.listener import Listener


def make_steps(*specs: Mapping[str, Any] | Step, **common: Any) -> list[Step]:
    """Build steps from dicts of section 2 fields; ``common`` fields apply to each one.

    Example:
        >>> [s.tool for s in make_steps({"tool": "grep"}, {"tool": "read"}, agent="explorer")]
        ['grep', 'read']
    """
    from antiloop.core.step import step_from_dict

    out = []
    for spec in specs:
        if isinstance(spec, Step):
            out.append(spec)
        else:
            out.append(step_from_dict({**common, **spec}))
    return out


def verdicts_of(guard: Guard, steps: Iterable[Step | Mapping[str, Any]]) -> list[Verdict]:
    """Record every step with ``guard`` and return the verdicts in order."""
    return [guard.record(step) for step in steps]


class ScriptedEmbedder:
    """An embedder whose vectors you choose: ``vectors[text]``, else a one-hot per new text.

    Texts not in ``vectors`` get distinct orthogonal unit vectors (similarity 0), unless
    ``same`` names groups of texts that should be identical (similarity 1).
    """

    def __init__(
        self,
        vectors: Mapping[str, Sequence[float]] | None = None,
        *,
        same: Iterable[Iterable[str]] = (),
        dims: int = 64,
        id: str = "scripted",
    ) -> None:
        self.vectors = {k: _unit(v) for k, v in (vectors or {}).items()}
        self.dims = dims
        self._id = id
        self._groups: dict[str, int] = {}
        for group_no, group in enumerate(same):
            for text in group:
                self._groups[text] = group_no
        self._seen: dict[Any, int] = {}
        self.calls: list[str] = []

    @property
    def id(self) -> str:
        """The embedder id thresholds are stored under."""
        return self._id

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, as scripted."""
        out = []
        for text in texts:
            self.calls.append(text)
            if text in self.vectors:
                out.append(list(self.vectors[text]))
                continue
            key = ("group", self._groups[text]) if text in self._groups else ("text", text)
            slot = self._seen.setdefault(key, len(self._seen)) % self.dims
            out.append([1.0 if i == slot else 0.0 for i in range(self.dims)])
        return out


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class RecordingListener(Listener):
    """Keeps every (step, verdict) pair and every reset, for assertions."""

    def __init__(self) -> None:
        self.verdicts: list[tuple[Step, Verdict]] = []
        self.resets: list[tuple[str, str]] = []

    def on_verdict(self, step: Step, verdict: Verdict) -> None:
        """Keep the pair."""
        self.verdicts.append((step, verdict))

    def on_reset(self, session: str, reason: str) -> None:
        """Keep the reset."""
        self.resets.append((session, reason))


class CallbackApprover:
    """An approver that answers with a plain function and remembers what it was asked."""

    def __init__(self, answer: Callable[[Verdict], bool]) -> None:
        self.answer = answer
        self.asked: list[Verdict] = []

    def __call__(self, verdict: Verdict) -> bool:
        """Answer ``verdict`` with the function."""
        self.asked.append(verdict)
        return self.answer(verdict)
