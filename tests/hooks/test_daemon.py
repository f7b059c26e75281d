"""The hook daemon: same answers as a hook process, started by the first hook, safe to lose."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from tests.hooks.conftest import ANTILOOP
from tests.hooks.payloads import ClaudeSession

from antiloop._hook_client import decode_reply, encode_request, private, socket_path
from antiloop.hooks.daemon import Daemon, _Sources, caller_env, decode_request
from antiloop.stores import open_store

# Runs the command line as the console script does, then says on stderr whether the engine was
# imported in this process (it is not when the daemon answered).
PROBE = (
    "import sys; from antiloop.cli import main; code = main();"
    "print('in-process' if 'antiloop.hooks.runner' in sys.modules else 'daemon', file=sys.stderr);"
    "sys.exit(code)"
)


@pytest.fixture
def denv(env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:
    """``env`` with the daemon on, its socket in a directory of this test; stopped after."""
    run = tmp_path / "run"
    daemon_env = {**env, "ANTILOOP_HOOKD": "1", "ANTILOOP_HOOKD_DIR": str(run)}
    yield daemon_env
    path = Path(socket_path(daemon_env))
    if path.exists():
        path.unlink()  # a daemon whose socket is gone exits within a second
    while STARTED:
        proc = STARTED.pop()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise


STARTED: list[subprocess.Popen[bytes]] = []


def probe(payload: dict[str, Any] | bytes, env: dict[str, str]) -> tuple[str, str, str]:
    """(stdout, who answered, stderr) of one ``antiloop hook claude-code``."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "hook", "claude-code"],
        input=data,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    *lines, who = proc.stderr.decode().strip().splitlines()
    return proc.stdout.decode(), who, "\n".join(lines)


def wait_for(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


def start_daemon(env: dict[str, str]) -> str:
    """Start the daemon as the first hook would, and wait until it listens."""
    path = socket_path(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "antiloop.hooks.daemon", "--socket", path],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    STARTED.append(proc)
    wait_for(lambda: Path(path).exists())
    return path


def test_the_first_hook_answers_itself_and_starts_the_daemon(
    denv: dict[str, str], tmp_path: Path
) -> None:
    """No daemon: the hook answers in its process and starts one; the next ones use it."""
    s = ClaudeSession("first", cwd=str(tmp_path))
    out, who, _ = probe(s.read(str(tmp_path / "a.py"), "same\n"), denv)
    assert (out, who) == ("", "in-process")
    wait_for(lambda: Path(socket_path(denv)).exists())
    out, who, _ = probe(s.read(str(tmp_path / "a.py"), "same\n"), denv)
    assert who == "daemon"
    answer = json.loads(out)
    assert answer["decision"] == "block"
    assert "AGENT::main::read::a.py::same" in answer["reason"]
    assert Path(socket_path(denv)).parent.stat().st_mode & 0o777 == 0o700


def test_the_daemon_gives_the_answers_a_hook_process_gives(
    denv: dict[str, str], env: dict[str, str], tmp_path: Path
) -> None:
    """The same script of events, once through the daemon and once in-process: same answers."""
    start_daemon(denv)

    def script(session: str) -> list[dict[str, Any]]:
        s = ClaudeSession(session, cwd=str(tmp_path))
        grep = {"pattern": "TODO", "path": "src"}
        return [
            s.prompt("Fix the login bug"),
            s.pre("Grep", grep),
            s.post("Grep", grep, {"mode": "content", "numFiles": 0, "content": ""}),
            s.pre("Grep", grep),
            s.post("Grep", grep, {"mode": "content", "numFiles": 0, "content": ""}),
            s.pre("Grep", grep),
            s.pre("Bash", {"command": "rm -rf build"}),
            s.read(str(tmp_path / "b.py"), "x\n"),
        ]

    through_daemon = []
    for payload in script("same-answers"):
        out, who, _ = probe(payload, denv)
        assert who == "daemon"
        through_daemon.append(out)
    in_process = []
    for payload in script("same-answers"):
        out, who, _ = probe(payload, {**env, "ANTILOOP_STORE": env["ANTILOOP_STORE"] + "2"})
        assert who == "in-process"
        in_process.append(out)
    assert through_daemon == in_process
    assert any('"permissionDecision": "deny"' in out for out in through_daemon)


def test_16_parallel_hooks_through_the_daemon_lose_no_step(
    denv: dict[str, str], tmp_path: Path
) -> None:
    """A tool batch: 16 PostToolUse at once on one session, every step counted."""
    start_daemon(denv)
    s = ClaudeSession("batch", cwd=str(tmp_path))
    payloads = [s.read(str(tmp_path / f"f{i}.py"), f"{i}\n") for i in range(16)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda p: probe(p, denv), payloads))
    assert all(who == "daemon" for _, who, _ in answers)
    assert all(out == "" for out, _, _ in answers)
    store = open_store(denv["ANTILOOP_STORE"])
    assert sum(state.steps for state in _states(store)) == 16


def _states(store: Any) -> list[Any]:
    return [store.peek(sid) for sid in store.sessions()]


def test_a_stale_answer_means_answered_in_process_and_judged_once(
    denv: dict[str, str], tmp_path: Path
) -> None:
    """Something on the socket that answers ``stale``: the hook judges the event itself."""
    with fake_daemon(denv, lambda request: b"stale\n") as seen:
        s = ClaudeSession("stale", cwd=str(tmp_path))
        assert probe(s.read(str(tmp_path / "a.py"), "x\n"), denv)[:2] == ("", "in-process")
        out, who, _ = probe(s.read(str(tmp_path / "a.py"), "x\n"), denv)
    assert who == "in-process"
    assert json.loads(out)["decision"] == "block"  # each step counted once: a repeat, not 3
    assert len(seen) == 2
    assert decode_request(seen[0])[0] == "claude-code"


def _hook(payload: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(ANTILOOP), "hook", "claude-code"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("fail", ["open", "closed"])
def test_an_event_the_daemon_took_and_dropped_is_judged_here_once(
    denv: dict[str, str], tmp_path: Path, fail: str
) -> None:
    """The daemon recorded the step, then hung up: the hook judges it again, counted once."""
    s = ClaudeSession("dropped", cwd=str(tmp_path))
    env = {**denv, "ANTILOOP_FAIL": fail}
    first = s.read(str(tmp_path / "a.py"), "x\n")
    assert spawned(first, {**env, "ANTILOOP_HOOKD": "0"}) == ""  # what the daemon recorded
    with fake_daemon(denv, lambda request: b"") as seen:
        proc = _hook(first, env)  # the same event, sent again: no answer from the daemon
    assert len(seen) == 1
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""  # judged here: the step id says it was recorded already
    assert b"closed the connection without an answer; judged in the hook's own process" in (
        proc.stderr
    )
    assert not Path(socket_path(denv)).exists()  # taken away: the next event starts a daemon
    store = open_store(denv["ANTILOOP_STORE"])
    try:
        assert store.peek("dropped").steps == 1
    finally:
        store.close()
    again = _hook(s.read(str(tmp_path / "a.py"), "x\n"), {**env, "ANTILOOP_HOOKD": "0"})
    assert json.loads(again.stdout)["decision"] == "block"  # the second call is the repeat


def spawned(payload: dict[str, Any], env: dict[str, str]) -> str:
    proc = _hook(payload, env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


def _daemon_pid(env: dict[str, str]) -> int:
    """The pid of the daemon answering on ``env``'s socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(socket_path(env))
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[:4], sys.byteorder)


def test_a_hung_daemon_costs_one_bounded_wait(denv: dict[str, str], tmp_path: Path) -> None:
    """A stopped daemon: one event waits ANTILOOP_HOOKD_WAIT, is judged here; the next is fast."""
    import signal

    env = {**denv, "ANTILOOP_HOOKD_WAIT": "0.5"}
    start_daemon(env)
    pid = _daemon_pid(env)
    s = ClaudeSession("hung", cwd=str(tmp_path))
    assert spawned(s.read(str(tmp_path / "a.py"), "x\n"), env) == ""
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        proc = _hook(s.read(str(tmp_path / "a.py"), "x\n"), env)
        took = time.monotonic() - started
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["decision"] == "block"  # judged, and a repeat
    assert b"no answer within 0.5 s; judged in the hook's own process" in proc.stderr
    assert took < 30  # one bounded wait, not the agent's timeout
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid))  # ended by the hook


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_a_socket_directory_open_to_others_is_not_trusted(
    denv: dict[str, str], tmp_path: Path
) -> None:
    """A socket in a directory others may write is never connected to."""
    run = Path(denv["ANTILOOP_HOOKD_DIR"])
    with fake_daemon(denv, lambda request: b'ok 0 12 0\n{"bad": 1}\n\n') as seen:
        run.chmod(0o777)
        assert not private(str(run))
        s = ClaudeSession("open", cwd=str(tmp_path))
        out, who, _ = probe(s.pre("Read", {"file_path": "/a"}), denv)
    assert who == "in-process"
    assert seen == []
    assert '"bad"' not in out
    assert run.stat().st_mode & 0o777 == 0o777  # refused, not repaired behind the user's back


def test_the_daemon_leaves_when_idle_or_when_its_socket_goes(tmp_path: Path) -> None:
    """Idle past its limit, or socket removed: ``serve_forever`` returns and cleans up."""
    run = tmp_path / "run"
    idle = Daemon(str(run / "idle.sock"), idle=0.5)
    assert idle.bind()
    started = time.monotonic()
    idle.serve_forever()
    assert time.monotonic() - started < 10
    assert not (run / "idle.sock").exists()

    gone = Daemon(str(run / "gone.sock"), idle=3600)
    assert gone.bind()
    worker = threading.Thread(target=gone.serve_forever)
    worker.start()
    (run / "gone.sock").unlink()
    worker.join(10)
    assert not worker.is_alive()


def test_a_second_daemon_does_not_take_a_live_socket(tmp_path: Path) -> None:
    """Two daemons started at once: the second sees the first answering and does not bind."""
    path = str(tmp_path / "run" / "one.sock")
    first = Daemon(path, idle=3600)
    assert first.bind()
    worker = threading.Thread(target=first.serve_forever)
    worker.start()
    try:
        assert not Daemon(path, idle=3600).bind()
    finally:
        first.retire()
        worker.join(10)
    assert not Path(path).exists()


def test_a_changed_source_file_is_noticed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgrade (a module file of antiloop changed on disk) makes the daemon stale."""
    source = tmp_path / "fake.py"
    source.write_text("x = 1\n")
    module = type(sys)("antiloop._fake_for_test")
    module.__file__ = str(source)
    monkeypatch.setitem(sys.modules, "antiloop._fake_for_test", module)
    sources = _Sources()
    assert not sources.changed()
    os.utime(source, ns=(1, 1))
    assert sources.changed()


def test_requests_round_trip() -> None:
    """Any bytes in the event, the environment and the paths come through unchanged."""
    event = b'{"x": "\x00 odd \xff bytes"}\n5:12:'
    env = [b"A=1", b"EMPTY=", b"WEIRD=a=b\xff", b"ANTILOOP_STORE=sqlite://rel/db"]
    raw = encode_request("gemini", "/etc/a.toml", "/home/u/p", env, event)
    agent, config, cwd, got_env, got_event = decode_request(raw)
    assert (agent, config, cwd, got_event) == ("gemini", "/etc/a.toml", "/home/u/p", event)
    assert got_env["EMPTY"] == ""
    assert got_env["WEIRD"] == os.fsdecode(b"a=b\xff")
    assert decode_request(encode_request("codex", "", "/", [], b""))[1] is None
    for bad in (b"", b"x\n", b"2\n3:abc", b"1\n9:antiloop", b"1\n3:abc"):
        with pytest.raises(ValueError, match=r"\w"):
            decode_request(bad)


def test_replies_are_read_strictly() -> None:
    """Only a whole ``ok`` reply is an answer; anything else is not."""
    assert decode_reply(b"ok 0 3 2\nabcde") == (0, b"abc", b"de")
    assert decode_reply(b"ok 2 0 0\n") == (2, b"", b"")
    assert decode_reply(b"...ok 0 1 0\nx") == (0, b"x", b"")  # signs of life, then the answer
    for bad in (
        b"stale\n",
        b"ok 0 3 2\nabcd",
        b"ok 0 3\nabc",
        b"ok x 1 1\nab",
        b"",
        b"ok 0 -1 1\na",
    ):
        assert decode_reply(bad) is None


def test_relative_paths_of_the_caller_are_made_absolute() -> None:
    """A relative store or config is the caller's, not the daemon's directory's."""
    env = caller_env(
        {"ANTILOOP_STORE": "sqlite://data/a.db", "ANTILOOP_CONFIG": "conf/antiloop.toml"},
        "/home/u/proj",
    )
    assert env["ANTILOOP_STORE"] == "sqlite:///home/u/proj/data/a.db"
    assert env["ANTILOOP_CONFIG"] == "/home/u/proj/conf/antiloop.toml"
    kept = {"ANTILOOP_STORE": "sqlite:///abs/a.db", "ANTILOOP_CONFIG": "/etc/a.toml"}
    assert caller_env(dict(kept), "/x") == kept
    redis = {"ANTILOOP_STORE": "redis://127.0.0.1:6379/0"}
    assert caller_env(dict(redis), "/x") == redis


class fake_daemon:  # a context manager, named like one made with contextlib
    """A socket at the daemon's path that answers each request with ``reply(request)``."""

    def __init__(self, env: dict[str, str], reply: Callable[[bytes], bytes]) -> None:
        self.path = Path(socket_path(env))
        self.reply = reply
        self.seen: list[bytes] = []
        self._stop = False

    def __enter__(self) -> list[bytes]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        return self.seen

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn, contextlib.suppress(OSError):  # a probe that hung up
                chunks = []
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
                request = b"".join(chunks)
                if request:  # a daemon starting only checks that something listens
                    self.seen.append(request)
                conn.sendall(self.reply(request))

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self.thread.join(5)
        self.listener.close()
        self.path.unlink(missing_ok=True)


def test_doctor_says_whether_the_daemon_runs(denv: dict[str, str]) -> None:
    """``antiloop doctor`` reports the daemon: off, not running (started later), running."""
    from antiloop.hooks.doctor import daemon_check

    off = daemon_check({**denv, "ANTILOOP_HOOKD": "0"})
    assert (off.ok, off.detail.startswith("off")) == (True, True)
    idle = daemon_check(denv)
    assert (idle.ok, idle.detail.startswith("not running")) == (True, True)
    start_daemon(denv)
    running = daemon_check(denv)
    assert (running.ok, running.detail) == (True, f"running, on {socket_path(denv)}")
    Path(denv["ANTILOOP_HOOKD_DIR"]).chmod(0o755)
    assert daemon_check(denv).ok is None


def _ask(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(path)
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_an_event_past_its_deadline_retires_the_daemon(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tmp_path: Path
) -> None:
    """The stuck event is answered as a hook process would; the daemon then takes no more."""
    import antiloop.hooks.handler as handler_module

    release = threading.Event()
    monkeypatch.setattr(
        handler_module.HookHandler, "handle", lambda self, event: release.wait() and None
    )
    daemon = Daemon(str(tmp_path / "run" / "d.sock"), idle=3600)
    assert daemon.bind()
    worker = threading.Thread(target=daemon.serve_forever)
    worker.start()
    try:
        payload = json.dumps(ClaudeSession("late").pre("Bash", {"command": "ls"})).encode()
        env_items = [
            f"{k}={v}".encode() for k, v in {**env, "ANTILOOP_HOOK_DEADLINE": "0.2"}.items()
        ]
        reply = decode_reply(
            _ask(daemon.path, encode_request("claude-code", "", "/", env_items, payload))
        )
        assert reply is not None
        code, out, _ = reply
        assert code == 0
        assert "deadline" in json.loads(out)["systemMessage"]
        worker.join(10)
        assert not worker.is_alive()
        assert daemon.abandoned
        assert not Path(daemon.path).exists()
    finally:
        release.set()
        daemon.retire()
        worker.join(10)


def in_removed_dir(gone: Path) -> list[str]:
    """A shell that enters ``gone``, removes it, then runs the rest of its arguments."""
    return ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$0" "$@"']


@pytest.mark.parametrize("daemon", [True, False])
def test_a_hook_whose_directory_was_removed_still_answers(
    denv: dict[str, str], tmp_path: Path, daemon: bool
) -> None:
    """The agent's directory is gone (deleted under it): the hook answers, exit 0."""
    env = denv if daemon else {**denv, "ANTILOOP_HOOKD": "0"}
    if daemon:
        start_daemon(denv)
    gone = tmp_path / "gone"
    gone.mkdir()
    s = ClaudeSession("gone", cwd=str(tmp_path))
    payloads = [s.read(str(tmp_path / "a.py"), "same\n") for _ in range(2)]
    outs = []
    for payload in payloads:
        gone.mkdir(exist_ok=True)
        proc = subprocess.run(
            [*in_removed_dir(gone), sys.executable, "-c", PROBE, "hook", "claude-code"],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        assert proc.stderr.decode().strip().splitlines()[-1] == (
            "daemon" if daemon else "in-process"
        )
        outs.append(proc.stdout.decode())
    assert outs[0] == ""
    assert json.loads(outs[1])["decision"] == "block"


def test_the_daemon_keeps_no_descriptor_of_the_agent(denv: dict[str, str], tmp_path: Path) -> None:
    """A pipe the agent passed to the first hook is not held open by the daemon it starts."""
    import select

    read_end, write_end = os.pipe()
    try:
        s = ClaudeSession("fds", cwd=str(tmp_path))
        proc = subprocess.run(
            [sys.executable, "-c", PROBE, "hook", "claude-code"],
            input=json.dumps(s.read(str(tmp_path / "a.py"), "x\n")).encode(),
            capture_output=True,
            env=denv,
            timeout=120,
            check=False,
            pass_fds=(write_end,),
        )
        assert proc.returncode == 0, proc.stderr.decode()
        wait_for(lambda: Path(socket_path(denv)).exists())  # the daemon is up
        os.close(write_end)
        write_end = -1
        ready, _, _ = select.select([read_end], [], [], 10)
        assert ready, "the pipe is still open in another process"
        assert os.read(read_end, 1) == b""  # EOF: nobody else holds it
    finally:
        os.close(read_end)
        if write_end != -1:
            os.close(write_end)


def test_the_socket_directory_and_its_missing_parents_are_private(tmp_path: Path) -> None:
    """Under umask 000, ``~/.antiloop`` made on the way to the socket directory is 0700 too."""
    from antiloop.hooks.daemon import make_private_dir

    run = tmp_path / "home" / ".antiloop" / "run"
    old = os.umask(0)
    try:
        make_private_dir(str(run))
    finally:
        os.umask(old)
    for directory in (run, run.parent, run.parent.parent):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
