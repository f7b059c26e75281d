"""antiloop: keeps AI agents from looping and keeps people in control of them.

Example:
    >>> from antiloop import Guard, Step
    >>> guard = Guard()
    >>> guard.record(Step(tool="grep", args={"pattern": "x"}, output="a.py:1:x")).action.wire
    'continue'
"""

from antiloop.config import GuardConfig, load_config
from antiloop.detectors import (
    AllOf,
    AnyOf,
    Cycle,
    Detector,
    FailStreak,
    Goal,
    MaxSteps,
    Repeat,
    Stagnation,
    WithAction,
)
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
from antiloop.events import FileState, Step, parse_line, step_from_dict
from antiloop.guard import Guard, Listener, default_detector
from antiloop.history import History
from antiloop.verdict import Action, Verdict

__version__ = "0.1.0"

__all__ = [
    "Action",
    "AllOf",
    "AntiloopError",
    "AnyOf",
    "ApprovalDenied",
    "BadStep",
    "BudgetExceeded",
    "ChannelError",
    "ConfigError",
    "Cycle",
    "Detector",
    "FailStreak",
    "FileState",
    "Goal",
    "GoalReached",
    "Guard",
    "GuardConfig",
    "Halt",
    "History",
    "Listener",
    "LoopDetected",
    "MaxSteps",
    "MissingExtra",
    "Repeat",
    "Stagnation",
    "Step",
    "StoreError",
    "Verdict",
    "WithAction",
    "__version__",
    "default_detector",
    "load_config",
    "parse_line",
    "step_from_dict",
]
