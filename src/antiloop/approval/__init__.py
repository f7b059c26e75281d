"""People in the loop: approval requests, policy, channels, stops and feedback.

The request is a record in the store; channels (terminal, web, webhook, callback) only deliver
it and collect the answer. ``Approvals`` ties policy, channels and the store together beside
the guard: it never calls the guard, it returns a ``Ruling`` (the verdict, the arguments to run
with, and what to do to the session) that ``Guard.check`` and ``Guard.record`` apply.
"""

import typing

from antiloop._exports import lazy_exports as _lazy_exports

if typing.TYPE_CHECKING:
    from antiloop.approval.approvals import Approvals, verdict_of
    from antiloop.approval.channels import Answer, CallbackChannel, Channel, WebChannel
    from antiloop.approval.interrupt import Interruptible
    from antiloop.approval.ledger import ApprovalStore, MemoryLedger, ledger_of
    from antiloop.approval.policy import ApprovalPolicy, PolicyDecision, Rule, ToolHints, risk_of
    from antiloop.approval.request import ApprovalRequest, ApprovalStatus
    from antiloop.approval.ruling import Call, Gate, Ruling
    from antiloop.approval.terminal import TerminalChannel, parse_reply
    from antiloop.approval.webhook import Verifier, WebhookChannel, payload, sign, signed_headers

_WHERE = {
    "Answer": "antiloop.approval.channels",
    "ApprovalPolicy": "antiloop.approval.policy",
    "ApprovalRequest": "antiloop.approval.request",
    "ApprovalStatus": "antiloop.approval.request",
    "ApprovalStore": "antiloop.approval.ledger",
    "Approvals": "antiloop.approval.approvals",
    "Call": "antiloop.approval.ruling",
    "CallbackChannel": "antiloop.approval.channels",
    "Channel": "antiloop.approval.channels",
    "Gate": "antiloop.approval.ruling",
    "Interruptible": "antiloop.approval.interrupt",
    "MemoryLedger": "antiloop.approval.ledger",
    "PolicyDecision": "antiloop.approval.policy",
    "Rule": "antiloop.approval.policy",
    "Ruling": "antiloop.approval.ruling",
    "TerminalChannel": "antiloop.approval.terminal",
    "ToolHints": "antiloop.approval.policy",
    "Verifier": "antiloop.approval.webhook",
    "WebChannel": "antiloop.approval.channels",
    "WebhookChannel": "antiloop.approval.webhook",
    "ledger_of": "antiloop.approval.ledger",
    "parse_reply": "antiloop.approval.terminal",
    "payload": "antiloop.approval.webhook",
    "risk_of": "antiloop.approval.policy",
    "sign": "antiloop.approval.webhook",
    "signed_headers": "antiloop.approval.webhook",
    "verdict_of": "antiloop.approval.approvals",
}
__getattr__, __dir__ = _lazy_exports(__name__, globals(), _WHERE)

__all__ = [
    "Answer",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStatus",
    "ApprovalStore",
    "Approvals",
    "Call",
    "CallbackChannel",
    "Channel",
    "Gate",
    "Interruptible",
    "MemoryLedger",
    "PolicyDecision",
    "Rule",
    "Ruling",
    "TerminalChannel",
    "ToolHints",
    "Verifier",
    "WebChannel",
    "WebhookChannel",
    "ledger_of",
    "parse_reply",
    "payload",
    "risk_of",
    "sign",
    "signed_headers",
    "verdict_of",
]
