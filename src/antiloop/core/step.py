r"""Steps: one tool call together with its result (docs/protocol.md section 2).

A ``Step`` is built once per event. Parsing follows the bad-input rules: a line that is not a
JSON object, whose ``tool`` is missing or not a non-empty string, whose ``args`` is not an
object, or whose ``session``/``agent`` is not a string raises ``BadStep`` naming the problem.

Text that is not valid Unicode is made valid here, where steps enter, and nowhere else
(docs/protocol.md section 2): each lone UTF-16 surrogate (``"\udc80"`` is valid JSON) becomes
U+FFFD, and so does each byte sequence that is not UTF-8 in a line given as bytes
(``valid_unicode``, ``decode_text``). Every sink after this point may encode text as UTF-8.
A session, agent or tool name that holds a secret is replaced here too
(``antiloop.core.redact.redact_name``: the same name always gives the same replacement).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from antiloop.core.errors import BadStep
from antiloop.core.redact import redact_name

KNOWN_FIELDS = frozenset(
    {
        "session",
        "agent",
        "tool",
        "args",
        "paths",
        "output",
        "error",
        "exit_code",
        "file_states",
        "message",
        "goal",
        "cwd",
        "id",
        "tokens_in",
        "tokens_out",
        "cost_usd",
    }
)

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class FileState:
    """A touched file after the step: its content hash and modification time, where known."""

    sha256: str | None = None
    mtime: float | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One thing an agent did: a tool call and its result.

    Example:
        >>> Step(tool="Grep", args={"pattern": "doubleJump"}, output="src/a.ts:3").tool
        'Grep'
    """

    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    session: str = "default"
    agent: str = "agent"
    paths: tuple[str, ...] = ()
    output: str | None = None
    error: str | None = None
    exit_code: int | None = None
    file_states: Mapping[str, FileState] = field(default_factory=dict)
    message: str | None = None
    goal: str | None = None
    cwd: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None

    @property
    def failed(self) -> bool:
        """A step fails when it has an error or a non-zero exit code."""
        return bool(self.error) or (self.exit_code is not None and self.exit_code != 0)

    @property
    def stream(self) -> tuple[str, str]:
        """The (session, agent) pair whose steps the loop rules compare; agent lower-cased."""
        return (self.session, self.agent.lower())

    def to_dict(self) -> dict[str, Any]:
        """The step as a section 2 event (unknown fields included)."""
        out: dict[str, Any] = dict(self.extra)
        out.update(session=self.session, agent=self.agent, tool=self.tool, args=dict(self.args))
        if self.paths:
            out["paths"] = list(self.paths)
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.file_states:
            out["file_states"] = {
                p: {k: v for k, v in (("sha256", s.sha256), ("mtime", s.mtime)) if v is not None}
                for p, s in self.file_states.items()
            }
        return out


_OPTIONAL = (
    "output",
    "error",
    "exit_code",
    "message",
    "goal",
    "cwd",
    "id",
    "tokens_in",
    "tokens_out",
    "cost_usd",
)


def step_id(value: object) -> str | None:
    """A step id as text: a string as it is, an integer in decimal; anything else is none."""
    if isinstance(value, str):
        return value if value else None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _count(value: object) -> int | None:
    """A token count: a non-negative integer, else none (usage is reported, never judged)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _cost(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        cost = float(value)
        return cost if cost != float("inf") else None
    return None


def _text(value: object) -> str | None:
    """Coerce an output-like field to text: None stays None, other JSON values are dumped."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _exit_code(value: object) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _file_states(value: object) -> Mapping[str, FileState]:
    if not isinstance(value, dict):
        return _EMPTY
    states: dict[str, FileState] = {}
    for path, state in value.items():
        if not isinstance(state, dict):
            continue
        sha = state.get("sha256")
        mtime = state.get("mtime")
        states[str(path)] = FileState(
            sha256=sha if isinstance(sha, str) and sha else None,
            mtime=float(mtime)
            if isinstance(mtime, int | float) and not isinstance(mtime, bool)
            else None,
        )
    return states


_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
"""What a lone surrogate, or a byte sequence that is not UTF-8, becomes."""


def decode_text(data: bytes) -> str:
    """Bytes as UTF-8 text, each sequence that is not UTF-8 replaced by U+FFFD."""
    return data.decode("utf-8", "replace")


def _valid_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_valid(value: object) -> bool:
    """True when no string in ``value`` (keys included, at any depth) holds a lone surrogate.

    A string costs one ``isascii`` (a C loop) in the common case; one loop over a stack, no
    call per value, as this runs once a step.
    """
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if not (item.isascii() or _valid_text(item)):
                return False
        elif kind is dict:
            for key, child in item.items():
                if type(key) is not str or not (key.isascii() or _valid_text(key)):
                    stack.append(key)
                of = type(child)
                if of is str:
                    if not (child.isascii() or _valid_text(child)):
                        return False
                elif not (child is None or of is int or of is float or of is bool):
                    stack.append(child)
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif not (item is None or kind is int or kind is float or kind is bool) and isinstance(
            item, str | Mapping | list | tuple
        ):  # subclasses: the slow way
            stack.append(_plain(item))
    return True


def _plain(value: object) -> object:
    if isinstance(value, str):
        return str(value)
    if isinstance(value, Mapping):
        return dict(value)
    return list(value) if isinstance(value, list) else tuple(value)  # type: ignore[arg-type]


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return value if _valid_text(value) else _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, Mapping):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_replaced(v) for v in value)
    return value


def valid_unicode(value: Any) -> Any:
    r"""``value`` with each lone surrogate in its strings (keys too) replaced by U+FFFD.

    The value itself when it holds none (the common case costs one ``isascii`` a string);
    otherwise a copy (mappings become dicts). Steps get this rule where they enter.

    Example:
        >>> valid_unicode({"command": "ls \udc80"}) == {"command": "ls \ufffd"}
        True
    """
    return value if _is_valid(value) else _replaced(value)


def valid_step(step: Step) -> Step:
    """The step, or a copy whose texts hold no lone surrogate and whose names no secret."""
    fields_ = (
        step.tool,
        step.args,
        step.session,
        step.agent,
        step.paths,
        step.output,
        step.error,
        step.message,
        step.goal,
        step.cwd,
        step.extra,
        step.id,
        tuple(step.file_states),
        tuple(s.sha256 for s in step.file_states.values()),
    )
    if (
        _is_valid(fields_)
        # equal, not the same object: a remembered name is the first copy of it seen
        and redact_name(step.tool) == step.tool
        and redact_name(step.session) == step.session
        and redact_name(step.agent) == step.agent
    ):
        return step
    return step_from_dict(step.to_dict())


_NEW = object.__new__
# The slots of a Step in field order: ``step_from_dict`` fills them directly, without the
# frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field); the values are the
# ones ``Step(...)`` would be given.
_SLOTS = tuple(getattr(Step, f.name).__set__ for f in fields(Step))


def step_from_dict(event: object) -> Step:
    """Build a Step from a decoded section 2 event, or raise BadStep saying what is wrong.

    Its texts get the Unicode rule first (``valid_unicode``).
    """
    if not isinstance(event, dict):
        raise BadStep(f"not a JSON object but {type(event).__name__}")
    return _step(event if _is_valid(event) else _replaced(event))


def _step(event: dict[str, Any]) -> Step:
    """A Step from an event whose texts are valid Unicode."""
    get = event.get
    tool = get("tool")
    if tool is None:
        raise BadStep("'tool' is missing" if "tool" not in event else "'tool' is null")
    if not isinstance(tool, str):
        raise BadStep(f"'tool' must be a string, not {type(tool).__name__}")
    tool = tool.strip()
    if not tool:
        raise BadStep("'tool' is empty")
    tool = redact_name(tool)
    args = get("args", _EMPTY)
    if not isinstance(args, dict):
        raise BadStep(f"'args' must be an object, not {type(args).__name__}")
    session = get("session", "default")
    agent = get("agent", "agent")
    if type(session) is not str or type(agent) is not str:
        for name in ("session", "agent"):
            if name in event and not isinstance(event[name], str):
                raise BadStep(f"{name!r} must be a string, not {type(event[name]).__name__}")
    session, agent = redact_name(session), redact_name(agent)
    raw_paths = get("paths")
    paths: tuple[str, ...] = ()
    if isinstance(raw_paths, list):
        paths = tuple(str(p) for p in raw_paths if isinstance(p, str))
    elif isinstance(raw_paths, str):
        paths = (raw_paths,)
    output = get("output")
    if output is not None and type(output) is not str:
        output = _text(output)
    error = get("error")
    if error is not None and type(error) is not str:
        error = _text(error)
    exit_code = get("exit_code")
    if type(exit_code) is not int and exit_code is not None:
        exit_code = _exit_code(exit_code)
    states = get("file_states")
    message = get("message")
    if message is not None and type(message) is not str:
        message = _text(message)
    goal = get("goal")
    cwd = get("cwd")
    values = (
        tool,
        args,
        session,
        agent,
        paths,
        output,
        error,
        exit_code,
        _EMPTY if states is None else _file_states(states),
        message,
        goal if isinstance(goal, str) else None,
        cwd if isinstance(cwd, str) and cwd else None,
        {}
        if event.keys() <= KNOWN_FIELDS
        else {k: v for k, v in event.items() if k not in KNOWN_FIELDS},
        None if (sid := get("id")) is None else step_id(sid),
        None if (n := get("tokens_in")) is None else _count(n),
        None if (n := get("tokens_out")) is None else _count(n),
        None if (cost := get("cost_usd")) is None else _cost(cost),
    )
    step = _NEW(Step)
    for put, value in zip(_SLOTS, values, strict=True):
        put(step, value)
    return step


MAX_DEPTH = 200
"""Deepest nesting of arrays and objects a line may have (docs/protocol.md section 7)."""


def parse_line(line: str | bytes) -> Step:
    """Parse one JSON line into a Step, or raise BadStep saying what is wrong.

    A line nested deeper than ``MAX_DEPTH`` is bad input, like one that is not JSON.
    """
    try:
        event, opens, checked = _loads(line)
    except RecursionError:
        raise BadStep(f"nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise BadStep(f"not valid JSON ({exc})") from None
    if opens > MAX_DEPTH and nesting_depth(event) > MAX_DEPTH:
        raise BadStep(f"nested too deeply (more than {MAX_DEPTH} levels)")
    if checked and isinstance(event, dict):
        return _step(event)  # orjson refuses lone surrogates: nothing to replace
    return step_from_dict(event)


# Digits to 0 (a long number shows as a run of zeros), "{" to "[" (one count of the openings):
# the line is scanned once for both checks, not three times (3-5 us a 2 KB line).
_SCAN = bytes.maketrans(b"123456789{", b"000000000[")
_LONG_NUMBER = b"0" * 19  # 19 digits in a row: maybe an int past 64 bits, read as a float


def _loads(line: str | bytes) -> tuple[Any, int, bool]:
    """``json.loads``, through orjson (faster) where it reads the line the same.

    Also how many arrays and objects the line opens (an upper bound on its nesting depth), and
    whether orjson read it (then no string in it holds a lone surrogate). Bytes that are not
    UTF-8 are read with each bad sequence replaced by U+FFFD.
    orjson refuses what the stdlib reads (NaN, lone surrogates, UTF-16, 1e400) and reads a
    long integer as a float: those lines, and a line it refuses, go to the stdlib, whose
    errors are the ones reported. orjson (the ``fast`` extra) is imported on the first line:
    it imports datetime and uuid, which the hook path need not pay for.
    """
    fast = _fast_json()
    if fast is None:
        if isinstance(line, bytes):
            return read_json(line), line.count(b"[") + line.count(b"{"), False
        return json.loads(line), line.count("[") + line.count("{"), False
    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    scan = raw.translate(_SCAN)  # two C loops, far cheaper than a regex
    opens = scan.count(b"[")
    if _LONG_NUMBER not in scan:
        try:
            return fast.loads(raw), opens, True
        except fast.JSONDecodeError:
            pass
    return read_json(line), opens, False


def read_json(line: str | bytes) -> Any:
    r"""``json.loads``; bytes that are not UTF-8 (nor UTF-16/32) are read with U+FFFD.

    Strings may still hold lone surrogates (``"\udc80"``): ``valid_unicode`` replaces them.
    """
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        if isinstance(line, str):
            raise
        return json.loads(decode_text(line))


@functools.cache
def _fast_json() -> Any:
    try:
        import orjson
    except ImportError:  # pragma: no cover - the stdlib reads the same
        return None
    return orjson


def nesting_depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (no recursion: any depth is measured)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest
