"""antiloop: keeps AI agents from looping and keeps people in control of them.

Example:
    >>> from antiloop import Guard, Step
    >>> guard = Guard()
    >>> guard.record(Step(tool="grep", args={"pattern": "x"}, output="a.py:1:x")).action.wire
    'continue'
"""

from antiloop._exports import lazy_exports as _lazy_exports
from antiloop._version import __version__

TYPE_CHECKING = False  # not typing's: importing typing costs every hook process ~10 ms
if TYPE_CHECKING:
    from antiloop.async_guard import AsyncGuard
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
    from antiloop.detectors_extra import CosmeticRerun, HiddenRepeat
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
    from antiloop.guard import Guard, default_detector
    from antiloop.history import History
    from antiloop.listener import Listener
    from antiloop.verdict import Action, Verdict

_WHERE = {
    "Action": "antiloop.verdict",
    "AllOf": "antiloop.detectors",
    "AntiloopError": "antiloop.errors",
    "AnyOf": "antiloop.detectors",
    "ApprovalDenied": "antiloop.errors",
    "AsyncGuard": "antiloop.async_guard",
    "BadStep": "antiloop.errors",
    "BudgetExceeded": "antiloop.errors",
    "ChannelError": "antiloop.errors",
    "ConfigError": "antiloop.errors",
    "CosmeticRerun": "antiloop.detectors_extra",
    "Cycle": "antiloop.detectors",
    "Detector": "antiloop.detectors",
    "FailStreak": "antiloop.detectors",
    "FileState": "antiloop.events",
    "Goal": "antiloop.detectors",
    "GoalReached": "antiloop.errors",
    "Guard": "antiloop.guard",
    "GuardConfig": "antiloop.config",
    "Halt": "antiloop.errors",
    "HiddenRepeat": "antiloop.detectors_extra",
    "History": "antiloop.history",
    "Listener": "antiloop.listener",
    "LoopDetected": "antiloop.errors",
    "MaxSteps": "antiloop.detectors",
    "MissingExtra": "antiloop.errors",
    "Repeat": "antiloop.detectors",
    "Stagnation": "antiloop.detectors",
    "Step": "antiloop.events",
    "StoreError": "antiloop.errors",
    "Verdict": "antiloop.verdict",
    "WithAction": "antiloop.detectors",
    "default_detector": "antiloop.guard",
    "load_config": "antiloop.config",
    "parse_line": "antiloop.events",
    "step_from_dict": "antiloop.events",
}
del TYPE_CHECKING  # not a name of the package
__getattr__, __dir__ = _lazy_exports(__name__, globals(), _WHERE)

__all__ = [
    "Action",
    "AllOf",
    "AntiloopError",
    "AnyOf",
    "ApprovalDenied",
    "AsyncGuard",
    "BadStep",
    "BudgetExceeded",
    "ChannelError",
    "ConfigError",
    "CosmeticRerun",
    "Cycle",
    "Detector",
    "FailStreak",
    "FileState",
    "Goal",
    "GoalReached",
    "Guard",
    "GuardConfig",
    "Halt",
    "HiddenRepeat",
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
