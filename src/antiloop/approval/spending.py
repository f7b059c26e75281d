"""A budget check-in brought to a person: the soft limit's ``ask`` becomes a ruling.

The guard shows the person what was spent (``Budgets.report``) and applies what comes back:
the limits a person edited (``Ruling.limits``), or the end of the session when they refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from antiloop.approval.request import ApprovalRequest
from antiloop.approval.ruling import Ruling
from antiloop.approval.waiting import Flow
from antiloop.budgets import DETECTOR
from antiloop.core.verdict import Action, Verdict

if TYPE_CHECKING:
    from antiloop.core.step import Step


def settling(
    asking: Callable[..., Flow[ApprovalRequest]],
    verdict: Verdict,
    step: Step,
    spend: Mapping[str, Any],
) -> Flow[Ruling]:
    """Ask a person about a soft-limit ``ask``; the run waits for the answer.

    Approved: the run goes on (to the next check-in, or to the limits the person edited).
    Denied or expired: the session stops. A hard-limit stop is not asked about.

    Args:
        asking: the approvals' request flow (``Approvals._asking``).
        verdict: the budget's verdict.
        step: the step that passed the soft limit.
        spend: the spending report the person sees as the request's arguments.
    """
    kept = Ruling(step.session, verdict, step.args)
    if verdict.action is not Action.ASK:
        return kept
    request = yield from asking(
        session=step.session,
        agent=step.agent,
        tool=DETECTOR,
        args=dict(spend),
        risk=DETECTOR,
        reason=verdict.reason,
        extra={"detector": DETECTOR, "action": "ask"},
        rule="budget:soft",
    )
    status = str(request.status)
    if status == "pending":  # a caller that does not wait (the service): asked, not answered
        return kept
    if status in ("approved", "edited"):
        said = f" A person says: {request.comment}" if request.comment else ""
        going_on = Verdict(
            Action.NUDGE if said else Action.CONTINUE,
            DETECTOR if said else None,
            "budget" if said else None,
            reason=f"{verdict.reason} Approved by {request.decided_by}.",
            hint=said.strip(),
        )
        limits = dict(request.edited_args) if request.edited_args else None
        return Ruling(step.session, going_on, step.args, request, limits=limits)
    stop = Verdict.stop(
        DETECTOR,
        f"{verdict.reason} Not approved ({status}, {request.decided_by}).",
        outcome="budget",
        hint=f"A person says: {request.comment}" if request.comment else verdict.hint,
    )
    return Ruling(step.session, stop, step.args, request, end=stop)
