"""Answers in each agent's dialect: an ``Outcome`` in, the hook's stdout JSON out.

Claude Code (integrations.md 1.4, 1.5): ``deny``/``ask`` before a call go in
``hookSpecificOutput.permissionDecision``; after a call ``decision: "block"`` puts the reason
beside the result; ``halt`` is ``continue: false`` with a ``stopReason`` for the person.
Gemini CLI (2.1): ``decision: "deny"`` before a call; after one the reason is appended to the
result (``additionalContext``) rather than hiding it, except for a repeat: that output is one
the model already read, and Gemini HTML-escapes ``<`` and ``>`` in ``additionalContext``, so the
reason replaces the output (``decision: "deny"``) and the model reads the fingerprint exactly as
the audit log keeps it. Codex CLI (2.3) honours only ``deny`` before a call: an ``ask`` there
would mark the hook failed and the call would run anyway, so it is left to Codex's own
approval; Codex appends ``. Command: …`` to a deny reason, so the reason ends without a full
stop, and its ``decision: "block"`` after a call replaces the output, so only a repeat uses it
(a failure streak's hint goes beside the error, as ``additionalContext``). Every answer is
exit code 0 with JSON, or no output at all.
"""

from __future__ import annotations

from typing import Any

from antiloop.hooks.events import HookEvent
from antiloop.hooks.handler import Outcome

__all__ = ["render"]

_CAP = 9_000  # Claude Code caps hook strings at 10,000 characters


def _cap(text: str) -> str:
    return text if len(text) <= _CAP else text[: _CAP - 1] + "…"


def render(event: HookEvent, outcome: Outcome) -> dict[str, Any] | None:
    """The JSON object to print for ``outcome``, or None to print nothing."""
    action = outcome.action
    if action == "pass":
        return None
    out: dict[str, Any] = {}
    if outcome.notice:
        out["systemMessage"] = _cap(outcome.notice)
    if action == "warn":
        return out or None
    dialect = event.dialect
    reason = _cap(outcome.reason)
    if action in ("deny", "ask"):
        if event.kind != "pre":
            action = "block"  # only a call not yet run can be denied
        elif dialect == "gemini":
            if action == "ask":
                return out or None  # Gemini confirms shell and writes itself
            out.update(decision="deny", reason=reason)
            return out
        elif dialect == "codex" and action == "ask":
            return out or None  # Codex honours only deny
        elif dialect == "codex":
            out["hookSpecificOutput"] = {
                "hookEventName": event.name,
                "permissionDecision": action,
                # Codex appends ". Command: <command>" to the reason
                "permissionDecisionReason": reason.rstrip(". "),
            }
            return out
        else:
            out["hookSpecificOutput"] = {
                "hookEventName": event.name,
                "permissionDecision": action,
                "permissionDecisionReason": reason,
            }
            return out
    if action == "halt":
        out["continue"] = False
        out["stopReason"] = _cap(outcome.notice or outcome.reason)
        if event.kind == "post" and dialect != "gemini":
            out.update(decision="block", reason=reason)
        return out
    if action == "block" and dialect == "codex" and event.kind == "post" and not outcome.repeat:
        # Codex's block replaces the output: a failure streak keeps the error it reports
        out["hookSpecificOutput"] = {"hookEventName": event.name, "additionalContext": reason}
        return out
    if action == "block" and dialect != "gemini" and event.kind == "post":
        out.update(decision="block", reason=reason)
        return out
    if action == "block" and dialect == "gemini" and event.kind == "post" and outcome.repeat:
        # The output repeats one the model already read. Gemini escapes < and > in
        # additionalContext, so the reason replaces the output instead, as written.
        out.update(decision="deny", reason=reason)
        return out
    if event.kind == "post" or (action == "context" and event.kind == "pre"):
        out["hookSpecificOutput"] = {"hookEventName": event.name, "additionalContext": reason}
        return out
    out.setdefault("systemMessage", reason)
    return out
