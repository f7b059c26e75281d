"""A fleet under load for the failure-injection tests: `antiloop serve` replicas and a client.

Sessions go round-robin over the replicas; every step has an id and is sent again, to the
next replica, until a verdict that is no store failure answers it (as a host retrying a hook).
A third of the sessions loop (step ``LOOP_AT`` repeats the step before it, and must stop
there); the others read distinct files. Afterwards ``check`` compares every acknowledged
verdict with one in-process guard fed the same steps and reads the store: the state counts
each step once and the audit log holds each step exactly once, at its index, with its args.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.stores.faults import Tally

from antiloop import Guard, GuardConfig
from antiloop.core.step import step_from_dict

TOKEN = "fleet-token-7"  # noqa: S105 - the test replicas' token
LOOP_AT = 6
COMPARED = ("action", "detector", "fingerprint")
_RUNNING = re.compile(rb"Uvicorn running on http://[\d.]+:(\d+)")


@dataclass
class Replica:
    """One `antiloop serve` process; ``prefix`` runs it elsewhere (``ip netns exec NS``)."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL: no shutdown, requests in flight get no answer."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_replica(
    tmp: Path, *store: str, host: str = "127.0.0.1", prefix: Sequence[str] = ()
) -> Replica:
    """Start a replica on ``host``, port 0, and wait until it answers /healthz."""
    log = tmp / f"serve-{uuid.uuid4().hex[:8]}.log"
    env = {"ANTILOOP_TOKEN": TOKEN, "PATH": "/usr/bin:/bin", "CI": ""}
    import os

    env = {**os.environ, **env}
    argv = [*prefix, sys.executable, "-m", "antiloop", "serve", "--host", host, "--port", "0"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*argv, "--log-level", "info", *store], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    deadline = time.monotonic() + 60  # a start-up limit, not a timed assertion
    while True:
        if process.poll() is not None:
            raise AssertionError(f"antiloop serve exited: {log.read_text()}")
        found = _RUNNING.search(log.read_bytes())
        if found:
            url = f"http://{host}:{int(found[1])}"
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=1):  # noqa: S310
                    return Replica(url, process, log)
            except OSError:
                pass
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"antiloop serve did not start: {log.read_text()}")
        time.sleep(0.05)


def step(s: int, n: int) -> dict[str, Any]:
    """Step ``n`` of session ``s``: a third of the sessions repeat step ``LOOP_AT - 1``."""
    k = LOOP_AT - 1 if s % 3 == 0 and n == LOOP_AT else n
    return {
        "session": f"fl{s}",
        "tool": "Read",
        "args": {"path": f"f{k}"},
        "output": f"contents {k}",
        "id": f"fl{s}-{n}",
    }


def _failed(answer: dict[str, Any]) -> bool:
    return answer.get("detector") == "store" or str(answer.get("reason", "")).startswith(
        "unguarded"
    )


@dataclass
class Load:
    """The client: ``workers`` threads, each its share of the sessions, step by step."""

    urls: list[str]
    sessions: int = 24
    steps: int = 12
    workers: int = 4
    pace: float = 0.01
    give_up: float = 90.0
    #: run first in each worker thread (``netns.enter``: the client inside a namespace)
    setup: Callable[[], None] = lambda: None
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: send a step answered by a store failure again (False: take the answer, as an agent does)
    retry_unguarded: bool = True
    failures: int = 0  # store failures and replicas that did not answer, all retried
    unguarded: int = 0  # store-failure answers taken (retry_unguarded=False)
    waits: list[float] = field(default_factory=list)  # seconds from first send to its answer
    acked: list[tuple[str, float]] = field(default_factory=list)  # (replica, when)
    done_steps: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def length(self, s: int) -> int:
        return LOOP_AT + 1 if s % 3 == 0 else self.steps

    def total(self) -> int:
        return sum(self.length(s) for s in range(self.sessions))

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any] | None:
        request = urllib.request.Request(  # noqa: S310 - plain HTTP to the replicas
            f"{url}/v1/steps",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except (OSError, urllib.error.HTTPError, ValueError):
            return None  # killed, cut off or refused: sent again elsewhere

    def _work(self, w: int) -> None:
        self.setup()
        mine = range(w, self.sessions, self.workers)
        for s in mine:
            self.sent[f"fl{s}"], self.answers[f"fl{s}"] = [], []
        for n in range(max(self.length(s) for s in mine)):
            for s in mine:
                if n >= self.length(s):
                    continue
                body = step(s, n)
                started, r = time.monotonic(), s + n
                while True:
                    url = self.urls[r % len(self.urls)]
                    answer = self._post(url, body)
                    if answer is not None and not _failed(answer):
                        break
                    if answer is not None and not self.retry_unguarded:
                        with self._lock:
                            self.unguarded += 1
                        break
                    with self._lock:
                        self.failures += 1
                    if time.monotonic() - started > self.give_up:
                        raise AssertionError(f"step {body['id']} was never acknowledged")
                    r += 1
                    time.sleep(0.05)
                self.sent[body["session"]].append(body)
                self.answers[body["session"]].append(answer)
                with self._lock:
                    self.done_steps += 1
                    self.acked.append((url, time.monotonic()))
                    self.waits.append(time.monotonic() - started)
                time.sleep(self.pace)

    def run(self, fault: Callable[[Load], None]) -> None:
        """Run the load with ``fault(self)`` in this thread meanwhile; wait for the load."""
        errors: list[BaseException] = []

        def guarded(w: int) -> None:
            try:
                self._work(w)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=guarded, args=(w,)) for w in range(self.workers)]
        for t in threads:
            t.start()
        try:
            fault(self)
        finally:
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        assert self.done_steps == self.total()

    def wait_for(self, fraction: float) -> None:
        """Block until that fraction of the steps is acknowledged (the fault falls mid-load)."""
        deadline = time.monotonic() + 120  # a limit for a stuck load, not a timed assertion
        while self.done_steps < fraction * self.total():
            assert time.monotonic() < deadline, f"the load stalled at {self.done_steps} steps"
            time.sleep(0.01)

    def check(self, store: Any) -> Tally:
        """Compare with one in-process guard and count what the store kept (``faults.Tally``).

        ``missed``: acknowledged verdicts that differ from the in-process guard's (a stop
        missed, or a false one); ``lost``: acknowledged steps with no record at their index
        or not counted by the state; ``doubled``: steps recorded more than once.
        """
        result = Tally()
        reference = Guard(config=GuardConfig(embedder="ngram"))
        for session, sent in sorted(self.sent.items()):
            records = [r for r in store.audit_records(session) if r.kind == "step"]
            by_index: dict[int, list[Any]] = {}
            for r in records:
                by_index.setdefault(r.index, []).append(r)
            state = store.peek(session)
            counted = 0 if state is None else state.steps
            for n, (body, answer) in enumerate(zip(sent, self.answers[session], strict=True)):
                want = reference.record(step_from_dict(dict(body))).to_wire(0)
                result.steps += 1
                result.acknowledged += 1
                result.missed += [answer[f] for f in COMPARED] != [want[f] for f in COMPARED]
                kept = [r for r in by_index.get(n, []) if json.loads(r.args) == body["args"]]
                result.lost += not kept or counted <= n
                result.doubled += max(len(kept) - 1, 0)
            result.doubled += sum(1 for r in records if r.index >= len(sent))
            result.doubled += max(counted - len(sent), 0)
        return result
