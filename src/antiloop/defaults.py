"""What a Guard is made of when given only a config: its policy, detectors, embedder, listeners.

``policy_of`` is the core's ``Policy`` a config describes (its rule set with it);
``default_detector`` composes the detectors the config switches on, the opt-in ones
(``antiloop.core.extra``) among them; ``LazyEmbedder`` loads the configured embedder only when
a semantic check first needs it; ``Listener`` is the no-op base of the guard's observers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from antiloop.config import OPT_IN_DETECTORS, GuardConfig
from antiloop.core.decide import DetectorFn, Policy
from antiloop.core.detectors import (
    AnyOf,
    Cycle,
    Detector,
    FailStreak,
    Goal,
    MaxSteps,
    Repeat,
    Stagnation,
)
from antiloop.core.verdict import Action
from antiloop.listener import Listener

if TYPE_CHECKING:
    from antiloop.embed import Embedder

__all__ = [
    "LazyEmbedder",
    "Listener",
    "default_detector",
    "opt_in_detectors",
    "policy_of",
    "telemetry_listener",
]

_ACTIONS = {a.name.lower(): a for a in Action}


class LazyEmbedder:
    """An embedder chosen by name and loaded only when a semantic check first needs it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._inner: Embedder | None = None

    def __repr__(self) -> str:
        return f"LazyEmbedder({self.name!r})"

    @property
    def inner(self) -> Embedder:
        """The embedder itself, loaded on first use."""
        if self._inner is None:
            from antiloop.embed import get_embedder

            self._inner = get_embedder(self.name)
        return self._inner

    @property
    def id(self) -> str:
        """The loaded embedder's model id."""
        return self.inner.id

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed with the loaded embedder."""
        return self.inner.embed(texts)


def policy_of(config: GuardConfig, detector: DetectorFn, **changes: Any) -> Policy:
    """The policy a config describes, judged by ``detector``, reading by ``config.rules``."""
    period = config.cycle_max_period if "cycle" in config.detectors else 1
    policy = Policy(
        detector,
        frozenset(t.lower() for t in config.allow_repeat_tools),
        max(period, 1),
        max(2 * period, config.repeat_threshold, 1),
        config.stagnation_window + 1,
        config.failure_streak,
        config.mode,
        config.escalate_to,
        ladder=tuple(Action[name.upper()] for name in config.escalation),
        rules=config.rules,
    )
    return replace(policy, **changes) if changes else policy


def default_detector(config: GuardConfig, embedder: Embedder, *, hook: bool = False) -> AnyOf:
    """The detectors the config switches on, composed with ``|``.

    ``hook``: the mappings of a coding CLI's hook (see config): a cycle answers as a repeat does
    (``repeat_action``), and a reached goal nudges instead of stopping the agent's turn.
    """
    on = set(config.detectors)
    action = _ACTIONS[config.repeat_action]
    parts: list[Detector] = []
    if "repeat" in on:
        repeat: Detector = Repeat(config.repeat_threshold)
        parts.append(repeat if action is Action.STOP else repeat.with_action(action))
    if "cycle" in on and config.cycle_max_period >= 2:
        cycle: Detector = Cycle(config.cycle_max_period)
        parts.append(cycle if not hook or action is Action.STOP else cycle.with_action(action))
    if "fail-streak" in on and config.failure_streak >= 1:
        parts.append(FailStreak(config.failure_streak))
    if "max-steps" in on:
        parts.append(MaxSteps(config.budget))
    if "goal" in on:
        goal: Detector = Goal(embedder, config.goal_threshold, config.min_steps)
        parts.append(goal.with_action(Action.NUDGE) if hook else goal)
    if "stagnation" in on:
        parts.append(
            Stagnation(
                embedder, config.stagnation_threshold, config.stagnation_window, config.min_steps
            )
        )
    if on.intersection(OPT_IN_DETECTORS):
        parts.extend(opt_in_detectors(config))
    return AnyOf(parts)


def opt_in_detectors(config: GuardConfig) -> list[Detector]:
    """The opt-in detectors ``config.detectors`` names, with the config's thresholds."""
    from antiloop.core.extra.detectors import CosmeticRerun, HiddenRepeat

    on = config.detectors
    parts: list[Detector] = []
    if "hidden-repeat" in on:
        parts.append(HiddenRepeat(config.hidden_repeat_threshold))
    if "cosmetic-rerun" in on:
        parts.append(CosmeticRerun(config.cosmetic_rerun_threshold))
    return parts


def telemetry_listener(table: Mapping[str, Any] | None, source: str) -> Listener | None:
    """The OpenTelemetry listener, when ``[telemetry]`` or the OTLP environment asks for one."""
    if table is None and not (
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return None  # nothing asks: antiloop.telemetry (and OpenTelemetry) stay unimported
    from antiloop.telemetry import listener_for

    return listener_for(os.environ, table, source=source)
