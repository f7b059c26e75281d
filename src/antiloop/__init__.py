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
    from antiloop.core.detectors import (
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
    from antiloop.core.errors import (
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
    from antiloop.core.extra.detectors import CosmeticRerun, HiddenRepeat
    from antiloop.core.history import History
    from antiloop.core.step import FileState, Step, parse_line, step_from_dict
    from antiloop.core.verdict import Action, Verdict
    from antiloop.guard import Guard, default_detector
    from antiloop.listener import Listener

_WHERE = {
    "Action": "antiloop.core.verdict",
    "AllOf": "antiloop.core.detectors",
    "AntiloopError": "antiloop.core.errors",
    "AnyOf": "antiloop.core.detectors",
    "ApprovalDenied": "antiloop.core.errors",
    "AsyncGuard": "antiloop.async_guard",
    "BadStep": "antiloop.core.errors",
    "BudgetExceeded": "antiloop.core.errors",
    "ChannelError": "antiloop.core.errors",
    "ConfigError": "antiloop.core.errors",
    "CosmeticRerun": "antiloop.core.extra.detectors",
    "Cycle": "antiloop.core.detectors",
    "Detector": "antiloop.core.detectors",
    "FailStreak": "antiloop.core.detectors",
    "FileState": "antiloop.core.step",
    "Goal": "antiloop.core.detectors",
    "GoalReached": "antiloop.core.errors",
    "Guard": "antiloop.guard",
    "GuardConfig": "antiloop.config",
    "Halt": "antiloop.core.errors",
    "HiddenRepeat": "antiloop.core.extra.detectors",
    "History": "antiloop.core.history",
    "Listener": "antiloop.listener",
    "LoopDetected": "antiloop.core.errors",
    "MaxSteps": "antiloop.core.detectors",
    "MissingExtra": "antiloop.core.errors",
    "Repeat": "antiloop.core.detectors",
    "Stagnation": "antiloop.core.detectors",
    "Step": "antiloop.core.step",
    "StoreError": "antiloop.core.errors",
    "Verdict": "antiloop.core.verdict",
    "WithAction": "antiloop.core.detectors",
    "default_detector": "antiloop.guard",
    "load_config": "antiloop.config",
    "parse_line": "antiloop.core.step",
    "step_from_dict": "antiloop.core.step",
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
