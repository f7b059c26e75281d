"""The exception tree of antiloop.

::

    AntiloopError
    ├── ConfigError (ValueError)        bad config, unknown detector/store/embedder
    │   └── MissingExtra (ImportError)  "... [redis] extra ..."
    ├── BadStep (ValueError)            an event that is no step (docs/protocol.md section 2)
    ├── StoreError                      a backend failed; the driver's exception as __cause__
    ├── ChannelError                    an approval channel could not deliver or collect
    └── Halt                            control flow, raised only by enforce()/wrap()/session()
        ├── LoopDetected                repeat, cycle, stagnation, failure streak
        ├── BudgetExceeded              max steps
        ├── GoalReached                 not a failure
        └── ApprovalDenied              a human said no, or the request expired

The core never raises for a loop: it returns a ``Verdict``. ``Halt`` and its subclasses are
raised only by the conveniences that ask for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from antiloop.core.verdict import Verdict


class AntiloopError(Exception):
    """Base of every exception antiloop raises."""


class ConfigError(AntiloopError, ValueError):
    """A configuration key, value or name is wrong; the message names it."""


class MissingExtra(ConfigError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, extra: str, package: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the {package!r} package: install antiloop with its [{extra}] "
            f"extra (pip install -e '.[{extra}]' in a checkout)"
        )
        self.extra = extra
        self.package = package


class BadStep(AntiloopError, ValueError):
    """An event is not a step (docs/protocol.md section 2); the message says why."""


class StoreError(AntiloopError):
    """A store backend failed; the driver's exception is the ``__cause__``."""


class ChannelError(AntiloopError):
    """An approval channel could not deliver a request or collect an answer."""


class Halt(AntiloopError):
    """Control flow: the guard says this run, or this call, must not go on."""

    def __init__(self, verdict: Verdict, session: str = "default") -> None:
        super().__init__(verdict.reason)
        self.verdict = verdict
        self.session = session

    @property
    def fingerprint(self) -> str | None:
        """The loop's fingerprint, when the verdict has one."""
        return self.verdict.fingerprint

    @property
    def evidence(self) -> tuple[int, ...]:
        """Indices of the steps that make the evidence."""
        return self.verdict.evidence


class LoopDetected(Halt):
    """A repeat, cycle, stagnation or failure streak."""


class BudgetExceeded(Halt):
    """The session reached its step budget."""


class GoalReached(Halt):
    """The agent reached its goal: not a failure."""


class ApprovalDenied(Halt):
    """A person said no to a risky call, or the request expired."""
