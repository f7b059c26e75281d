"""OpenTelemetry export (antiloop.telemetry) against a real OTLP/HTTP endpoint on 127.0.0.1.

The endpoint is a small HTTP server receiving ``POST /v1/traces`` and decoding the protobuf
export with ``opentelemetry.proto`` (the exporter's own dependency); the library, a real
``antiloop hook claude-code`` process and a real ``antiloop serve`` export to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import need_module

need_module("opentelemetry.sdk", "otel")  # skips on a laptop without it, fails under CI=true

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from antiloop import Guard, Step  # noqa: E402
from antiloop.core.errors import ConfigError  # noqa: E402
from antiloop.telemetry import TelemetryListener, listener_for, telemetry_settings  # noqa: E402

ANTILOOP = Path(sys.executable).with_name("antiloop")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SECRET = "sk-ant-api03-" + "Q" * 40  # a key redact_text knows


@dataclass
class Span:
    """One exported span, decoded."""

    name: str
    trace_id: str
    parent_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]
    status: int


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


@dataclass
class Collector:
    """The spans the endpoint received, in order."""

    url: str
    spans: list[Span] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, count: int, timeout: float = 20.0) -> list[Span]:
        """At least ``count`` spans, waiting for a process's export to arrive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.02)
        raise AssertionError(f"{len(self.spans)} spans arrived, expected {count}: {self.spans}")


PORTS = range(7600, 7650)  # this suite's loopback ports on the shared machine; else any free


def _listen(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    for port in (*PORTS, 0):
        try:
            return ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            continue
    raise AssertionError("no loopback port to listen on")


@pytest.fixture
def collector() -> Iterator[Collector]:
    """A real OTLP/HTTP endpoint on a free loopback port."""
    received = Collector("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with received.lock:
                received.paths.append(self.path)
                received.headers.append({k.lower(): v for k, v in self.headers.items()})
                for resource_spans in request.resource_spans:
                    resource = _attrs(resource_spans.resource.attributes)
                    for scope in resource_spans.scope_spans:
                        for s in scope.spans:
                            received.spans.append(
                                Span(
                                    name=s.name,
                                    trace_id=s.trace_id.hex(),
                                    parent_id=s.parent_span_id.hex(),
                                    attributes=_attrs(s.attributes),
                                    events=[(e.name, _attrs(e.attributes)) for e in s.events],
                                    resource=resource,
                                    status=s.status.code,
                                )
                            )
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = _listen(Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield received
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _no_host_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test runner's own OTLP environment, if any, stays out."""
    for name in list(os.environ):
        if name.startswith("OTEL_") or name in ("TRACEPARENT", "TRACESTATE"):
            monkeypatch.delenv(name)


def _config(tmp_path: Path, collector: Collector, extra: str = "") -> Path:
    path = tmp_path / "antiloop.toml"
    path.write_text(
        f'repeat_threshold = 2\n[telemetry]\nendpoint = "{collector.url}"\n'
        f'service_name = "tests"\n{extra}',
        encoding="utf-8",
    )
    return path


def _telemetry(guard: Guard) -> TelemetryListener:
    found = [x for x in guard.listeners if isinstance(x, TelemetryListener)]
    assert len(found) == 1, guard.listeners
    return found[0]


def _grep(n: int, output: str = "a.py:1: x") -> Step:
    return Step(
        tool="Grep",
        args={"pattern": "x", "token": SECRET},
        output=output + " " + SECRET,
        session="s-1",
        agent="coder",
        id=f"call-{n}",
    )


# -- the library ---------------------------------------------------------------------------


def test_each_step_is_an_execute_tool_span_and_a_loop_carries_the_guardrail_result(
    tmp_path: Path, collector: Collector
) -> None:
    guard = Guard.from_config(_config(tmp_path, collector))
    assert guard.record(_grep(1)).action.wire == "continue"
    stopped = guard.record(_grep(2))
    assert stopped.action.wire == "stop"
    assert _telemetry(guard).flush()
    first, second = collector.wait(2)
    assert collector.paths == ["/v1/traces"] * len(collector.paths)
    assert first.name == second.name == "execute_tool Grep"
    assert first.resource["service.name"] == "tests"
    assert first.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "Grep",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.conversation.id": "s-1",
        "gen_ai.agent.name": "coder",
    }
    assert first.events == []  # continue: no guardrail result
    assert second.attributes["gen_ai.tool.call.id"] == "call-2"
    assert second.attributes["antiloop.detector"] == "repeat"
    assert second.attributes["antiloop.fingerprint"] == stopped.fingerprint
    assert second.attributes["antiloop.reason"] == stopped.reason
    [(name, event)] = second.events
    assert name == "gen_ai.guardrail.result"
    assert event["gen_ai.guardrail.component.name"] == "antiloop"
    assert event["gen_ai.guardrail.result.type"] == "action"
    assert event["gen_ai.guardrail.result.value"] == "stop"
    assert event["gen_ai.guardrail.policy.rule.id"] == "repeat"
    assert event["gen_ai.guardrail.result.reason"] == "loop"
    assert event["antiloop.fingerprint"] == stopped.fingerprint
    # no content without the opt-in: neither arguments nor output, so no secret either
    assert "gen_ai.tool.call.arguments" not in second.attributes
    assert SECRET not in repr(collector.spans)
    assert first.parent_id == ""  # no host trace: a root span


def test_content_only_with_the_opt_in_and_redacted(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    guard = Guard.from_config(_config(tmp_path, collector))
    guard.record(_grep(1))
    assert _telemetry(guard).flush()
    [span] = collector.wait(1)
    args = json.loads(span.attributes["gen_ai.tool.call.arguments"])
    assert args["pattern"] == "x"
    assert args["token"] == "[REDACTED]"  # noqa: S105 - the redaction marker
    assert span.attributes["gen_ai.tool.call.result"].startswith("a.py:1: x ")
    assert SECRET not in repr(span)


def test_hostile_steps_are_exported_valid_and_redacted(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lone surrogates (in Steps given whole, names too) and every secret of the corpus:
    each step is one span, with U+FFFD for the broken text and no secret, content captured."""
    from tests.secrets_corpus import BROKEN_TEXT, SECRETS, leaks

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    guard = Guard.from_config(_config(tmp_path, collector))
    steps: list[Step | dict[str, Any]] = [
        Step(
            tool=f"Grep{text}",
            args={"pattern": text},
            output=f"a.py:1: {text}",
            session=f"s{text}",
            agent=f"coder{text}",
            id=f"broken-{i}",
        )
        for i, text in enumerate(BROKEN_TEXT)
    ]
    steps += [
        {"tool": "Bash", "args": {"command": case.text}, "output": case.text, "session": f"c{i}"}
        for i, case in enumerate(SECRETS)
    ]
    for step in steps:
        guard.record(step)
    assert _telemetry(guard).flush()
    spans = collector.wait(len(steps))
    assert len(spans) == len(steps)
    shown = repr(spans)
    assert "\ufffd" in shown
    assert leaks(shown) == []


def test_the_config_turns_content_capture_off_over_the_environment(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    guard = Guard.from_config(_config(tmp_path, collector, "capture_content = false\n"))
    guard.record(_grep(1))
    assert _telemetry(guard).flush()
    [span] = collector.wait(1)
    assert "gen_ai.tool.call.arguments" not in span.attributes


def test_spans_join_the_hosts_traceparent_from_the_environment(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    guard = Guard.from_config({"repeat_threshold": 2})
    guard.record(_grep(1))
    assert _telemetry(guard).flush()
    [span] = collector.wait(1)
    assert span.trace_id == TRACE_ID
    assert span.parent_id == PARENT_ID
    assert span.resource["service.name"] == "from-env"


def test_a_current_span_of_the_application_is_the_parent(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.url + "/v1/traces")
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    guard = Guard.from_config({})
    app = TracerProvider().get_tracer("app")
    with app.start_as_current_span("agent turn") as turn:
        guard.record(_grep(1))
    assert _telemetry(guard).flush()
    [span] = collector.wait(1)
    context = turn.get_span_context()
    assert span.trace_id == f"{context.trace_id:032x}"
    assert span.parent_id == f"{context.span_id:016x}"


def test_a_failed_step_is_an_error_span(collector: Collector) -> None:
    guard = Guard.from_config({"detectors": ["repeat"]})
    listener = listener_for({}, {"endpoint": collector.url})
    assert listener is not None
    guard.listeners.append(listener)
    guard.record(Step(tool="Bash", args={"command": "make"}, error="boom", exit_code=2))
    assert listener.flush()
    [span] = collector.wait(1)
    assert span.attributes["error.type"] == "tool_error"
    assert span.status == 2  # STATUS_CODE_ERROR


def test_the_given_environments_headers_go_with_the_export(collector: Collector) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-team=loops",
    }
    listener = listener_for(env)
    assert listener is not None
    listener.on_verdict(_grep(1), Guard().record(_grep(1)))
    assert listener.flush()
    collector.wait(1)
    assert collector.headers[0]["authorization"] == "Bearer abc"
    assert collector.headers[0]["x-team"] == "loops"


def test_a_failing_exporter_never_changes_the_verdict(
    collector: Collector, caplog: pytest.LogCaptureFixture
) -> None:
    listener = listener_for({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
    assert listener is not None

    class Broken:
        def start_span(self, *args: object, **kw: object) -> None:
            raise RuntimeError("exporter down")

    listener.tracer = Broken()
    guard = Guard(listeners=[listener])
    guard.record(_grep(1))
    assert guard.record(_grep(2)).action.wire == "stop"
    assert "telemetry span not made: exporter down" in caplog.text


def test_off_without_an_endpoint_and_with_otel_sdk_disabled(collector: Collector) -> None:
    assert listener_for({}) is None
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
    assert listener_for(env) is not None
    assert listener_for({**env, "OTEL_SDK_DISABLED": "true"}) is None
    assert listener_for({"OTEL_SDK_DISABLED": "true"}, {"endpoint": collector.url}) is None
    assert listener_for(env, {"enabled": False}) is None
    assert listener_for({**env, "OTEL_TRACES_EXPORTER": "none"}) is None
    assert listener_for({**env, "OTEL_TRACES_EXPORTER": "console,otlp"}) is not None
    # the host's gRPC exporter setup is not ours: no export rather than a broken one
    assert listener_for({**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) is None
    with pytest.raises(ConfigError, match="http/protobuf"):
        listener_for({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, {"service_name": "x"})
    assert listener_for({**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}) is not None
    # an endpoint of the config's own is spoken to over HTTP whatever the host's protocol
    assert listener_for({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, {"endpoint": collector.url})


def test_guard_from_config_without_telemetry_attaches_nothing(tmp_path: Path) -> None:
    path = tmp_path / "antiloop.toml"
    path.write_text("repeat_threshold = 3\n", encoding="utf-8")
    assert Guard.from_config(path).listeners == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('endpont = "http://x"', "unknown key 'endpont'.*endpoint"),
        ('endpoint = "127.0.0.1:4318"', "http:// or https://"),
        ("capture_content = 1", "true or false"),
        ("timeout = 0", "seconds > 0"),
    ],
)
def test_a_bad_telemetry_table_is_named(tmp_path: Path, table: str, message: str) -> None:
    from antiloop.commands.config import describe

    path = tmp_path / "antiloop.toml"
    path.write_text(f"[telemetry]\n{table}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        describe(path)
    with pytest.raises(ConfigError, match=message):
        Guard.from_config(path)


def test_config_check_accepts_a_telemetry_table(tmp_path: Path) -> None:
    from antiloop.commands.config import describe

    path = tmp_path / "antiloop.toml"
    path.write_text('[telemetry]\nendpoint = "https://otel.example"\ntimeout = 2\n', "utf-8")
    assert "[telemetry] 2 keys" in describe(path)
    assert telemetry_settings({"timeout": 2}).timeout == 2.0


# -- the hooks: real processes ---------------------------------------------------------------


def _hook_env(tmp_path: Path, collector: Collector) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "CLAUDE_"))}
    env.update(
        ANTILOOP_STORE=f"sqlite:///{tmp_path / 'antiloop.db'}",
        ANTILOOP_HOOKD="0",
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_SERVICE_NAME="claude-hooks",
        TRACEPARENT=TRACEPARENT,
    )
    return env


def _post_tool_use(n: int, cwd: Path) -> bytes:
    payload = {
        "session_id": "cc-session",
        "transcript_path": None,
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "git status", "description": "status"},
        "tool_response": {"stdout": "nothing to commit", "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_{n}",
    }
    return json.dumps(payload).encode()


def _hook(data: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(ANTILOOP), "hook", "claude-code"],
        input=data,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_hook_processes_export_spans_in_the_hosts_trace(
    tmp_path: Path, collector: Collector
) -> None:
    env = _hook_env(tmp_path, collector)
    for n in (1, 2):
        proc = _hook(_post_tool_use(n, tmp_path), env)
        assert proc.returncode == 0, proc.stderr.decode()
    first, second = collector.wait(2)
    assert first.name == second.name == "execute_tool Bash"
    assert first.resource["service.name"] == "claude-hooks"
    assert first.attributes["gen_ai.tool.call.id"] == "toolu_1"
    assert first.attributes["gen_ai.conversation.id"] == "cc-session"
    assert {first.trace_id, second.trace_id} == {TRACE_ID}
    assert {first.parent_id, second.parent_id} == {PARENT_ID}
    [(name, event)] = second.events
    assert name == "gen_ai.guardrail.result"
    assert event["gen_ai.guardrail.result.value"] == "stop"  # the guard's verdict on the repeat
    assert second.attributes["antiloop.fingerprint"].startswith("AGENT::")
    assert "gen_ai.tool.call.arguments" not in second.attributes


def test_the_hooks_read_the_telemetry_table_of_their_config(
    tmp_path: Path, collector: Collector
) -> None:
    from antiloop.hooks.runner import run_hook

    config = tmp_path / "antiloop.toml"
    config.write_text(f'[telemetry]\nendpoint = "{collector.url}"\n', encoding="utf-8")
    env = {k: v for k, v in _hook_env(tmp_path, collector).items() if not k.startswith("OTEL_")}
    env["ANTILOOP_CONFIG"] = str(config)
    answer = run_hook("claude-code", _post_tool_use(7, tmp_path), env=env)
    assert answer.code == 0
    assert "systemMessage" not in answer.stdout, answer
    [span] = collector.wait(1)
    assert span.attributes["gen_ai.tool.call.id"] == "toolu_7"
    assert span.trace_id == TRACE_ID


def test_a_bad_telemetry_table_is_the_hooks_config_error(tmp_path: Path) -> None:
    from antiloop.hooks.runner import run_hook

    config = tmp_path / "antiloop.toml"
    config.write_text('[telemetry]\nendpoint = "nowhere"\n', encoding="utf-8")
    env = {"ANTILOOP_CONFIG": str(config), "ANTILOOP_HOOKD": "0"}
    env["ANTILOOP_STORE"] = f"sqlite:///{tmp_path / 'antiloop.db'}"
    answer = run_hook("claude-code", _post_tool_use(1, tmp_path), env=env)
    assert "'endpoint' must be an http:// or https:// URL" in answer.stdout


PROBE = (
    "import sys; from antiloop.cli import main; code = main();"
    "print('in-process' if 'antiloop.hooks.runner' in sys.modules else 'daemon', file=sys.stderr);"
    "sys.exit(code)"
)


def test_through_the_daemon_each_hooks_span_joins_its_own_callers_trace(
    tmp_path: Path, collector: Collector
) -> None:
    from antiloop._hook_client import socket_path

    env = {**_hook_env(tmp_path, collector), "ANTILOOP_HOOKD": "1"}
    env["ANTILOOP_HOOKD_DIR"] = str(tmp_path / "run")
    path = socket_path(env)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "antiloop.hooks.daemon", "--socket", path],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not Path(path).exists():
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.05)
        traces = ["a" * 32, "b" * 32]
        for n, trace in enumerate(traces, 1):
            proc = subprocess.run(
                [sys.executable, "-c", PROBE, "hook", "claude-code"],
                input=_post_tool_use(n, tmp_path),
                capture_output=True,
                env={**env, "TRACEPARENT": f"00-{trace}-{PARENT_ID}-01"},
                timeout=60,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr.decode()
            assert proc.stderr.decode().strip().endswith("daemon")
        spans = collector.wait(2)
    finally:
        Path(path).unlink(missing_ok=True)  # a daemon whose socket is gone exits
        try:
            daemon.wait(15)
        except subprocess.TimeoutExpired:
            daemon.kill()
            raise
    assert [s.trace_id for s in spans] == traces
    assert spans[1].events[0][0] == "gen_ai.guardrail.result"


def test_a_down_collector_costs_the_hook_at_most_the_export_limit(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _hook_env(tmp_path, Collector(f"http://127.0.0.1:{port}"))
    started = time.monotonic()
    proc = _hook(_post_tool_use(1, tmp_path), env)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"systemMessage" not in proc.stdout  # the step was judged as usual
    assert took < 8, took  # the export limit is 1 s; start-up and exit are the rest


def test_the_hook_path_does_not_import_opentelemetry_when_telemetry_is_off(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "OTEL_"))}
    env.update(ANTILOOP_STORE=f"sqlite:///{tmp_path / 'antiloop.db'}", ANTILOOP_HOOKD="0")
    script = (
        "import sys\n"
        "from antiloop.hooks.runner import run_hook\n"
        "answer = run_hook('claude-code', sys.stdin.buffer.read())\n"
        "assert answer.code == 0, answer\n"
        "names = ('opentelemetry', 'antiloop.telemetry')\n"
        "print(sorted(m for m in sys.modules if m.startswith(names)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        input=_post_tool_use(1, tmp_path),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == "[]"


# -- antiloop serve ------------------------------------------------------------------------


def test_serve_exports_the_steps_it_judges(tmp_path: Path, collector: Collector) -> None:
    from tests.server.conftest import start_server, stop_server

    config = tmp_path / "serve.toml"
    config.write_text(
        f'[guard]\nrepeat_threshold = 2\n[telemetry]\nendpoint = "{collector.url}"\n', "utf-8"
    )
    server = start_server(tmp_path, "--config", str(config))
    try:
        step = {"tool": "Read", "args": {"file_path": "a.py"}, "output": "x", "session": "web"}
        for n in (1, 2):
            status, verdict = server.call("POST", "/v1/steps", {**step, "id": f"r{n}"})
            assert status == 200, verdict
        assert verdict["action"] == "stop"
        first, second = collector.wait(2)
    finally:
        stop_server(server)
    assert first.name == "execute_tool Read"
    assert first.resource["service.name"] == "antiloop"
    assert [s.attributes["gen_ai.tool.call.id"] for s in (first, second)] == ["r1", "r2"]
    assert first.attributes["gen_ai.conversation.id"] == "web"
    assert first.events == []
    assert second.events[0][1]["gen_ai.guardrail.result.value"] == "stop"


# -- every entry point, from the standard OTLP environment alone -----------------------------


def _otlp_env(monkeypatch: pytest.MonkeyPatch, collector: Collector) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=infra")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,team=infra")


def test_a_plain_guard_exports_when_the_otlp_environment_is_set(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    _otlp_env(monkeypatch, collector)
    guard = Guard()
    assert guard.record(_grep(1)).action.wire == "continue"
    assert guard.record(_grep(2)).action.wire == "stop"
    assert _telemetry(guard).flush(10)
    first, second = collector.wait(2)
    assert (first.name, second.name) == ("execute_tool Grep", "execute_tool Grep")
    assert first.resource["service.name"] == "from-attributes"  # OTEL_RESOURCE_ATTRIBUTES
    assert first.resource["team"] == "infra"
    assert collector.headers[0]["x-team"] == "infra"
    assert second.events[0][1]["gen_ai.guardrail.result.value"] == "stop"


def test_otel_service_name_wins_over_the_resource_attributes(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    _otlp_env(monkeypatch, collector)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "named")
    guard = Guard()
    guard.record(_grep(1))
    assert _telemetry(guard).flush(10)
    [span] = collector.wait(1)
    assert span.resource["service.name"] == "named"


def test_a_config_and_the_environment_give_one_exporter_not_two(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    _otlp_env(monkeypatch, collector)
    guard = Guard.from_config(_config(tmp_path, collector))
    listener = _telemetry(guard)  # exactly one
    guard.record(_grep(1))
    assert listener.flush(10)
    [span] = collector.wait(1)
    assert span.resource["service.name"] == "tests"  # the config's [telemetry] settings


def test_telemetry_false_and_the_scanner_export_nothing(
    tmp_path: Path, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    from antiloop.scan.engine import Scanner, scan_config
    from antiloop.telemetry import flush_all

    _otlp_env(monkeypatch, collector)
    assert not [x for x in Guard(telemetry=False).listeners if isinstance(x, TelemetryListener)]
    trace = tmp_path / "run.jsonl"
    trace.write_text("".join(json.dumps(_grep(n).to_dict()) + "\n" for n in (1, 2)), "utf-8")
    [scanned] = Scanner(scan_config()).scan_one(trace)
    assert scanned.loops  # a recorded run is judged, and exports nothing: it is no live step
    assert flush_all(10)
    assert collector.spans == []


def _steps_file(tmp_path: Path) -> Path:
    path = tmp_path / "steps.jsonl"
    step = {"tool": "Bash", "args": {"command": "pytest -q"}, "output": "1 failed in 0.5s"}
    path.write_text("".join(json.dumps({**step, "id": f"c{n}"}) + "\n" for n in (1, 2)), "utf-8")
    return path


def test_antiloop_check_exports_its_verdicts_with_the_otlp_environment(
    tmp_path: Path, collector: Collector
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "OTEL_"))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="ci-check")
    proc = subprocess.run(
        [str(ANTILOOP), "check", "--no-config", str(_steps_file(tmp_path))],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr.decode()
    assert proc.stderr == b""
    first, second = collector.wait(2)  # flushed before check exited
    assert [s.attributes["gen_ai.tool.call.id"] for s in (first, second)] == ["c1", "c2"]
    assert first.resource["service.name"] == "ci-check"
    assert second.events[0][1]["gen_ai.guardrail.result.value"] == "stop"


def test_a_down_collector_leaves_checks_verdicts_and_is_said(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "OTEL_"))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    env.update(OTEL_EXPORTER_OTLP_TIMEOUT="2")  # the SDK's bounded wait, then it gives up
    proc = subprocess.run(
        [str(ANTILOOP), "check", "--no-config", str(_steps_file(tmp_path))],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3  # the verdicts stand
    assert proc.stdout.count(b"\n") == 2
    assert b"Failed to export span batch" in proc.stderr
    assert b"Traceback" not in proc.stderr


def test_serve_exports_with_the_otlp_environment_alone(
    tmp_path: Path, collector: Collector
) -> None:
    from tests.server.conftest import start_server, stop_server

    server = start_server(tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url})
    try:
        step = {"tool": "Read", "args": {"file_path": "a.py"}, "output": "x", "session": "env"}
        for n in (1, 2):
            status, verdict = server.call("POST", "/v1/steps", {**step, "id": f"e{n}"})
            assert status == 200, verdict
        spans = collector.wait(2)
    finally:
        stop_server(server)
    assert [s.attributes["gen_ai.tool.call.id"] for s in spans] == ["e1", "e2"]  # once each
