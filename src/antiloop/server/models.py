"""The request and response bodies of the HTTP API, as pydantic models: the schema's source.

FastAPI generates ``/openapi.json`` from these types. Responses are built as plain dicts by the
routes (the wire format of ``docs/protocol.md``) and sent as they are; the models describe them.
Step bodies are documented by ``Step`` but not validated by it: a step that is no step gets an
``invalid`` verdict in its batch, not a 400 for the whole request (``SkipValidation``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, StringConstraints

Action = Literal["continue", "ask", "stop", "invalid"]
Status = Literal["pending", "approved", "denied", "edited", "expired"]


class _Open(BaseModel):
    """A body that may carry more fields than it names (they are ignored or kept as sent)."""

    model_config = ConfigDict(extra="allow")


class _Strict(BaseModel):
    """A request body checked field by field: no coercion ("5" is no number, 5 no string)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class Error(BaseModel):
    """Every error answer: one line saying what is wrong."""

    error: str = Field(description="one line saying what is wrong")


class Step(_Open):
    """A step event (docs/protocol.md section 2)."""

    session: str = "default"
    agent: str = "agent"
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    paths: list[str] = Field(default_factory=list)
    output: str | None = None
    error: str | None = None
    exit_code: int | None = None
    file_states: dict[str, Any] = Field(default_factory=dict)
    message: str | None = None
    goal: str | None = None
    cwd: str | None = None
    id: str | int | None = Field(
        default=None,
        description=(
            "The step's id (the host's tool-call id where there is one). A step sent again with "
            "an id its session has seen (a retried request) gets the first verdict again and is "
            "not counted twice; the last 32 ids of a session are remembered."
        ),
    )
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None


class StepBatch(BaseModel):
    """Several steps, judged in order."""

    steps: list[Step] = Field(max_length=1000)


StepsBody = Annotated[Step | list[Step] | StepBatch, SkipValidation]
"""``POST /v1/steps``: one step, a list of steps, or ``{"steps": [...]}`` (at most 1,000)."""


class Judged(BaseModel):
    """A verdict (docs/protocol.md section 7) plus the hint for the model."""

    index: int
    action: Action
    detector: str | None
    outcome: str | None
    fingerprint: str | None
    reason: str
    hint: str = Field(description="pass this to the model")


class Verdict(Judged):
    """A step's verdict, with its session and whom to escalate to."""

    session: str
    escalate_to: str | None


class Verdicts(BaseModel):
    """The verdicts of a batch, one per step, in order."""

    verdicts: list[Verdict]


class CheckRequest(_Strict):
    """A call about to be made."""

    tool: str
    args: dict[str, Any] | None = None
    session: str | None = None
    agent: str | None = None
    paths: list[str] | None = None
    cwd: str | None = None


class ApprovalRequest(BaseModel):
    """A risky call, or a loop stop, waiting for a person's answer."""

    id: str
    session: str
    agent: str
    tool: str
    args: dict[str, Any]
    risk: str
    reason: str
    created_at: float
    expires_at: float | None
    status: Status
    decided_by: str | None
    decided_at: float | None
    comment: str | None
    edited_args: dict[str, Any] | None
    fingerprint: str | None
    extra: dict[str, Any]


class Voted(ApprovalRequest):
    """A request with the identities that voted on it (k-of-n)."""

    votes: list[str]


class CheckAnswer(Judged):
    """The verdict before a call, the call to run, and the approval request it opened."""

    args: dict[str, Any] = Field(description="the call to run (the person's edit, if any)")
    approval: ApprovalRequest | None


class SessionRow(BaseModel):
    """One session of a page."""

    session: str
    steps: int
    ended: dict[str, Any] | None
    stop_requested: str | None
    last: dict[str, Any] | None


class SessionPage(BaseModel):
    """A page of sessions."""

    sessions: list[SessionRow]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null on the last page"
    )


class SessionDetail(BaseModel):
    """One session: its state, recent verdicts, audit records and approvals."""

    session: str
    steps: int
    ended: dict[str, Any] | None
    stop_requested: str | None
    recent: list[dict[str, Any]]
    audit: list[dict[str, Any]] | None
    approvals: list[ApprovalRequest]


class StopRequest(_Strict):
    """Who asks the session to stop, and why (kept in the audit log)."""

    by: str | None = Field(
        default=None, description="honoured for the service token only: a named token is its holder"
    )
    reason: str | None = Field(default=None, max_length=2000, description="why, for the record")


class Stopped(BaseModel):
    """The stop request as stored."""

    session: str
    stop_requested: str | None


class Feedback(_Strict):
    """Text for the agent's next step."""

    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Queued(BaseModel):
    """Feedback queued for the session's next step."""

    session: str
    queued: bool


class Approvals(BaseModel):
    """Approval requests, each with its votes."""

    approvals: list[Voted]


class ApprovalDetail(ApprovalRequest):
    """One request and the verdict its answer gives the call."""

    verdict: Judged


class Decision(_Strict):
    """A person's answer to an approval request."""

    decision: Literal["approve", "deny", "edit"]
    comment: str | None = None
    by: str | None = Field(default=None, description="ignored: the voter is the token's holder")
    args: dict[str, Any] | None = Field(default=None, description="the edited arguments, for edit")


class SignedDecision(Decision):
    """A webhook relay's answer: the request's id, and ``by``, the user the relay signed for."""

    id: str
    by: str | None = Field(default=None, description="the user the relay authenticated")


class Health(BaseModel):
    """The service is up."""

    ok: bool


KillScope = Literal["all", "agent", "fingerprint", "session"]


class KillTarget(_Strict):
    """What a kill names: exactly one of ``all``, ``agent``, ``fingerprint``, ``session``."""

    all: bool = False
    agent: str | None = None
    fingerprint: str | None = None
    session: str | None = None


class KillRequest(KillTarget):
    """A kill: its target, why, and who sets it."""

    reason: str | None = None
    by: str | None = Field(default=None, description="who sets it (default: the token's holder)")


class Kill(BaseModel):
    """An active kill: every step it names gets ``stop`` (detector ``kill``) on every replica."""

    scope: KillScope
    target: str = Field(description="the agent, fingerprint or session; empty for all")
    by: str
    at: float
    reason: str
    key: str


class Kills(BaseModel):
    """The active kills."""

    kills: list[Kill]


class Lifted(BaseModel):
    """The kill lifted, or null when there was none."""

    key: str
    lifted: Kill | None


class FleetFingerprint(BaseModel):
    """What one fingerprint cost the fleet."""

    fingerprint: str
    sessions: int = Field(description="sessions it stopped")
    steps_wasted: int
    tokens_wasted: int
    last_stop: float
    known: bool = Field(description="it stopped known_after sessions or more")


class FleetStatus(BaseModel):
    """The fleet view, across replicas where the store is shared."""

    store: str
    shared: bool = Field(description="shared by every replica (Redis), or this process only")
    live_sessions: int
    live_window: float = Field(description="seconds since its last step a session is live")
    stops_last_hour: int
    stops_per_hour: list[int] = Field(description="the last 24 hours, the last one first")
    known_after: int
    fingerprints: list[FleetFingerprint] = Field(description="the costliest first")
    kills: list[Kill]
