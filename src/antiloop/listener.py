"""What observes the guard's decisions: audit logs, metrics, traces (``antiloop.telemetry``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from antiloop.core.step import Step
    from antiloop.core.verdict import Verdict


class Listener:
    """Observes the guard's decisions; cannot change them. Override what you need."""

    def on_verdict(self, step: Step, verdict: Verdict) -> None:
        """Called after every recorded step with the verdict the guard returned."""

    def on_reset(self, session: str, reason: str) -> None:
        """Called when a session's windows are reset (a person spoke)."""
