"""Claude Code transcripts of one session, found by its id and turned into steps.

Claude Code keeps ``<config>/projects/<project>/<session>.jsonl`` and, for the session's
subagents, ``<project>/<session>/subagents/agent-<id>.jsonl`` (``<config>`` is
``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; ``<project>`` is the absolute working directory with
every character other than a letter or digit replaced by ``-``; reference integrations.md 1.6).
Each file is read by ``antiloop.traces.claude_code`` (the line format is described there); the
main conversation is agent ``main`` and each subagent ``<agentType>-<agentId>``, the names the
hooks use, so a recorded session can be checked again the way the hooks judged it live::

    steps = read_session("3f2a...", cwd="/home/dev/game")
    for step, verdict in check_steps(steps):
        ...

A project name longer than 200 characters is cut and given a hash suffix by Claude Code; such
a directory is found by its first 200 characters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from antiloop.core.step import Step
    from antiloop.core.verdict import Verdict
    from antiloop.hooks.config import HookConfig

__all__ = [
    "check_steps",
    "config_dir",
    "project_key",
    "read_session",
    "read_transcript",
    "session_files",
]

_KEY_LIMIT = 200
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    env = os.environ if env is None else env
    named = env.get("CLAUDE_CONFIG_DIR")
    return Path(named).expanduser() if named else Path.home() / ".claude"


def project_key(cwd: str | os.PathLike[str]) -> str:
    """The directory name Claude Code gives a project: non-alphanumerics become ``-``.

    Example:
        >>> project_key("/home/dev/my_game")
        '-home-dev-my-game'
    """
    return _NOT_ALNUM.sub("-", os.fspath(cwd))


def _project_dirs(root: Path, cwd: str | os.PathLike[str] | None) -> list[Path]:
    if not root.is_dir():
        return []
    if cwd is None:
        return sorted(p for p in root.iterdir() if p.is_dir())
    key = project_key(cwd)
    exact = root / key
    if exact.is_dir():
        return [exact]
    if len(key) > _KEY_LIMIT:
        prefix = key[:_KEY_LIMIT]
        return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(prefix))
    return []


def _with_subagents(main: Path) -> list[Path]:
    folder = main.with_suffix("") / "subagents"
    subs = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    return [main, *subs]


def session_files(
    session_id: str,
    *,
    cwd: str | os.PathLike[str] | None = None,
    transcript_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Path]:
    """The session's transcript and its subagents' transcripts; empty when none is found.

    Args:
        session_id: the session id (the hooks' ``session_id``).
        cwd: the project's directory; without it every project is searched.
        transcript_path: the hooks' ``transcript_path``, when known (it wins).
        env: for ``CLAUDE_CONFIG_DIR``.
    """
    if transcript_path is not None:
        main = Path(transcript_path).expanduser()
        return _with_subagents(main) if main.is_file() else []
    root = config_dir(env) / "projects"
    for project in _project_dirs(root, cwd):
        main = project / f"{session_id}.jsonl"
        if main.is_file():
            return _with_subagents(main)
    return []


def read_transcript(path: str | os.PathLike[str]) -> list[Step]:
    """The steps of one transcript file (a session's or a subagent's).

    Raises:
        antiloop.traces.UnknownFormat: the file is not a Claude Code transcript.
    """
    from antiloop.traces._base import Source
    from antiloop.traces.claude_code import read_claude_code

    steps: list[Step] = []
    for run in read_claude_code(Source.read(Path(path))):
        steps.extend(run.steps)
    return steps


def read_session(
    session_id: str,
    *,
    cwd: str | os.PathLike[str] | None = None,
    transcript_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Step]:
    """Every step of a session: the main conversation's, then each subagent's, in file order.

    Raises:
        FileNotFoundError: no transcript of that session was found.
    """
    files = session_files(session_id, cwd=cwd, transcript_path=transcript_path, env=env)
    if not files:
        where = config_dir(env) / "projects"
        raise FileNotFoundError(f"no transcript of session {session_id!r} under {where}")
    steps: list[Step] = []
    for path in files:
        steps.extend(read_transcript(path))
    return steps


def check_steps(
    steps: Iterable[Step], config: HookConfig | None = None
) -> list[tuple[Step, Verdict]]:
    """Judge recorded steps as the hooks would have (hook defaults, an in-memory store).

    A step the guard would have refused before it ran (a repeat of a stopped procedure) gets
    the refusal's verdict; it is still recorded, as it did run.
    """
    from antiloop.core.verdict import Action
    from antiloop.hooks.config import HookConfig
    from antiloop.hooks.handler import HookHandler
    from antiloop.stores.memory import MemoryStore

    handler = HookHandler(config or HookConfig(), MemoryStore())
    guard = handler.guard
    out: list[tuple[Step, Verdict]] = []
    for step in steps:
        refused = guard.check(
            step.tool, step.args, session=step.session, agent=step.agent, cwd=step.cwd
        )
        verdict = guard.record(step)
        out.append((step, refused if refused.action >= Action.BLOCK else verdict))
    return out
