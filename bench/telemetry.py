"""The cost of the OpenTelemetry export per step, against the same run without it.

The endpoint is a real OTLP/HTTP receiver in a process of its own (it decodes every export with
``opentelemetry.proto`` and counts the spans), so that its work does not share our interpreter.
Library: ``Guard.record`` over the same steps with no listener, with the export, and with the
export and content capture, interleaved; the time includes the final flush, so every span is
exported inside it. Hooks: a whole ``antiloop hook claude-code`` process per event, telemetry
off and on (the on process imports OpenTelemetry and exports its span before it exits).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PYTHON = sys.executable
ANTILOOP = str(Path(PYTHON).with_name("antiloop"))

SINK = r"""
import sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
count = [0]
lock = threading.Lock()
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        req = ExportTraceServiceRequest()
        req.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        n = sum(len(s.spans) for r in req.resource_spans for s in r.scope_spans)
        with lock:
            count[0] += n
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def do_GET(self):
        body = str(count[0]).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever(0.05)
"""


def _spans(url: str) -> int:
    with urllib.request.urlopen(url + "/count", timeout=5) as reply:  # noqa: S310 - loopback
        return int(reply.read())


def _steps(n: int) -> list[object]:
    from antiloop import Step

    out: list[object] = []
    for i in range(n):
        k = i if i % 10 else i - 1  # every tenth step repeats the one before: some verdicts fire
        out.append(
            Step(
                tool="Read",
                args={"file_path": f"src/file{k}.py"},
                output=f"line {k}\n" * 20,
                session=f"bench-{i // 50}",
                id=f"call-{i}",
            )
        )
    return out


def library(url: str, n: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds per step of ``Guard.record``: no listener, export, export with content."""
    from antiloop import Guard, GuardConfig
    from antiloop.telemetry import listener_for

    steps = _steps(n)
    config = GuardConfig(embedder="ngram", detectors=("repeat", "cycle", "fail-streak"))
    out: dict[str, list[float]] = {"off": [], "export": [], "export + content": []}
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": url}
    for _ in range(rounds):
        for name in out:
            listener = None
            if name != "off":
                capture = "true" if "content" in name else "false"
                listener = listener_for(
                    {**env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture}
                )
            guard = Guard(config=config, listeners=[listener] if listener else [])
            before = _spans(url)
            started = time.perf_counter()
            for step in steps:
                guard.record(step)  # type: ignore[arg-type]
            if listener is not None:
                assert listener.flush(30)
            took = time.perf_counter() - started
            if listener is not None:
                assert _spans(url) - before == n, "every step's span arrived"
            out[name].append(took / n * 1e6)
    return out


def _hook_payload(i: int) -> bytes:
    return json.dumps(
        {
            "session_id": "bench-hooks",
            "transcript_path": None,
            "cwd": "/home/dev/game",
            "permission_mode": "default",
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": f"/home/dev/game/src/file{i}.ts"},
            "tool_response": {"type": "text", "file": {"content": f"line {i}\n" * 20}},
            "tool_use_id": f"t{i}",
        }
    ).encode()


def _start_daemon(env: dict[str, str]) -> subprocess.Popen[bytes]:
    from antiloop._hook_client import socket_path

    path = socket_path(env)
    proc = subprocess.Popen(
        [PYTHON, "-m", "antiloop.hooks.daemon", "--socket", path],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not Path(path).exists():
        assert time.monotonic() < deadline, "the hook daemon did not start"
        time.sleep(0.05)
    return proc


def hooks(url: str, n: int, daemon: bool = False) -> dict[str, list[float]]:
    """Milliseconds of a whole hook process, telemetry off and on, interleaved.

    With ``daemon``, each setting has its hook daemon (the default way hooks run): the process
    hands the event over, and the daemon judges and exports.
    """
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTILOOP_", "OTEL_"))}
    store = tempfile.mkdtemp(prefix="antiloop-bench-otel-")
    base.update(ANTILOOP_STORE=f"sqlite:///{store}/antiloop.db", ANTILOOP_HOOKD="0")
    on = {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": url, "TRACEPARENT": f"00-{'a' * 32}-{'b' * 16}-01"}
    daemons: list[subprocess.Popen[bytes]] = []
    if daemon:
        for env, where in ((base, "off"), (on, "on")):
            env.update(ANTILOOP_HOOKD="1", ANTILOOP_HOOKD_DIR=f"{store}/run-{where}")
            daemons.append(_start_daemon(env))
    try:
        return _time_hooks(url, n, base, on)
    finally:
        from antiloop._hook_client import socket_path

        for env in (base, on):
            Path(socket_path(env)).unlink(missing_ok=True)  # its daemon then leaves
        for proc in daemons:
            proc.wait(15)


def _time_hooks(
    url: str, n: int, base: dict[str, str], on: dict[str, str]
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"off": [], "on": []}
    before = _spans(url)
    for i in range(n):
        for name, env in (("off", base), ("on", on)):
            started = time.perf_counter()
            proc = subprocess.run(
                [ANTILOOP, "hook", "claude-code"],
                input=_hook_payload(2 * i + (name == "on")),
                capture_output=True,
                env=env,
                check=False,
            )
            out[name].append((time.perf_counter() - started) * 1000)
            assert proc.returncode == 0, proc.stderr
            assert b"systemMessage" not in proc.stdout, proc.stdout
    assert _spans(url) - before == n, "every hook process exported its span"
    return out


def _q(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def run(quick: bool = False) -> str:
    """Measure and return the markdown section."""
    sink = subprocess.Popen(
        [PYTHON, "-c", SINK], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert sink.stdout is not None
        url = f"http://127.0.0.1:{int(sink.stdout.readline())}"
        n, rounds, processes = (1000, 3, 8) if quick else (2000, 5, 25)  # n < the SDK queue (2048)
        lib = library(url, n, rounds)
        hook = hooks(url, processes)
        hook_daemon = hooks(url, processes, daemon=True)
    finally:
        sink.terminate()
        sink.wait(10)
    off = statistics.median(lib["off"])
    lines = [
        "## Telemetry",
        "",
        "The OpenTelemetry export (`antiloop.telemetry`, the `otel` extra) against the same run "
        "without it. The endpoint is a real OTLP/HTTP receiver in its own process, decoding "
        "every export. Library: `Guard.record` over "
        f"{n} steps ({n // 50} sessions, every tenth step a repeat), {rounds} interleaved rounds, "
        "the final flush included (every span exported inside the time). Hooks: a whole "
        f"`antiloop hook claude-code` process per PostToolUse event, {processes} of each, "
        "interleaved; with telemetry on the process imports OpenTelemetry and exports its span "
        "before it exits (`TRACEPARENT` set: the span joins that trace). Through the daemon "
        "(the default): each setting has its own hook daemon, which imports OpenTelemetry once "
        "and exports each event's span before it answers.",
        "",
        "| run | per step (median) | slowest round | against off |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, samples in lib.items():
        med = statistics.median(samples)
        lines.append(
            f"| library, {name} | {med:.1f} µs | {max(samples):.1f} µs | "
            f"{'—' if name == 'off' else f'+{med - off:.1f} µs ({med / off:.2f}x)'} |"
        )
    for label, runs in (("hook process", hook), ("hook through the daemon", hook_daemon)):
        hook_off = _q(runs["off"])[0]
        for name, samples in runs.items():
            med, p95 = _q(samples)
            lines.append(
                f"| {label}, telemetry {name} | {med:.0f} ms | p95 {p95:.0f} ms | "
                f"{'—' if name == 'off' else f'+{med - hook_off:.0f} ms'} |"
            )
    lines += [
        "",
        "With telemetry off nothing of OpenTelemetry is imported on the hook path (the same "
        "modules as before the feature; `tests/test_telemetry.py` checks it); a down collector "
        "costs a hook process at most the 1 s export limit.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
