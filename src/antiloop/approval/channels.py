"""Channels deliver a request to people and collect an answer; the stored record is the truth.

A channel is any object with ``name`` and ``deliver(request, answer)``. ``deliver`` tells a
person; when the person answers, the channel calls ``answer(Answer(...))``, which decides the
record in the store (the first answer across channels wins; later ones change nothing). A channel
that only delivers (a webhook, the web page) returns at once: the answer reaches the store
another way (the service). ``cancel(request)``, when a channel has it, is called once the
request is decided, so a prompt can go away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from antiloop.approval.request import ApprovalRequest, ApprovalStatus


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's answer to one request.

    Attributes:
        status: ``approved``, ``denied`` or ``edited``.
        by: who answered (a user, or a channel name).
        comment: words for the agent (the reason for a deny, or feedback).
        edited_args: the changed arguments when ``status`` is ``edited``.
        approve_next: approve this many further asks of the session without asking (``y -N``).
        stop: stop the run too (``q``).
        channel: where it came from (``terminal``, ``web``...); set by whoever delivered it
            when the answer does not say.
    """

    status: ApprovalStatus
    by: str
    comment: str | None = None
    edited_args: Mapping[str, Any] | None = None
    approve_next: int = 0
    stop: bool = False
    channel: str | None = None

    @classmethod
    def approve(cls, by: str, comment: str | None = None, approve_next: int = 0) -> Answer:
        """A yes."""
        return cls(ApprovalStatus.APPROVED, by, comment, approve_next=approve_next)

    @classmethod
    def deny(
        cls, by: str, comment: str | None = None, *, stop: bool = False, channel: str | None = None
    ) -> Answer:
        """A no (with the reason as the agent's feedback)."""
        return cls(ApprovalStatus.DENIED, by, comment, stop=stop, channel=channel)

    @classmethod
    def edit(cls, by: str, args: Mapping[str, Any], comment: str | None = None) -> Answer:
        """A yes, with changed arguments."""
        return cls(ApprovalStatus.EDITED, by, comment, edited_args=dict(args))


#: What a channel calls with a person's answer; returns the request as decided in the store.
AnswerFn = Callable[[Answer], ApprovalRequest]


@runtime_checkable
class Channel(Protocol):
    """Delivers a request to people and hands their answer back."""

    name: str

    def deliver(self, request: ApprovalRequest, answer: AnswerFn) -> None:
        """Tell a person about ``request``; call ``answer`` when (if) they answer here."""
        ...


@dataclass(frozen=True, slots=True)
class CallbackChannel:
    """A function answers: for tests and for embedding antiloop in a program with its own UI.

    The function gets the request and returns an ``Answer``, True (approve), False (deny), a
    string (deny, with that text as feedback) or None (no answer here: another channel decides).

    Example:
        >>> channel = CallbackChannel(lambda request: request.tool != "Bash")
    """

    fn: Callable[[ApprovalRequest], Answer | bool | str | None]
    name: str = "callback"

    def deliver(self, request: ApprovalRequest, answer: AnswerFn) -> None:
        result = self.fn(request)
        if result is None:
            return
        if isinstance(result, Answer):
            answer(result)
        elif isinstance(result, bool):
            answer(Answer.approve(self.name) if result else Answer.deny(self.name))
        else:
            answer(Answer.deny(self.name, result))


@dataclass(frozen=True, slots=True)
class WebChannel:
    """The service's dashboard: the request is already in the store, where the page lists it.

    Args:
        url: the dashboard's address, logged so a person knows where to look.
    """

    url: str = "http://127.0.0.1:8765/"
    name: str = "web"

    def deliver(self, request: ApprovalRequest, answer: AnswerFn) -> None:
        import logging

        logging.getLogger("antiloop").warning(
            "antiloop: approval %s (%s %s) waits at %s",
            request.id,
            request.risk,
            request.tool,
            self.url,
        )
