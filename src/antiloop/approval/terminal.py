"""The terminal channel: an AutoGPT-style prompt on the controlling terminal.

    y        approve
    y -N     approve this call and the next N asks of the session
    n        deny
    q        deny and stop the run
    text     deny, with the text as feedback for the agent ("try the other config file")

It reads ``/dev/tty``, not standard input (which may be the agent's pipe), and refuses with a
``ChannelError`` when the process has no controlling terminal (a hook, a service, CI).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import select
import threading
from dataclasses import dataclass, field

from antiloop.approval.channels import Answer, AnswerFn
from antiloop.approval.request import ApprovalRequest
from antiloop.core.errors import ChannelError
from antiloop.core.redact import redact_text, redact_value
from antiloop.printable import printable

_APPROVE_N = re.compile(r"^y(?:es)?\s+-\s*(\d+)$", re.IGNORECASE)
_PROMPT = (
    "Approve? [y] yes  [y -N] yes, and the next N  [n] no  [q] stop the run"
    "  (or type feedback for the agent): "
)


def parse_reply(text: str, by: str = "terminal") -> Answer | None:
    """The answer a typed line means; None for an empty line.

    Example:
        >>> parse_reply("y -3").approve_next
        3
        >>> parse_reply("try the staging config").comment
        'try the staging config'
    """
    line = text.strip()
    if not line:
        return None
    low = line.lower()
    if low in ("y", "yes"):
        return Answer.approve(by)
    match = _APPROVE_N.match(line)
    if match:
        return Answer.approve(by, approve_next=int(match.group(1)))
    if low in ("n", "no"):
        return Answer.deny(by)
    if low in ("q", "quit", "exit"):
        return Answer.deny(by, "The person stopped the run.", stop=True)
    return Answer.deny(by, line)


def describe(request: ApprovalRequest) -> str:
    r"""The request as a few lines for people; agent-supplied text cannot rewrite them.

    Secrets are redacted, and control characters are written out (``printable``): a
    ``\r`` or an ``ESC [2K`` in the proposed call shows as such, it does not erase the line.
    """
    lines = [
        "",
        "=" * 64,
        f"antiloop: approval needed  [{_shown(request.risk)}]  session {_shown(request.session)}"
        f"  agent {_shown(request.agent)}",
        "=" * 64,
        f"tool: {_shown(request.tool)}",
    ]
    for key, value in redact_value(dict(request.args)).items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(shown) > 400:
            shown = shown[:400] + "..."
        lines.append(f"  {_shown(key)}: {printable(shown)}")
    lines.append(f"why: {_shown(request.reason)}")
    if request.fingerprint:
        lines.append(f"loop: {_shown(request.fingerprint)}")
    return "\n".join(lines) + "\n"


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no name for this uid
        return "terminal"


def _shown(text: str) -> str:
    return printable(redact_text(str(text)))


@dataclass
class TerminalChannel:
    """Asks on the controlling terminal; see the module docstring for the replies.

    Args:
        tty: the terminal device; ``/dev/tty`` is the controlling terminal.
        user: the name recorded as ``decided_by``, the voter's identity in k-of-n approvals
            (default: the login name of the user running antiloop, who sits at the terminal).
        poll: seconds between looks for an answer given elsewhere while the prompt waits.

    Example:
        >>> channel = TerminalChannel(user="alice")
    """

    tty: str = "/dev/tty"
    user: str = field(default_factory=lambda: _login())
    poll: float = 0.2
    name: str = "terminal"
    _done: dict[str, threading.Event] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def deliver(self, request: ApprovalRequest, answer: AnswerFn) -> None:
        try:
            fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY)
        except OSError as exc:
            raise ChannelError(
                f"no terminal to ask on ({self.tty}: {exc.strerror or exc}); "
                "use the web or webhook channel"
            ) from None
        done = threading.Event()
        with self._lock:
            self._done[request.id] = done
        try:
            self._ask(fd, request, answer, done)
        finally:
            with self._lock:
                self._done.pop(request.id, None)
            os.close(fd)

    def cancel(self, request: ApprovalRequest) -> None:
        """Stop prompting for a request decided elsewhere."""
        with self._lock:
            done = self._done.get(request.id)
        if done is not None:
            done.set()

    def _ask(
        self, fd: int, request: ApprovalRequest, answer: AnswerFn, done: threading.Event
    ) -> None:
        os.write(fd, (describe(request) + _PROMPT).encode())
        buffer = b""
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], self.poll)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                raise ChannelError("the terminal closed before an answer")
            buffer += chunk
            while b"\n" in buffer and not done.is_set():
                line, buffer = buffer.split(b"\n", 1)
                reply = parse_reply(line.decode("utf-8", "replace"), self.user)
                if reply is None:
                    os.write(fd, _PROMPT.encode())
                    continue
                decided = answer(reply)
                by = printable(str(decided.decided_by))
                os.write(fd, f"antiloop: {decided.status} by {by}\n".encode())
                return
        os.write(fd, b"\nantiloop: answered elsewhere\n")
