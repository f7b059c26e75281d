"""What approvals decide, as data the guard applies: the call, the ruling, the gate.

Approvals never call the guard. The guard hands them its verdict and the call (or the step);
they answer with a ``Ruling``: the verdict to give, the arguments to run with, and what the
guard must do to the session (end it, reset its windows, set the limits a person edited).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from antiloop.core.verdict import Action, Verdict

if TYPE_CHECKING:
    from antiloop.approval.request import ApprovalRequest


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call before it runs, as the approvals see it.

    Example:
        >>> Call("Bash", {"command": "ls"}, session="s1").agent
        'agent'
    """

    tool: str
    args: Mapping[str, Any]
    session: str = "default"
    agent: str = "agent"
    paths: Sequence[str] = ()
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class Gate:
    """The answer to "may this call run?".

    Attributes:
        verdict: what the agent is told; ``BLOCK``/``STOP`` mean the call must not run.
        args: the arguments to run it with (a person may have edited them).
        request: the approval request, when a person was asked.
    """

    verdict: Verdict
    args: Mapping[str, Any]
    request: ApprovalRequest | None = None

    @property
    def allowed(self) -> bool:
        """True when the call may run."""
        return self.verdict.action < Action.BLOCK


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the approvals decided about a call or a verdict; the guard applies it.

    Attributes:
        session: the session it is about.
        verdict: what the agent is told: allow (continue), a nudge with a person's words or
            queued feedback as the hint, ask (a request waits), deny (block) or stop.
        args: the arguments to run the call with (a person may have edited them).
        request: the approval request, when a person was asked.
        end: end the session with this verdict (a person stopped the run, a check-in was
            refused); later steps answer ``terminated``.
        reset: reset the session's windows, for this reason (a person let a stopped run go on).
        limits: the spending limits a person set in an edited check-in (``antiloop.budgets``).
    """

    session: str
    verdict: Verdict
    args: Mapping[str, Any]
    request: ApprovalRequest | None = None
    end: Verdict | None = None
    reset: str | None = None
    limits: Mapping[str, Any] | None = None

    @property
    def allowed(self) -> bool:
        """True when the call may run."""
        return self.verdict.action < Action.BLOCK

    @property
    def gate(self) -> Gate:
        """What the caller of ``Guard.gate`` sees: verdict, arguments, request."""
        return Gate(self.verdict, self.args, self.request)
