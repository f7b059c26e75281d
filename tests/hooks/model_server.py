"""A scripted model on 127.0.0.1 that the real agent CLIs talk to.

Three wire formats, as much of each as the CLIs use: Anthropic Messages (Claude Code, SSE or
JSON), OpenAI Responses (Codex, SSE; JSON for a request that does not stream, as the Agents SDK's
``Runner.run`` sends) and Gemini ``streamGenerateContent`` (Gemini CLI, SSE; and
plain ``generateContent`` for its side requests). The script is a list of moves; the reply to the
agent's main request is the move whose index is the number of tool results the conversation
already holds, so a refused call (the CLI still sends a result, the refusal) moves the script on
as a real model would. Side requests (titles, summaries, routing) get a short text.

Every request body is kept (``requests``) so a test can read what the model was told.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Call", "Hosted", "ModelServer", "Say"]


def _bind(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """A server on 127.0.0.1: a free port of ``ANTILOOP_TEST_PORTS`` (``FIRST-LAST``), if set
    (a machine whose users share port ranges), else any free port."""
    span = os.environ.get("ANTILOOP_TEST_PORTS", "")
    first, _, last = span.partition("-")
    if first.isdigit() and last.isdigit():
        for port in range(int(first), int(last) + 1):
            try:
                return ThreadingHTTPServer(("127.0.0.1", port), handler)
            except OSError:
                continue
        raise OSError(f"no free port in ANTILOOP_TEST_PORTS={span}")
    return ThreadingHTTPServer(("127.0.0.1", 0), handler)


@dataclass(frozen=True)
class Call:
    """The model calls one tool."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Say:
    """The model answers with text and ends its turn."""

    text: str


@dataclass(frozen=True)
class Hosted:
    """The model ran one of its hosted tools (OpenAI Responses only): ``item`` is the output
    item, such as ``{"type": "web_search_call", "action": {...}}``; id and status are added.
    The conversation's next request carries it back, which moves the script on."""

    item: dict[str, Any]


Move = Call | Say | Hosted

#: the Responses output items of hosted tools, counted as results of the conversation
HOSTED_ITEMS = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call"}
)


@dataclass
class Seen:
    """One request the CLI sent."""

    path: str
    body: dict[str, Any]
    main: bool
    results: int

    protocol: str = ""

    @property
    def result_texts(self) -> list[str]:
        """The tool results the conversation holds, as text."""
        return [json.dumps(r, ensure_ascii=False) for r in _result_items(self.protocol, self.body)]

    @property
    def text(self) -> str:
        """The whole body as text (to look for a reason or a fingerprint in it)."""
        return json.dumps(self.body, ensure_ascii=False)


@dataclass
class ModelServer:
    """A scripted model speaking ``protocol`` (``anthropic``, ``openai`` or ``gemini``).

    Args:
        protocol: the wire format.
        script: the moves of the main conversation, in order.
        tool: a tool name that marks the agent's main request (side requests lack it).
        on_main: called with the number of tool results before a main request is answered
            (a test's fault goes in there, between two tool calls).
    """

    protocol: str
    script: Sequence[Move]
    tool: str
    on_main: Callable[[int], None] | None = None
    requests: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def main_requests(self) -> list[Seen]:
        """The requests of the main conversation, in order."""
        with self._lock:
            return [r for r in self.requests if r.main]

    def __enter__(self) -> ModelServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                outer._reply_json(self, {"data": [], "models": []})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                try:
                    outer._answer(self, body if isinstance(body, dict) else {})
                except Exception as exc:  # a bug here must not leave the CLI waiting
                    outer.errors.append(f"{type(exc).__name__}: {exc}")
                    self.send_error(500, str(exc))

        self._server = _bind(Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- dispatch -------------------------------------------------------------------------

    def _answer(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        path = h.path
        main = self._tool_names(body) is not None and self.tool in (self._tool_names(body) or ())
        results = _count_results(self.protocol, body)
        with self._lock:
            self.requests.append(Seen(path, body, main, results, self.protocol))
        move: Move = Say("ok")
        if main:
            if self.on_main is not None:
                self.on_main(results)
            move = self.script[results] if results < len(self.script) else Say("done")
        if self.protocol == "anthropic":
            if "count_tokens" in path:
                self._reply_json(h, {"input_tokens": 10})
            elif body.get("stream"):
                self._reply_sse(h, _anthropic_events(move, results))
            else:
                self._reply_json(h, _anthropic_message(move, results))
        elif self.protocol == "openai":
            events = _openai_events(move, results)
            if body.get("stream") is False or "stream" not in body:
                self._reply_json(h, events[-1][1]["response"])  # type: ignore[index]
            else:
                self._reply_sse(h, events)
        elif ":countTokens" in path:
            self._reply_json(h, {"totalTokens": 10})
        elif ":streamGenerateContent" in path:
            self._reply_sse(h, [(None, _gemini_chunk(move, side=not main))])
        else:
            self._reply_json(h, _gemini_chunk(move, side=not main))

    def _tool_names(self, body: dict[str, Any]) -> tuple[str, ...] | None:
        tools = body.get("tools")
        if not isinstance(tools, list):
            return None
        names: list[str] = []
        for tool in tools:
            if not isinstance(tool, dict):
                continue
            if isinstance(tool.get("name"), str):
                names.append(tool["name"])
            names.extend(
                decl["name"]
                for decl in tool.get("functionDeclarations") or ()
                if isinstance(decl, dict) and isinstance(decl.get("name"), str)
            )
        return tuple(names)

    @staticmethod
    def _reply_json(h: BaseHTTPRequestHandler, value: object) -> None:
        data = json.dumps(value).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _reply_sse(h: BaseHTTPRequestHandler, events: Sequence[tuple[str | None, object]]) -> None:
        parts = []
        for name, data in events:
            head = f"event: {name}\n" if name else ""
            parts.append(f"{head}data: {json.dumps(data)}\n\n")
        payload = "".join(parts).encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)


def _count_results(protocol: str, body: dict[str, Any]) -> int:
    return sum(1 for _ in _result_items(protocol, body))


def _result_items(protocol: str, body: dict[str, Any]) -> Iterator[object]:
    if protocol == "anthropic":
        for message in body.get("messages") or ():
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield block
    elif protocol == "openai":
        for item in body.get("input") or ():
            if isinstance(item, dict) and (
                item.get("type") in ("function_call_output", "custom_tool_call_output")
                or item.get("type") in HOSTED_ITEMS
            ):
                yield item
    else:
        for content in body.get("contents") or ():
            for part in content.get("parts") or () if isinstance(content, dict) else ():
                if isinstance(part, dict) and "functionResponse" in part:
                    yield part


# -- Anthropic Messages ----------------------------------------------------------------------

_USAGE = {"input_tokens": 10, "output_tokens": 5}


def _anthropic_message(move: Move, n: int) -> dict[str, Any]:
    if isinstance(move, Call):
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{n:04d}", "name": move.name, "input": move.args}
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": move.text}]
        stop = "end_turn"
    return {
        "id": f"msg_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-scripted",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _USAGE,
    }


def _anthropic_events(move: Move, n: int) -> list[tuple[str | None, object]]:
    message = _anthropic_message(move, n)
    start = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str | None, object]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    if isinstance(move, Call):
        block = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": move.name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(move.args)}
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": move.text}
    events += [
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


# -- OpenAI Responses ------------------------------------------------------------------------


def _openai_events(move: Move, n: int) -> list[tuple[str | None, object]]:
    rid = f"resp_{n:04d}"
    if isinstance(move, Hosted):
        item: dict[str, Any] = {"id": f"hosted_{n:04d}", "status": "completed", **move.item}
    elif isinstance(move, Call):
        item = {
            "type": "function_call",
            "id": f"fc_{n:04d}",
            "call_id": f"call_{n:04d}",
            "name": move.name,
            "arguments": json.dumps(move.args),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": f"msg_{n:04d}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": move.text, "annotations": []}],
        }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    base = {
        "id": rid,
        "object": "response",
        "created_at": 0,
        "model": "gpt-scripted",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    done = {**base, "status": "completed", "output": [item], "usage": usage}
    return [
        ("response.created", {"type": "response.created", "response": base}),
        (
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]


# -- Gemini ----------------------------------------------------------------------------------


def _gemini_chunk(move: Move, *, side: bool) -> dict[str, Any]:
    if isinstance(move, Call):
        parts: list[dict[str, Any]] = [{"functionCall": {"name": move.name, "args": move.args}}]
    else:
        parts = [{"text": move.text if not side else '{"reasoning": "ok", "next_speaker": "user"}'}]
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemini-scripted",
    }
