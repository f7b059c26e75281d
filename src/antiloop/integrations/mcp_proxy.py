"""A stdio MCP proxy that puts the guard between any MCP client and any MCP server.

    antiloop mcp-proxy --ask delete_file -- python my_server.py

The proxy starts the server and relays JSON-RPC lines both ways, byte for byte, with three
exceptions:

* a ``tools/call`` request first passes ``guard.check``: a procedure already stopped as a loop
  (or any call in a stopped session) is answered at once with ``isError: true`` and the reason,
  and never reaches the server;
* a call the approval policy flags waits for a person, asked through MCP elicitation when the
  client declared it (``elicitation/create``, a one-field form); a refusal, or a client that
  cannot ask, answers ``isError: true`` with the reason;
* the server's answer to a ``tools/call`` is recorded; at the second identical call with the
  same result the client gets ``isError: true`` with the hint and the fingerprint instead.

Everything else (initialize, lists, resources, prompts, notifications, the server's own
requests to the client) passes through unchanged. The proxy speaks the wire protocol (MCP
stdio: one JSON-RPC message per line, revisions 2024-11-05 to 2025-11-25, the newest the
``mcp`` package implements) with the standard library only, so it does not depend on the
``mcp`` package; the ``mcp`` extra (``mcp>=1.26,<2``) is for the example server and client.

JSON-RPC batches exist in revision 2025-03-26 only (2025-06-18 removed them). Under it a
client's batch is taken apart: each call is guarded as if it came alone, the messages go to
the server one by one (many servers take no batches), and the answers go back as one batch.
Under any other revision a batch is answered ``-32600 Invalid Request`` and nothing of it
reaches the server, so no call slips past the guard inside an array.

With ``trust_annotations`` (the config marks the server trusted) the tools' annotations of
``tools/list`` (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``)
give the approval policy its risk tier (``antiloop.approval.policy.ToolHints``, the spec's
defaults for a hint left out); otherwise they are never read. They never change the loop
rule: a repeat still needs the same result, whatever ``idempotentHint`` says.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import json
import logging
import subprocess
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from antiloop.approval.policy import ApprovalPolicy as Policy
from antiloop.approval.policy import ToolHints
from antiloop.config import GuardConfig
from antiloop.core.step import read_json
from antiloop.core.verdict import Action, Verdict
from antiloop.guard import Guard
from antiloop.integrations._common import (
    ApprovalPolicy,
    Decision,
    approval_needed,
    denied,
    model_text,
    parse_args,
    record_decision,
    verdict_info,
)

log = logging.getLogger("antiloop.mcp")

__all__ = ["PROXY_CONFIG", "McpProxy", "name_policy"]

#: The proxy's default guard settings. One proxy serves a whole client connection, often
#: across many conversations, so a repeat refuses the looping call only (``block``) instead of
#: ending the session, and the step budget is off. A ``--config`` replaces all of this.
PROXY_CONFIG = GuardConfig(repeat_action="block", detectors=("repeat", "cycle", "fail-streak"))

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this tool call?",
            "default": False,
        },
        "comment": {
            "type": "string",
            "title": "A word for the agent (optional)",
        },
    },
    "required": ["approve"],
}
_META_KEY = "antiloop/verdict"
BATCH_VERSIONS = frozenset({"2025-03-26"})
"""The MCP revisions that have JSON-RPC batches (2025-06-18 removed them)."""


def name_policy(ask: Sequence[str] = (), deny: Sequence[str] = ()) -> ApprovalPolicy:
    """An approval policy by tool name: shell-style patterns to ``ask`` about or ``deny``.

    Example:
        >>> policy = name_policy(ask=["delete_*"], deny=["drop_database"])
        >>> policy("delete_file", {}), policy("drop_database", {}), policy("read", {})
        ('ask', 'deny', 'allow')
    """

    def policy(tool: str, args: Mapping[str, Any]) -> str:
        if any(fnmatch.fnmatchcase(tool, p) for p in deny):
            return "deny"
        if any(fnmatch.fnmatchcase(tool, p) for p in ask):
            return "ask"
        return "allow"

    return policy


@dataclass
class _Waiter:
    event: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None


@dataclass
class _Batch:
    """The answers of one client batch, sent together once every request has its answer."""

    waiting: set[str]
    replies: list[Any] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Call:
    id: Any
    tool: str
    args: dict[str, Any]


class McpProxy:
    """Relays one MCP stdio session between a client and a server, guarding ``tools/call``.

    Args:
        command: the server's command line.
        guard: the guard to use; by default an in-memory guard with ``PROXY_CONFIG``.
        session: the antiloop session; a new id per proxy by default.
        agent: the agent name in fingerprints.
        needs_approval: ``(tool, args) -> bool | "allow" | "ask" | "deny"`` (see
            ``ApprovalPolicy``), for example ``name_policy(ask=["delete_*"])``, or an
            ``antiloop.approval.ApprovalPolicy`` (which reads trusted annotations).
        trust_annotations: the server is trusted: its tools' annotations inform the policy.
        approval_timeout: seconds to wait for a person's answer; no answer refuses the call
            (None waits for ever).
        client_in: where the client's messages come from (the proxy's stdin by default).
        client_out: where the client's answers go (the proxy's stdout by default).
        env: the server's environment (this process's by default).
        cwd: the server's working directory.
    """

    def __init__(
        self,
        command: Sequence[str],
        guard: Guard | None = None,
        *,
        session: str | None = None,
        agent: str = "mcp",
        needs_approval: ApprovalPolicy | Policy | None = None,
        approval_timeout: float | None = 300.0,
        client_in: IO[bytes] | None = None,
        client_out: IO[bytes] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        trust_annotations: bool = False,
    ) -> None:
        if not command:
            raise ValueError("the MCP server command is empty")
        self.command = list(command)
        self.guard = guard if guard is not None else Guard(config=PROXY_CONFIG)
        self.session = session or uuid.uuid4().hex
        self.agent = agent
        self.needs_approval = needs_approval
        self.approval_timeout = approval_timeout
        self.client_in = client_in
        self.client_out = client_out
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.client_capabilities: dict[str, Any] = {}
        self.protocol_version = ""
        self.trust_annotations = trust_annotations
        self.hints: dict[str, ToolHints] = {}  # by tool name, from a trusted server only
        self._asked: dict[str, str] = {}  # request key -> "initialize" | "tools/list"
        self._batches: dict[str, _Batch] = {}
        self._server: subprocess.Popen[bytes] | None = None
        self._to_client = threading.Lock()
        self._to_server = threading.Lock()
        self._state = threading.Lock()
        self._calls: dict[str, _Call] = {}
        self._waiters: dict[str, _Waiter] = {}
        self._ids = itertools.count(1)
        self._client_open = True

    def __repr__(self) -> str:
        return f"McpProxy({self.command!r}, session={self.session!r})"

    # -- running ---------------------------------------------------------------------------

    def run(self) -> int:
        """Start the server and relay until it exits; returns its exit status."""
        import sys

        client_in = self.client_in or sys.stdin.buffer
        self.client_out = self.client_out or sys.stdout.buffer
        server = self._server = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
        )
        reader = threading.Thread(target=self._read_client, args=(client_in,), daemon=True)
        reader.start()
        assert server.stdout is not None  # noqa: S101 - Popen with PIPE
        with server.stdout:
            for line in server.stdout:
                if line.strip():
                    self._from_server(line)
        code = server.wait()
        self._release_waiters()
        if server.stdin is not None:
            with self._to_server, contextlib.suppress(OSError):
                server.stdin.close()
        return code

    def _read_client(self, stream: IO[bytes]) -> None:
        try:
            for line in stream:
                if line.strip():
                    self._from_client(line)
        finally:
            self._client_open = False
            self._release_waiters()
            server = self._server
            if server is not None and server.stdin is not None:
                with contextlib.suppress(OSError):
                    server.stdin.close()

    def _release_waiters(self) -> None:
        with self._state:
            waiters = list(self._waiters.values())
        for waiter in waiters:
            waiter.event.set()

    # -- client -> server --------------------------------------------------------------------

    def _from_client(self, line: bytes) -> None:
        try:
            decoded = read_json(line)
        except ValueError:
            decoded = None
        if isinstance(decoded, list):
            self._client_batch(decoded)
            return
        if not isinstance(decoded, dict):
            self._send_server(line)
            return
        self._dispatch(decoded, line)

    def _client_batch(self, items: list[Any]) -> None:
        """A client's batch: refused unless the revision has batches, else taken apart."""
        if self.protocol_version not in BATCH_VERSIONS or not items:
            said = f"MCP {self.protocol_version}" if self.protocol_version else "this session"
            why = f"{said} has no JSON-RPC batches" if items else "an empty batch"
            self._send_client(_invalid(why))
            return
        messages = [m for m in items if isinstance(m, dict)]
        for _ in range(len(items) - len(messages)):
            self._send_client(_invalid("a batch element is no JSON-RPC message"))
        keys = {_key(m["id"]) for m in messages if "method" in m and "id" in m}
        if keys:
            batch = _Batch(set(keys))
            with self._state:
                for key in keys:
                    self._batches[key] = batch
        for message in messages:
            self._dispatch(message, _encode(message))

    def _dispatch(self, message: dict[str, Any], line: bytes) -> None:
        method = message.get("method")
        if method is None and "id" in message:
            waiter = self._waiters.get(_key(message["id"]))
            if waiter is not None:
                waiter.answer = message
                waiter.event.set()
                return
        elif method == "initialize":
            params = message.get("params") or {}
            capabilities = params.get("capabilities")
            self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
            self.protocol_version = str(params.get("protocolVersion") or "")
            if "id" in message:
                self._asked[_key(message["id"])] = "initialize"
        elif method == "tools/list" and "id" in message and self.trust_annotations:
            self._asked[_key(message["id"])] = "tools/list"
        elif method == "tools/call" and "id" in message:
            self._tool_call(message, line)
            return
        self._send_server(line)

    def _tool_call(self, message: dict[str, Any], line: bytes) -> None:
        params = message.get("params") or {}
        call = _Call(
            message["id"], str(params.get("name", "")), parse_args(params.get("arguments"))
        )
        verdict = self.guard.check(call.tool, call.args, session=self.session, agent=self.agent)
        if verdict.action >= Action.BLOCK:
            self._refuse(call, verdict)
            return
        need = self._approval(call)
        if need == "deny":
            self._refuse(call, denied(call.tool, Decision(False, "refused by policy", "policy")))
        elif need == "ask":
            threading.Thread(target=self._approve_call, args=(call, line), daemon=True).start()
        else:
            self._forward(call, line)

    def _approval(self, call: _Call) -> str:
        """``allow``, ``ask`` or ``deny``: the policy, told the tool's hints when trusted."""
        policy = self.needs_approval
        if isinstance(policy, Policy):
            hints = self.hints.get(call.tool, ToolHints()) if self.trust_annotations else None
            return policy.decide(call.tool, call.args, hints=hints).decision
        return approval_needed(policy, call.tool, call.args)

    def _forward(self, call: _Call, line: bytes) -> None:
        with self._state:
            self._calls[_key(call.id)] = call
        self._send_server(line)

    def _approve_call(self, call: _Call, line: bytes) -> None:
        args = json.dumps(call.args, ensure_ascii=False, sort_keys=True)
        asked_at = self.guard.clock()
        decision = self._ask(f"The agent wants to run {call.tool} {args}. Allow it?")
        refusal = None if decision.approved else denied(call.tool, decision)
        record_decision(
            self.guard,
            session=self.session,
            agent=self.agent,
            tool=call.tool,
            args=call.args,
            decision=decision,
            channel="mcp-elicitation",
            verdict=refusal,
            asked_at=asked_at,
        )
        if refusal is None:
            self._forward(call, line)
        else:
            self._refuse(call, refusal)

    # -- server -> client --------------------------------------------------------------------

    def _from_server(self, line: bytes) -> None:
        message = _decode(line)
        if message is not None and "method" not in message and "id" in message:
            with self._state:
                call = self._calls.pop(_key(message["id"]), None)
                asked = self._asked.pop(_key(message["id"]), None) if self._asked else None
            if asked is not None:
                self._learn(asked, message.get("result"))
            if call is not None:
                self._tool_result(call, message, line)
                return
        self._send_client(line)

    def _learn(self, asked: str, result: object) -> None:
        """The negotiated revision (the server's answer), and a trusted server's tool hints."""
        if not isinstance(result, dict):
            return
        if asked == "initialize":
            version = result.get("protocolVersion")
            if isinstance(version, str) and version:
                self.protocol_version = version
            return
        for tool in result.get("tools") or ():
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                self.hints[tool["name"]] = ToolHints.from_annotations(tool.get("annotations"))

    def _tool_result(self, call: _Call, message: dict[str, Any], line: bytes) -> None:
        result = message.get("result")
        error = message.get("error")
        if isinstance(error, dict):
            output, failed = str(error.get("message", error)), True
        elif isinstance(result, dict) and ("content" in result or "structuredContent" in result):
            output, failed = _result_text(result), result.get("isError") is True
        else:  # a task handle or something new: nothing to compare
            self._send_client(line)
            return
        verdict = self.guard.record(
            self.guard.step(
                call.tool,
                call.args,
                session=self.session,
                agent=self.agent,
                output=None if failed else output,
                error=output if failed else None,
            )
        )
        if verdict.action >= Action.BLOCK:
            self._refuse(call, verdict)
        elif verdict.action is Action.ASK:
            threading.Thread(
                target=self._approve_result, args=(call, message, verdict), daemon=True
            ).start()
        elif verdict.action is Action.NUDGE and isinstance(result, dict):
            self._send_client(_with_hint(message, result, verdict))
        else:
            self._send_client(line)

    def _approve_result(self, call: _Call, message: dict[str, Any], verdict: Verdict) -> None:
        asked_at = self.guard.clock()
        decision = self._ask(f"{verdict.reason} Let the agent go on?")
        refusal = None if decision.approved else denied(call.tool, decision)
        record_decision(
            self.guard,
            session=self.session,
            agent=self.agent,
            tool=call.tool,
            args=call.args,
            decision=decision,
            channel="mcp-elicitation",
            verdict=refusal or verdict,
            asked_at=asked_at,
        )
        result = message.get("result")
        if refusal is not None:
            self._refuse(call, refusal)
        elif isinstance(result, dict):
            self._send_client(_with_hint(message, result, verdict))
        else:
            self._send_client(message)

    # -- people ----------------------------------------------------------------------------

    @property
    def can_elicit(self) -> bool:
        """True when the client declared form elicitation in ``initialize``."""
        elicitation = self.client_capabilities.get("elicitation")
        if not isinstance(elicitation, dict):
            return False
        return not elicitation or "form" in elicitation

    def _ask(self, text: str) -> Decision:
        """Ask the person at the client through elicitation; blocks until the answer comes."""
        if not self.can_elicit:
            return Decision(
                False,
                "this call needs a person's approval and the MCP client cannot ask one "
                "(it does not support elicitation)",
                "antiloop",
            )
        request_id = f"antiloop-{next(self._ids)}-{uuid.uuid4().hex[:8]}"
        params: dict[str, Any] = {"message": text, "requestedSchema": APPROVAL_SCHEMA}
        if self.protocol_version >= "2025-11-25":
            params["mode"] = "form"
        waiter = _Waiter()
        with self._state:
            self._waiters[_key(request_id)] = waiter
        try:
            self._send_client(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "elicitation/create",
                    "params": params,
                }
            )
            answered = self._client_open and waiter.event.wait(self.approval_timeout)
        finally:
            with self._state:
                self._waiters.pop(_key(request_id), None)
        if not answered:
            return Decision(False, "no answer came in time", "timeout")
        if waiter.answer is None:
            return Decision(False, "the connection closed before an answer came", "antiloop")
        return _elicit_decision(waiter.answer)

    # -- writing ---------------------------------------------------------------------------

    def _refuse(self, call: _Call, verdict: Verdict) -> None:
        self._send_client(
            {
                "jsonrpc": "2.0",
                "id": call.id,
                "result": {
                    "content": [{"type": "text", "text": model_text(verdict)}],
                    "isError": True,
                    "_meta": {_META_KEY: verdict_info(verdict)},
                },
            }
        )

    def _send_client(self, message: bytes | Mapping[str, Any]) -> None:
        out = self.client_out
        if out is None:  # pragma: no cover - run() sets it
            return
        if self._batches:
            data = _decode(message) if isinstance(message, bytes) else message
            if data is not None and "method" not in data and "id" in data:
                with self._state:
                    batch = self._batches.pop(_key(data["id"]), None)
                    if batch is not None:
                        batch.replies.append(dict(data))
                        batch.waiting.discard(_key(data["id"]))
                        if batch.waiting:
                            return  # the batch's other answers are still to come
                if batch is not None:
                    message = json.dumps(batch.replies, ensure_ascii=False).encode()
        with self._to_client:
            try:
                out.write(_encode(message))
                out.flush()
            except (OSError, ValueError):
                log.warning("antiloop mcp-proxy: the client went away")

    def _send_server(self, message: bytes | Mapping[str, Any]) -> None:
        server = self._server
        if server is None or server.stdin is None:
            return
        with self._to_server:
            try:
                server.stdin.write(_encode(message))
                server.stdin.flush()
            except (OSError, ValueError):
                log.warning("antiloop mcp-proxy: the server went away")


def _decode(line: bytes) -> dict[str, Any] | None:
    try:
        message = read_json(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _invalid(why: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": f"Invalid Request: {why}"},
    }


def _encode(message: bytes | Mapping[str, Any]) -> bytes:
    if isinstance(message, bytes):
        return message if message.endswith(b"\n") else message + b"\n"
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _key(request_id: object) -> str:
    return f"{type(request_id).__name__}:{request_id}"


def _result_text(result: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for block in result.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(json.dumps(block, sort_keys=True, ensure_ascii=False))
    if not parts and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], sort_keys=True, ensure_ascii=False))
    return "\n".join(parts)


def _with_hint(
    message: Mapping[str, Any], result: Mapping[str, Any], verdict: Verdict
) -> dict[str, Any]:
    content = [*(result.get("content") or ()), {"type": "text", "text": model_text(verdict)}]
    meta = {**(result.get("_meta") or {}), _META_KEY: verdict_info(verdict)}
    return {**message, "result": {**result, "content": content, "_meta": meta}}


def _elicit_decision(answer: Mapping[str, Any]) -> Decision:
    if "error" in answer:
        error = answer["error"]
        text = error.get("message") if isinstance(error, dict) else error
        return Decision(False, f"the client could not ask: {text}", "antiloop")
    result = answer.get("result") or {}
    action = result.get("action")
    content = result.get("content") or {}
    comment = content.get("comment") if isinstance(content, dict) else None
    comment = comment if isinstance(comment, str) and comment else None
    if action != "accept":
        return Decision(False, comment or f"the person chose {action or 'nothing'}", "person")
    approved = isinstance(content, dict) and content.get("approve") is True
    return Decision(approved, comment, "person")
