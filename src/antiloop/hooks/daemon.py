"""The hook daemon: answers ``antiloop hook`` events on a Unix socket, the engine imported once.

A hook process per tool call spends most of its time importing the engine (bench/RESULTS.md).
The first ``antiloop hook`` that finds no daemon answers its event itself and starts one in
the background; later ones hand their event over (``antiloop._hook_client``) and print the
answer. The daemon judges with exactly the code a hook process runs (``run_hook``), with the
caller's environment and directory, so its answers are the same; it is only faster.

* One daemon per user, interpreter and installation: the socket is
  ``~/.antiloop/run/hookd-<tag>.sock`` (``ANTILOOP_HOOKD_DIR`` moves it) in a directory only
  the user may enter; ``ANTILOOP_HOOKD=0`` turns the daemon off.
* It exits after 15 minutes without events (``ANTILOOP_HOOKD_IDLE`` seconds), when its socket
  is removed or taken over, and when a source file of the antiloop it runs changes (an
  upgrade): the event that notices is answered ``stale`` and judged by its own process.
* An event that runs past its deadline is answered as in a hook process (fail-safe); the
  daemon then stops taking events, answers those it has, and exits, since the unfinished work
  may hold a lock, as a hook process would.
* Everything slow happens before it listens: the engine's imports, the store of the
  environment it was started with (``antiloop.hooks.pool``: stores stay open, one per URL) and
  the default embedder's model. An event never waits for them; until the daemon listens, hooks
  answer in their own process.
* ``antiloop install`` and ``antiloop doctor`` start it, as does the first hook event that
  finds none.

    python -m antiloop.hooks.daemon --socket PATH [--idle SECONDS]
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping

from antiloop._hook_client import ALIVE, PROTOCOL, socket_dir, socket_path
from antiloop.hooks.pool import StorePool

# The same os-level paths as antiloop._hook_client, the caller's side.

__all__ = ["Daemon", "decode_request", "ensure_running", "start_in_background", "warm_up"]

IDLE_SECONDS = 900.0
_STARTING_GRACE = 10.0  # a start marker younger than this means another process is starting it
_READ_LIMIT = 64 * 1024 * 1024


def start_in_background(env: Mapping[str, str] | None = None) -> bool:
    """Start this installation's daemon unless it is off or being started; never raises."""
    env = os.environ if env is None else env
    from antiloop._hook_client import enabled

    if not enabled(env):
        return False
    try:
        path = socket_path(env)
        if len(os.fsencode(path)) > 100:
            return False
        make_private_dir(socket_dir(env))
        if not _claim(path + ".starting"):
            return False
        devnull = os.devnull
        os.posix_spawn(  # no Popen left behind to warn that it was not waited for
            sys.executable,
            [sys.executable, "-m", "antiloop.hooks.daemon", "--socket", path],
            dict(env),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, devnull, os.O_WRONLY, 0),
                # No pipe of the agent's stays open in the daemon (it waits for their EOF).
                *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited_fds()),
            ],
            setsid=True,
        )
        return True
    except Exception:  # the hook has answered; a daemon is only a speed-up
        return False


def ensure_running(env: Mapping[str, str] | None = None, wait: float = 20.0) -> str:
    """Start this installation's daemon unless it runs; wait until it answers (``install``).

    Returns one line for the person: where it runs, or why it does not (the first hook event
    then starts it).
    """
    env = os.environ if env is None else env
    from antiloop._hook_client import enabled

    if not enabled(env):
        return "the hook daemon is off (ANTILOOP_HOOKD=0): each event is judged in its process"
    path = socket_path(env)
    if answers(path):
        return f"the hook daemon runs, on {path}"
    if not start_in_background(env) and not os.path.exists(path + ".starting"):
        return f"the hook daemon could not be started; the first hook event starts it ({path})"
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if answers(path):
            return f"the hook daemon runs, on {path}"
        time.sleep(0.05)
    return f"the hook daemon is still starting; the first hook event uses it once ready ({path})"


def _inherited_fds() -> list[int]:
    """The descriptors above 2 that a spawned process would inherit."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        try:
            names = os.listdir("/dev/fd")
        except OSError:
            return []
    found = []
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:
                continue  # the directory listing's own descriptor, closed by now
    return found


def _claim(marker: str) -> bool:
    """Create ``marker``; False when another process made it less than a few seconds ago."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(marker).st_mtime < _STARTING_GRACE:
                return False
            os.utime(marker)
            return True
        except OSError:
            return False


def make_private_dir(directory: str) -> None:
    """Create ``directory`` for this user only; an existing one must be the user's and closed.

    An existing directory that others may enter is refused, not repaired: a socket someone
    else put there before would be trusted afterwards.
    """
    from antiloop._files import make_private_dirs

    make_private_dirs(directory)  # and ~/.antiloop above it, if it is missing: 0700 too
    info = os.stat(directory)
    if info.st_uid != os.getuid():
        raise PermissionError(f"{directory} belongs to another user")
    if info.st_mode & 0o077:
        raise PermissionError(f"{directory} is open to other users (chmod 700 it)")


def decode_request(raw: bytes) -> tuple[str, str | None, str, dict[str, str], bytes]:
    """``(agent, config, cwd, env, event)`` from a request; ValueError if it is not one."""
    count_text, newline, rest = raw.partition(b"\n")
    if not newline or not count_text.isdigit():
        raise ValueError("no field count")
    fields: list[bytes] = []
    at = 0
    for _ in range(int(count_text)):
        colon = rest.index(b":", at)
        size = int(rest[at:colon])
        start = colon + 1
        if size < 0 or start + size > len(rest):
            raise ValueError("a field runs past the end")
        fields.append(rest[start : start + size])
        at = start + size
    if len(fields) < 4 or fields[0] != PROTOCOL:
        raise ValueError("not this protocol")
    env: dict[str, str] = {}
    for item in fields[4:]:
        key, equals, value = item.partition(b"=")
        if equals:
            env[os.fsdecode(key)] = os.fsdecode(value)
    config = fields[2].decode()
    return fields[1].decode(), config or None, os.fsdecode(fields[3]), env, rest[at:]


def caller_env(env: dict[str, str], cwd: str) -> dict[str, str]:
    """The caller's environment with paths relative to its directory made absolute."""
    named = env.get("ANTILOOP_CONFIG")
    if named and not os.path.isabs(os.path.expanduser(named)):
        env["ANTILOOP_CONFIG"] = os.path.join(cwd, named)
    store = env.get("ANTILOOP_STORE", "")
    if store.startswith("sqlite:") and not store.startswith(("sqlite:///", "sqlite://~")):
        rest = store.split("://", 1)[1] if "://" in store else store.split(":", 1)[1]
        if rest and not rest.startswith(("/", "~")):
            env["ANTILOOP_STORE"] = "sqlite:///" + os.path.join(cwd, rest).lstrip("/")
    return env


class _Sources:
    """The mtimes of the antiloop modules this process runs, to notice an upgrade."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self.changed()

    def changed(self) -> bool:
        for name, module in list(sys.modules.items()):
            if name != "antiloop" and not name.startswith("antiloop."):
                continue
            path = getattr(module, "__file__", None)
            if not path:
                continue
            try:
                mtime = os.stat(path).st_mtime_ns
            except OSError:
                return True
            if self._seen.setdefault(path, mtime) != mtime:
                return True
        return False


class Daemon:
    """Accepts connections on ``path`` and answers each in a thread of its own."""

    def __init__(
        self, path: str, idle: float = IDLE_SECONDS, pool: StorePool | None = None
    ) -> None:
        self.path = path
        self.pool = StorePool() if pool is None else pool
        self.idle = idle
        self.last = time.monotonic()
        self._sources = _Sources()
        self._stop = threading.Event()
        self._active: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._inode = -1
        self.abandoned = False  # an event ran past its deadline: its work is left running

    def bind(self) -> bool:
        """Listen on ``path``; False if a live daemon already answers there."""
        make_private_dir(os.path.dirname(self.path))
        if answers(self.path):
            return False
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(temporary)
        os.chmod(temporary, 0o600)
        listener.listen(128)
        os.replace(temporary, self.path)  # atomic: a caller sees the old socket or this one
        self._inode = os.stat(self.path).st_ino
        listener.settimeout(1.0)
        self._listener = listener
        return True

    def serve_forever(self) -> None:
        """Answer until idle, retired, or the socket is no longer ours."""
        listener = self._listener
        if listener is None:
            raise RuntimeError("bind() first")
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    if not self._ours() or self._idle():
                        break
                    continue
                except OSError:
                    break
                self.last = time.monotonic()
                worker = threading.Thread(target=self._serve, args=(conn,), daemon=True)
                with self._lock:
                    self._active.add(worker)
                worker.start()
        finally:
            self.retire()
            listener.close()
            for worker in list(self._active):
                worker.join(60)
            if not self.abandoned:  # overrun work may still use a store
                self.pool.close()

    def _idle(self) -> bool:
        with self._lock:
            busy = bool(self._active)
        return not busy and time.monotonic() - self.last > self.idle

    def _ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self._inode
        except OSError:
            return False

    def retire(self) -> None:
        """Stop taking events: the socket goes (if still ours), the next hook starts afresh."""
        self._stop.set()
        if self._ours():
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def _serve(self, conn: socket.socket) -> None:
        alive = _Alive(conn)
        try:
            with conn:
                self._answer(alive)
        except Exception:  # noqa: S110 - a caller that went away; nothing to tell it
            pass
        finally:
            alive.stop()
            with self._lock:
                self._active.discard(threading.current_thread())
                self.last = time.monotonic()

    def _answer(self, alive: _Alive) -> None:
        conn = alive.conn
        conn.settimeout(30.0)
        raw = _read_all(conn)
        try:
            agent, config, cwd, env, event = decode_request(raw)
        except (ValueError, UnicodeDecodeError):
            alive.send(b"stale\n")  # not judged: the caller answers it itself
            return
        if self._stop.is_set() or self._sources.changed():
            self.retire()
            alive.send(b"stale\n")
            return
        from antiloop.hooks.runner import run_hook

        env = caller_env(env, cwd)
        store = self.pool.get(env)
        answer = run_hook(agent, event, env=env, config_path=config, store=store)
        if answer.failed and store is not None:
            self.pool.drop(env)  # the next event opens it afresh
        out, err = answer.stdout.encode(), answer.stderr.encode()
        alive.send(b"ok %d %d %d\n" % (answer.code, len(out), len(err)) + out + err)
        if not answer.finished:
            # The unfinished work may hold a lock: leave, as a hook process would, once the
            # events already taken are answered (``main`` then exits without waiting for it).
            self.abandoned = True
            self.retire()


class _Alive:
    """Sends the caller a sign of life (``ALIVE``) every half second until the answer.

    The caller takes a daemon silent for ``ANTILOOP_HOOKD_WAIT`` seconds for a hung one and
    judges the event itself; a daemon that is only slow (a loaded machine, a lock another
    process holds) says so, and answers by the event's deadline as a hook process would.
    """

    EVERY = 0.5

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._done.wait(self.EVERY):
            with self._lock:
                if self._done.is_set():
                    return
                try:
                    self.conn.sendall(ALIVE)
                except OSError:
                    return

    def send(self, data: bytes) -> None:
        """The answer: the last thing sent."""
        with self._lock:
            self._done.set()
            self.conn.sendall(data)

    def stop(self) -> None:
        """No more signs of life (the answer was sent, or the caller went away)."""
        with self._lock:
            self._done.set()


def _read_all(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := conn.recv(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > _READ_LIMIT:
            raise ValueError("request too large")
    return b"".join(chunks)


def answers(path: str) -> bool:
    """Whether something listens on ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m antiloop.hooks.daemon --socket PATH [--idle SECONDS]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m antiloop.hooks.daemon")
    parser.add_argument("--socket", required=True, help="the Unix socket to answer on")
    parser.add_argument("--idle", type=float, help="seconds without events before exiting")
    ns = parser.parse_args(argv)
    idle = ns.idle
    if idle is None:
        try:
            idle = float(os.environ.get("ANTILOOP_HOOKD_IDLE") or IDLE_SECONDS)
        except ValueError:
            idle = IDLE_SECONDS
    from antiloop.embed import share_embedders

    with contextlib.suppress(OSError):
        os.chdir(os.path.dirname(ns.socket))  # hold no caller's directory
    share_embedders()
    daemon = Daemon(ns.socket, idle)
    try:
        warm_up(daemon.pool, os.environ)
        bound = daemon.bind()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(ns.socket + ".starting")
    if bound:
        daemon.serve_forever()
        if daemon.abandoned:
            os._exit(0)  # do not wait for the overrun work, nor let it keep a lock
    return 0


def warm_up(pool: StorePool, env: Mapping[str, str]) -> None:
    """Before listening: import what every event needs, open the store, load the model.

    Nothing here may keep the daemon from starting: a store that cannot be opened is opened
    (and its error reported) by the events; a model that cannot be loaded is the events' too.
    """
    import antiloop.hooks.handler
    import antiloop.hooks.render
    import antiloop.hooks.runner  # noqa: F401

    pool.get(env)
    if env.get("ANTILOOP_HOOKD_MODEL", "1").strip().lower() in ("0", "off", "no", "false"):
        return
    try:
        from antiloop.embed import get_embedder
        from antiloop.hooks.config import HookConfig

        get_embedder(HookConfig().guard_config().embedder).embed(["antiloop"])
    except Exception:  # noqa: S110 - the first Stop loads it, and reports what went wrong
        pass


if __name__ == "__main__":
    raise SystemExit(main())
