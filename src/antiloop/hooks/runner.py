"""One hook invocation, fail-safe: payload bytes in, a ``HookAnswer`` (stdout, stderr, exit) out.

The agents' own rules make a silent failure dangerous (integrations.md section 0): a hook that
times out or exits 1 lets the call through, and exit 2 blocks it. So:

* the work runs in a worker thread and the answer is given by the **deadline** (``[hooks]
  deadline``, ``ANTILOOP_HOOK_DEADLINE``; 10 s by default, 1 s for SessionEnd, whose budget is
  1.5 s), well before the agent's own timeout (the installer sets 30 s);
* an internal error (a broken store, a bad config, a bug, the deadline) never blocks silently
  and never exits 1: the answer is exit 0 with a ``systemMessage`` naming the problem, and the
  same line on stderr;
* with ``ANTILOOP_FAIL=closed`` (or ``[hooks] fail = "closed"``) an internal error **denies** a
  call about to run (PreToolUse, BeforeTool); after a call there is nothing left to deny, so the
  message is given as in open mode; input that cannot be read at all exits 2 with the reason on
  stderr (the agents' universal "block").
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from antiloop.hooks.events import (
    DIALECTS,
    BadPayload,
    HookEvent,
    attended,
    normalize,
    parse_payload,
)

if TYPE_CHECKING:
    from antiloop.hooks.config import HookConfig
    from antiloop.hooks.handler import HookHandler, Outcome
    from antiloop.stores import Store
    from antiloop.telemetry import TelemetryListener

__all__ = ["HookAnswer", "open_split", "run_hook", "store_url"]

END_DEADLINE = 1.0
EXPORT_LIMIT = 1.0  # seconds: the OpenTelemetry export of a hook's spans (antiloop.telemetry)


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What the hook process prints and returns.

    Attributes:
        stdout: the JSON answer, or empty for "no opinion".
        stderr: a line for the agent's debug log (problems only).
        code: the exit status: 0, or 2 for unreadable input under ``ANTILOOP_FAIL=closed``.
        finished: False when the deadline passed with the work still running (the process
            should then exit at once, dropping the worker).
    """

    stdout: str = ""
    stderr: str = ""
    code: int = 0
    finished: bool = True


def _dump(answer: Mapping[str, Any] | None) -> str:
    return "" if answer is None else json.dumps(answer, ensure_ascii=False) + "\n"


def run_hook(
    dialect: str,
    data: bytes | str,
    *,
    env: Mapping[str, str] | None = None,
    config_path: str | None = None,
    store: Store | str | None = None,
    deadline: float | None = None,
) -> HookAnswer:
    """Answer one hook invocation; never raises.

    Args:
        dialect: ``claude-code``, ``gemini`` or ``codex``.
        data: the hook's stdin.
        env: the environment (``ANTILOOP_STORE``, ``ANTILOOP_FAIL``, ``ANTILOOP_CONFIG``...).
        config_path: ``--config``.
        store: a Store or URL instead of ``ANTILOOP_STORE`` (tests).
        deadline: seconds instead of the configured deadline.
    """
    env = os.environ if env is None else env
    try:
        return _run(dialect, data, env, config_path, store, deadline)
    except BaseException as exc:
        return _unreadable(f"internal error: {_describe(exc)}", _env_fail(env))


def _env_fail(env: Mapping[str, str]) -> str:
    from antiloop.hooks.config import fail_mode

    return fail_mode(env)


def _run(
    dialect: str,
    data: bytes | str,
    env: Mapping[str, str],
    config_path: str | None,
    store: Store | str | None,
    deadline: float | None,
) -> HookAnswer:
    from antiloop.hooks.config import fail_mode, load_hook_config

    if dialect not in DIALECTS:
        return _unreadable(f"unknown agent {dialect!r} (use {', '.join(DIALECTS)})", fail_mode(env))
    try:
        payload = parse_payload(data)
    except BadPayload as exc:
        return _unreadable(str(exc), fail_mode(env))
    try:
        event = normalize(dialect, payload)
    except BadPayload as exc:
        return _unknown_shape(dialect, payload, exc, env, store)
    event = replace(event, attended=attended(dialect, env))
    if event.kind == "other":
        return HookAnswer()
    try:
        config = load_hook_config(config_path, env, event.cwd)
    except Exception as exc:
        return _failed(event, f"config error: {exc}", fail_mode(env))
    fail = fail_mode(env, config)
    limit = _deadline(deadline, env, config, event)
    box: dict[str, Any] = {}

    def work() -> None:
        from antiloop.hooks.handler import HookHandler

        try:  # ANTILOOP_RECORDS: a split store, opened here (a bad URL is this hook's error)
            handler = HookHandler(config, store or open_split(env) or store_url(env), timeout=limit)
        except BaseException as exc:
            box["error"] = exc
            return
        telemetry = None
        try:
            telemetry = _telemetry(handler, config, env, limit)
            from antiloop.outage import deadline

            with deadline(limit):  # store retries end in time to answer (and journal the step)
                box["outcome"] = handler.handle(event)
        except BaseException as exc:
            box["error"] = exc
        finally:
            try:
                handler.close()
                if telemetry is not None:
                    telemetry.flush(_export_limit(limit))
            except Exception as exc:
                box.setdefault("error", exc)

    worker = threading.Thread(target=work, name="antiloop-hook", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        answer = _failed(event, f"no answer within the hook's deadline of {limit:g} s", fail)
        return HookAnswer(answer.stdout, answer.stderr, answer.code, finished=False)
    if "error" in box:
        return _failed(event, _describe(box["error"]), fail)
    from antiloop.hooks.render import render

    return HookAnswer(_dump(render(event, box["outcome"])))


def _telemetry(
    handler: HookHandler, config: HookConfig, env: Mapping[str, str], limit: float
) -> TelemetryListener | None:
    """Attach the OpenTelemetry listener when ``[telemetry]`` or the OTLP environment asks."""
    if config.telemetry is None and not (
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return None  # OpenTelemetry is not imported: a hook process starts per call
    from antiloop.telemetry import listener_for

    source = config.source or "config"
    listener = listener_for(env, config.telemetry, source=source, timeout=_export_limit(limit))
    if listener is not None:
        handler.guard.listeners.append(listener)
    return listener


def _export_limit(deadline: float) -> float:
    """Seconds a span export may hold up the hook: a down collector costs at most this."""
    return min(EXPORT_LIMIT, deadline / 4)


def open_split(env: Mapping[str, str]) -> Store | None:
    """State in ``ANTILOOP_STORE``, records in ``ANTILOOP_RECORDS``, when that is set."""
    records = env.get("ANTILOOP_RECORDS")
    if not records:
        return None
    from antiloop.stores import open_store

    return open_store(store_url(env), records=records)


def store_url(env: Mapping[str, str]) -> str:
    """``ANTILOOP_STORE`` of ``env`` (``~`` expanded), else the default store."""
    from antiloop.stores import DEFAULT_STORE

    url = env.get("ANTILOOP_STORE") or DEFAULT_STORE
    for prefix in ("sqlite:///~", "sqlite://~"):
        if url.startswith(prefix):
            from pathlib import Path

            home = Path("~" + url[len(prefix) :]).expanduser()
            return "sqlite:///" + str(home).lstrip("/")
    return url


def _deadline(
    given: float | None, env: Mapping[str, str], config: HookConfig, event: HookEvent
) -> float:
    if given is not None:
        return given
    raw = env.get("ANTILOOP_HOOK_DEADLINE")
    limit = config.deadline
    if raw:
        with contextlib.suppress(ValueError):
            limit = float(raw)
    if event.kind == "end":
        limit = min(limit, END_DEADLINE)
    return max(limit, 0.01)


def _describe(exc: BaseException) -> str:
    from antiloop.core.errors import AntiloopError
    from antiloop.hooks.handler import StoreFailed

    text = str(exc).strip()
    if isinstance(exc, AntiloopError | StoreFailed) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _failed(event: HookEvent, problem: str, fail: str) -> HookAnswer:
    """The answer when the guard could not judge ``event``."""
    from antiloop.hooks.handler import Outcome
    from antiloop.hooks.render import render

    if fail == "closed" and event.kind == "pre":
        reason = f"antiloop could not check this call ({problem}); ANTILOOP_FAIL=closed refuses it."
        outcome: Outcome = Outcome("deny", reason, notice=reason)
    else:
        outcome = Outcome("warn", notice=f"antiloop: {problem}; this {event.name} was not checked.")
    line = f"antiloop hook {event.dialect} {event.name}: {problem}\n"
    return HookAnswer(_dump(render(event, outcome)), line, 0)


def _unknown_shape(
    dialect: str,
    payload: Mapping[str, Any],
    exc: BadPayload,
    env: Mapping[str, str],
    store: Store | str | None,
) -> HookAnswer:
    """A payload of a shape antiloop does not know: a one-line notice, the event kept.

    The notice names the field and the CLI version; the call goes on (unless
    ``ANTILOOP_FAIL=closed``); the event goes to the audit log for diagnosis.
    """
    from antiloop.hooks.version import cli_version

    version = cli_version(dialect, env)
    problem = f"{dialect} {version} sent a hook input antiloop does not know: {exc}"
    try:
        _keep_unknown(payload, exc, version, dialect, env, store)
    except Exception as keep_error:
        problem += f" (not kept in the audit log: {_describe(keep_error)})"
    return _unreadable(problem, fail_mode_of(env))


def fail_mode_of(env: Mapping[str, str]) -> str:
    """``ANTILOOP_FAIL`` of ``env`` (the config is not read for an event it cannot judge)."""
    from antiloop.hooks.config import fail_mode

    return fail_mode(env)


def _keep_unknown(
    payload: Mapping[str, Any],
    exc: BadPayload,
    version: str,
    dialect: str,
    env: Mapping[str, str],
    store: Store | str | None,
) -> None:
    import time

    from antiloop.audit import AuditEvent
    from antiloop.stores import open_store

    opened = store if store is not None and not isinstance(store, str) else None
    if opened is None:
        opened = open_split(env) or open_store(store_url(env))
    try:
        sink = getattr(opened, "append_audit", None)
        if sink is None:
            return
        session = payload.get("session_id")
        raw = json.dumps(payload, ensure_ascii=False, default=str)
        sink(
            AuditEvent(
                kind="session",
                session=session if isinstance(session, str) and session else "unknown",
                at=time.time(),
                detail={
                    "event": "unknown-shape",
                    "agent_cli": dialect,
                    "cli_version": version,
                    "field": exc.field,
                    "problem": str(exc),
                    "hook": str(payload.get("hook_event_name")),
                    "payload": raw[:8000],
                },
            )
        )
    finally:
        if opened is not store:
            opened.close()


def _unreadable(problem: str, fail: str) -> HookAnswer:
    """The answer when the input cannot be read as an event at all."""
    line = f"antiloop hook: {problem}\n"
    if fail == "closed":
        return HookAnswer("", line + "antiloop hook: ANTILOOP_FAIL=closed: blocking.\n", 2)
    notice = {"systemMessage": f"antiloop: {problem}; nothing was checked."}
    return HookAnswer(_dump(notice), line, 0)
