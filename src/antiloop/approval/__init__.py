"""People in the loop: approval requests, policy, channels, stops and feedback.

The request is a record in the store; channels (terminal, web, webhook, callback) only deliver
it and collect the answer. ``Approvals`` ties policy, channels and the store together around
``Guard.check``.
"""

from antiloop.approval.approvals import Approvals, Gate, verdict_of
from antiloop.approval.channels import Answer, CallbackChannel, Channel, WebChannel
from antiloop.approval.interrupt import Interruptible
from antiloop.approval.ledger import ApprovalStore, MemoryLedger, ledger_of
from antiloop.approval.policy import ApprovalPolicy, PolicyDecision, Rule, risk_of
from antiloop.approval.request import ApprovalRequest, ApprovalStatus
from antiloop.approval.terminal import TerminalChannel, parse_reply
from antiloop.approval.webhook import Verifier, WebhookChannel, payload, sign, signed_headers

__all__ = [
    "Answer",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStatus",
    "ApprovalStore",
    "Approvals",
    "CallbackChannel",
    "Channel",
    "Gate",
    "Interruptible",
    "MemoryLedger",
    "PolicyDecision",
    "Rule",
    "TerminalChannel",
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
