"""OpenTelemetry export of judged steps, in the GenAI semantic conventions (the ``otel`` extra).

On when the standard OTLP environment names an endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), or when the config has a ``[telemetry]`` table;
``OTEL_SDK_DISABLED=true``, ``OTEL_TRACES_EXPORTER=none`` or ``enabled = false`` turn it off::

    [telemetry]
    endpoint = "http://127.0.0.1:4318"   # OTLP/HTTP; /v1/traces is added as the SDK does
    service_name = "my-agent"            # else OTEL_SERVICE_NAME, else "antiloop"
    capture_content = false              # else OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
    timeout = 5                          # seconds an export may take (hooks: at most 1 s)

Every recorded step is an ``execute_tool {gen_ai.tool.name}`` span (``gen_ai.tool.call.id`` is
the step id, ``gen_ai.conversation.id`` the session, ``gen_ai.agent.name`` the agent). A verdict
other than continue adds the conventions' ``gen_ai.guardrail.result`` event (component
``antiloop``, result type ``action``, value the verdict's action, rule the detector) and the
``antiloop.fingerprint``, ``antiloop.detector`` and ``antiloop.reason`` attributes. Arguments and
outputs (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``) only with content capture
on, redacted. A span joins the current OpenTelemetry span, else the ``TRACEPARENT`` of the
environment (W3C trace context, as Claude Code sets it for Bash).

The names follow the GenAI conventions, which now live in open-telemetry/semantic-conventions-genai
(``docs/gen-ai/gen-ai-guardrails.md``): a dedicated in-process guardrail emits
``gen_ai.guardrail.result`` (here a span event on the step's span, so it travels with the trace);
the ``apply_guardrail`` client span is for remote guardrail services, so none is made. The
provider-native result is kept as it is (``stop``, ``block``...), as the conventions ask.

This module imports OpenTelemetry only when telemetry is on: the hook path starts per call.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from antiloop.core.errors import ConfigError, MissingExtra
from antiloop.listener import Listener

if TYPE_CHECKING:
    from antiloop.core.step import Step
    from antiloop.core.verdict import Verdict

__all__ = [
    "CAPTURE_ENV",
    "TelemetryListener",
    "TelemetrySettings",
    "attach_from",
    "flush_all",
    "listener_for",
    "resource_attributes",
    "telemetry_settings",
]

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
COMPONENT = "antiloop"
_KEYS = ("enabled", "endpoint", "service_name", "capture_content", "timeout")
_PROTOCOLS = ("", "http/protobuf")
_CONTENT_KEPT = 8192  # characters of arguments or output a span keeps
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """The ``[telemetry]`` table, checked; None leaves a setting to the environment.

    Attributes:
        enabled: False turns telemetry off; True (or a table at all) turns it on.
        endpoint: the OTLP/HTTP base URL (``/v1/traces`` is added) or a full traces URL.
        service_name: the resource's ``service.name``.
        capture_content: record arguments and outputs (redacted).
        timeout: seconds an export may take.
    """

    enabled: bool | None = None
    endpoint: str | None = None
    service_name: str | None = None
    capture_content: bool | None = None
    timeout: float | None = None


def telemetry_settings(
    table: Mapping[str, Any] | None, source: str = "config"
) -> TelemetrySettings:
    """Check a ``[telemetry]`` table; a wrong key or value is a ConfigError naming it."""
    if table is None:
        return TelemetrySettings()
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: [telemetry] must be a table, not {table!r}")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _KEYS:
            from antiloop.core.text.suggest import unknown

            raise ConfigError(f"{source} [telemetry]: {unknown('key', key, _KEYS)}")
        if key in ("enabled", "capture_content") and not isinstance(value, bool):
            raise ConfigError(f"{source} [telemetry]: {key!r} must be true or false, not {value!r}")
        if key in ("endpoint", "service_name") and (not isinstance(value, str) or not value):
            raise ConfigError(f"{source} [telemetry]: {key!r} must be a non-empty string")
        if key == "endpoint" and not value.startswith(("http://", "https://")):
            raise ConfigError(
                f"{source} [telemetry]: 'endpoint' must be an http:// or https:// URL, "
                f"not {value!r}"
            )
        if key == "timeout" and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ConfigError(f"{source} [telemetry]: 'timeout' must be seconds > 0, not {value!r}")
        values[key] = float(value) if key == "timeout" else value
    return TelemetrySettings(**values)


def _wanted(env: Mapping[str, str], settings: TelemetrySettings, asked: bool) -> bool:
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return False
    exporters = (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower()
    if exporters and "otlp" not in {e.strip() for e in exporters.split(",")}:
        return False  # "none", or a console exporter only: no OTLP export of traces
    if settings.enabled is not None:
        return settings.enabled
    return asked or any(env.get(name) for name in ENDPOINT_ENVS)


def listener_for(
    env: Mapping[str, str] | None = None,
    table: Mapping[str, Any] | None = None,
    *,
    source: str = "config",
    timeout: float | None = None,
) -> TelemetryListener | None:
    """The telemetry listener the environment and ``[telemetry]`` ask for, or None.

    Args:
        env: the environment (``os.environ`` by default).
        table: the config's ``[telemetry]`` table, if it has one.
        source: the config file, for errors.
        timeout: at most this many seconds per export (the hook's deadline).

    Raises:
        ConfigError: a bad ``[telemetry]`` table, or an OTLP protocol other than http/protobuf
            when the config asked for telemetry without an endpoint of its own.
        MissingExtra: the config asked for telemetry and the ``otel`` extra is not installed.
    """
    env = os.environ if env is None else env
    settings = telemetry_settings(table, source)
    asked = table is not None
    if not _wanted(env, settings, asked):
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or ""
    )
    if settings.endpoint is None and protocol.strip().lower() not in _PROTOCOLS:
        if not asked:
            return None  # the host's own OTLP setup (gRPC, JSON): not ours to speak
        raise ConfigError(
            f"{source} [telemetry]: antiloop exports OTLP over HTTP (http/protobuf), "
            f"not OTEL_EXPORTER_OTLP_PROTOCOL={protocol}"
        )
    try:
        provider = _provider(env, settings, timeout)
    except ImportError as exc:
        if not asked:
            return None  # an OTLP environment meant for something else: no extra, no export
        raise MissingExtra("otel", exc.name or "opentelemetry", "[telemetry]") from exc
    capture = settings.capture_content
    if capture is None:
        capture = (env.get(CAPTURE_ENV) or "").strip().lower() in _TRUE
    return TelemetryListener(provider, capture_content=capture, traceparent=_host_parent(env))


class Listened(Protocol):
    """What ``attach_from`` attaches to: a guard, by its listeners (the guard imports us)."""

    listeners: list[Listener]


def attach_from(guard: Listened, path: str | None, env: Mapping[str, str] | None = None) -> bool:
    """Attach the listener to ``guard`` when the config file at ``path`` or ``env`` asks.

    Returns whether it was attached. ``antiloop serve`` uses this for its guard.
    """
    table: Mapping[str, Any] | None = None
    if path is not None:
        from antiloop.config import read_settings

        table = read_settings(path).tables.get("telemetry")
    listener = listener_for(env, table, source=path or "config")
    if listener is None:
        return False
    # the one a Guard took from the OTLP environment gives way to the config's settings
    guard.listeners[:] = [x for x in guard.listeners if not isinstance(x, TelemetryListener)]
    guard.listeners.append(listener)
    return True


def flush_all(timeout: float = 5.0) -> bool:
    """Export what every pipeline of this process holds; True when done within ``timeout``.

    A short-lived command (``antiloop check``) calls it before it exits; the SDK would also
    flush at exit, but then a collector that is down goes unsaid.
    """
    import time

    deadline = time.monotonic() + timeout
    with _LOCK:
        providers = list(_PIPELINES.values())
    done = True
    for provider in providers:
        left = max(0.0, deadline - time.monotonic())
        done = bool(provider.force_flush(int(left * 1000))) and done
    return done


# -- the SDK pipeline, one per process and endpoint -----------------------------------------

_PIPELINES: dict[tuple[object, ...], Any] = {}
_LOCK = threading.Lock()


def _traces_url(env: Mapping[str, str], settings: TelemetrySettings) -> str | None:
    """The traces URL: the config's, else the signal's own, else the base one + /v1/traces."""
    if settings.endpoint is not None:
        base = settings.endpoint.rstrip("/")
        return base if base.endswith("/v1/traces") else base + "/v1/traces"
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]  # used as given, as the SDK does
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
    return None  # the exporter's default, http://localhost:4318/v1/traces


def _provider(env: Mapping[str, str], settings: TelemetrySettings, timeout: float | None) -> Any:
    """This process's tracer provider for these settings (made once, then reused)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.util.re import parse_env_headers

    endpoint = _traces_url(env, settings)
    attributes = resource_attributes(env)
    name = (
        settings.service_name
        or env.get("OTEL_SERVICE_NAME")
        or attributes.get("service.name")
        or "antiloop"
    )
    attributes["service.name"] = name
    limit = settings.timeout
    if timeout is not None:
        limit = timeout if limit is None else min(limit, timeout)
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    headers = parse_env_headers(raw, liberal=True) if raw else None  # the given env's, not ours
    key = (
        endpoint,
        limit,
        tuple(sorted(attributes.items())),
        tuple(sorted((headers or {}).items())),
    )
    with _LOCK:
        provider = _PIPELINES.get(key)
        if provider is None:
            kw: dict[str, Any] = {"endpoint": endpoint, "headers": headers}
            if limit is not None:
                kw["timeout"] = limit
            provider = TracerProvider(resource=Resource.create(dict(attributes)))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(**kw)))
            _PIPELINES[key] = provider
    return provider


def resource_attributes(env: Mapping[str, str]) -> dict[str, str]:
    """``OTEL_RESOURCE_ATTRIBUTES`` of the given environment: ``key=value`` pairs, by commas.

    Values are percent-decoded, as the specification asks; a pair without ``=`` is skipped.

    Example:
        >>> resource_attributes({"OTEL_RESOURCE_ATTRIBUTES": "team=infra, note=a%2Cb"})
        {'team': 'infra', 'note': 'a,b'}
    """
    from urllib.parse import unquote

    found: dict[str, str] = {}
    for pair in (env.get("OTEL_RESOURCE_ATTRIBUTES") or "").split(","):
        key, eq, value = pair.partition("=")
        if eq and key.strip():
            found[key.strip()] = unquote(value.strip())
    return found


def _host_parent(env: Mapping[str, str]) -> Mapping[str, str] | None:
    """The W3C ``traceparent`` (and ``tracestate``) the host gave in the environment."""
    parent = (env.get("TRACEPARENT") or "").strip()
    if not parent:
        return None
    carrier = {"traceparent": parent}
    state = (env.get("TRACESTATE") or "").strip()
    if state:
        carrier["tracestate"] = state
    return carrier


def _content(value: Any) -> str:
    from antiloop.core.redact import redact_value

    clean = redact_value(value)
    text = clean if isinstance(clean, str) else json.dumps(clean, ensure_ascii=False, default=str)
    return text[:_CONTENT_KEPT]


class TelemetryListener(Listener):
    """Exports each recorded step as an ``execute_tool`` span, its verdict on it.

    Args:
        provider: an OpenTelemetry tracer provider (the SDK's, to flush it).
        capture_content: record arguments and outputs (redacted).
        traceparent: the host's W3C trace context (``traceparent``, ``tracestate``); the spans
            join it when no OpenTelemetry span is current.
    """

    def __init__(
        self,
        provider: Any,
        *,
        capture_content: bool = False,
        traceparent: Mapping[str, str] | None = None,
    ) -> None:
        from antiloop._version import __version__

        self.provider = provider
        self.tracer = provider.get_tracer("antiloop", __version__)
        self.capture_content = capture_content
        self._host = _host_context(traceparent) if traceparent else None

    def __repr__(self) -> str:
        return f"TelemetryListener(capture_content={self.capture_content})"

    def on_verdict(self, step: Step, verdict: Verdict) -> None:
        """One span for the step; the guardrail result on it when the verdict is not continue.

        Telemetry never changes a verdict: a failure here is logged, not raised.
        """
        try:
            self._span(step, verdict)
        except Exception as exc:
            import logging

            logging.getLogger("antiloop").warning("antiloop: telemetry span not made: %s", exc)

    def _span(self, step: Step, verdict: Verdict) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        parent = None
        if self._host is not None and not trace.get_current_span().get_span_context().is_valid:
            parent = self._host
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step.tool,
            "gen_ai.conversation.id": step.session,
            "gen_ai.agent.name": step.agent,
        }
        if step.id is not None:
            attributes["gen_ai.tool.call.id"] = step.id
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _content(dict(step.args))
            result = step.output if step.output is not None else step.error
            if result is not None:
                attributes["gen_ai.tool.call.result"] = _content(result)
        span = self.tracer.start_span(
            f"execute_tool {step.tool}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        try:
            if step.failed:
                span.set_attribute("error.type", "tool_error")
                code = f"exit code {step.exit_code}" if step.exit_code else "the tool failed"
                span.set_status(Status(StatusCode.ERROR, code))
            if verdict.action.wire != "continue":
                self._guardrail(span, verdict)
        finally:
            span.end()

    def _guardrail(self, span: Any, verdict: Verdict) -> None:
        ours = {
            "antiloop.action": verdict.action.wire,
            "antiloop.detector": verdict.detector or "",
            "antiloop.reason": verdict.reason,
        }
        if verdict.fingerprint:
            ours["antiloop.fingerprint"] = verdict.fingerprint
        span.set_attributes(ours)
        event = {
            "gen_ai.guardrail.component.name": COMPONENT,
            "gen_ai.guardrail.result.type": "action",
            "gen_ai.guardrail.result.value": verdict.action.wire,
            "gen_ai.guardrail.source": "tool_result",
            **ours,
        }
        if verdict.detector:
            event["gen_ai.guardrail.policy.rule.id"] = verdict.detector
        if verdict.outcome:
            event["gen_ai.guardrail.result.reason"] = verdict.outcome  # low-cardinality
        span.add_event("gen_ai.guardrail.result", event)

    def flush(self, timeout: float = 5.0) -> bool:
        """Export what is pending; True when it was done within ``timeout`` seconds."""
        flush = getattr(self.provider, "force_flush", None)
        return True if flush is None else bool(flush(int(timeout * 1000)))


def _host_context(carrier: Mapping[str, str]) -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(carrier=dict(carrier))
