"""antiloop: keeps AI agents from looping and keeps people in control of them."""

from antiloop.errors import (
    AntiloopError,
    ApprovalDenied,
    BadStep,
    BudgetExceeded,
    ChannelError,
    ConfigError,
    GoalReached,
    Halt,
    LoopDetected,
    MissingExtra,
    StoreError,
)
from antiloop.events import FileState, Step

__version__ = "0.1.0"

__all__ = [
    "AntiloopError",
    "ApprovalDenied",
    "BadStep",
    "BudgetExceeded",
    "ChannelError",
    "ConfigError",
    "FileState",
    "GoalReached",
    "Halt",
    "LoopDetected",
    "MissingExtra",
    "Step",
    "StoreError",
    "__version__",
]
