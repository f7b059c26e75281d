"""The hook's short way: hand the event to the hook daemon, importing almost nothing.

Each tool call of a coding agent starts ``antiloop hook <agent>`` as a new process. Importing
the engine costs that process tens of milliseconds, so the command first tries the hook
daemon (``antiloop.hooks.daemon``), a process of the same user and installation that keeps
the engine imported and answers on a Unix socket. This module needs only ``os``, ``sys`` and
``_socket``; anything unexpected before the event is handed over means "answer in this process
instead", so the daemon can only make the hook faster, never change its answer.

``ANTILOOP_HOOKD=0`` turns the daemon off; ``ANTILOOP_HOOKD_DIR`` moves its socket (default
``~/.antiloop/run``, a directory only the user may enter).

The daemon says it is alive while it works on an event (a ``.`` every half second, before the
answer). A daemon silent for ``ANTILOOP_HOOKD_WAIT`` seconds (2 by default), or that closes the
connection without an answer, costs that one wait: the hook takes its socket away
(and ends it, when it is this user's hook daemon), judges the event in its own process, and
the next event starts a new daemon. Judging an event again cannot count it twice: a step is
recorded under its id (the agent's tool call id), and a step already recorded under that id is
answered as it was the first time.

The native client (``antiloop-hook``, ``src/antiloop/hooks/native``) does the same in C and
runs this module's command when it cannot.
"""

from __future__ import annotations

import os
import sys

# os.path on purpose: pathlib imports urllib and ipaddress (milliseconds per hook call).
TYPE_CHECKING = False  # typing's constant, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL = b"antiloop-hookd/1"
"""The first field of every request; a daemon that does not know it answers ``stale``."""

_OFF = ("0", "off", "no", "false")
_SOCKET_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
_DEFAULT_WAIT = 2.0  # seconds of silence from the daemon before the event is judged here
_LONGEST = 25.0  # seconds for the whole answer: below the 30 s timeout the installers give
ALIVE = b"."
"""What the daemon sends while it works on an event (before the answer, any number of times)."""
_KILL = 9  # SIGKILL, without importing signal


def enabled(env: Mapping[str, str]) -> bool:
    """Whether the daemon may be used (``ANTILOOP_HOOKD`` is not 0/off/no/false)."""
    return env.get("ANTILOOP_HOOKD", "1").strip().lower() not in _OFF


def socket_dir(env: Mapping[str, str]) -> str:
    """The directory of the daemon's socket."""
    named = env.get("ANTILOOP_HOOKD_DIR")
    if named:
        return os.path.abspath(os.path.expanduser(named))
    return os.path.join(os.path.expanduser("~"), ".antiloop", "run")


def socket_path(env: Mapping[str, str]) -> str:
    """The socket of this installation's daemon: one per scripts directory and ``PYTHONPATH``.

    The directory of the interpreter (a venv's ``bin``), where the ``antiloop`` and
    ``antiloop-hook`` scripts of the installation live too, so that the native client, which
    knows only its own place, names the same socket; ``python`` and ``python3`` of one venv
    share it. ``PYTHONPATH`` is part of the name: another source tree is another daemon.
    """
    return os.path.join(socket_dir(env), f"hookd-{_tag(installation_key(env))}.sock")


def installation_key(env: Mapping[str, str]) -> str:
    """What names this installation's daemon (the native client computes the same)."""
    scripts = os.path.realpath(os.path.dirname(sys.executable))
    return scripts + chr(0) + env.get("PYTHONPATH", "")


def _tag(text: str) -> str:
    """FNV-1a, 32 bits, in hex: a stable short name (``hash()`` changes per process)."""
    value = 0x811C9DC5
    for byte in text.encode("utf-8", "surrogateescape"):
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"


def private(directory: str) -> bool:
    """Whether ``directory`` is this user's and closed to others (else the socket is not used)."""
    try:
        info = os.stat(directory)
    except OSError:
        return False
    return info.st_uid == os.getuid() and info.st_mode & 0o077 == 0


def encode_request(agent: str, config: str, cwd: str, env: list[bytes], data: bytes) -> bytes:
    """The request: a count line, then length-prefixed fields, then the event's bytes."""
    fields = [PROTOCOL, agent.encode(), config.encode(), os.fsencode(cwd), *env]
    parts = [str(len(fields)).encode(), b"\n"]
    for field in fields:
        parts += [str(len(field)).encode(), b":", field]
    parts.append(data)
    return b"".join(parts)


def decode_reply(reply: bytes) -> tuple[int, bytes, bytes] | None:
    """``ok CODE OUT ERR`` and the two bodies; None for anything else (``stale``, garbage).

    The daemon's signs of life (``ALIVE``) before the answer are skipped.
    """
    head, newline, body = reply.lstrip(ALIVE).partition(b"\n")
    words = head.split(b" ")
    if not newline or len(words) != 4 or words[0] != b"ok":
        return None
    try:
        code, out, err = int(words[1]), int(words[2]), int(words[3])
    except ValueError:
        return None
    if out < 0 or err < 0 or out + err != len(body):
        return None
    return code, body[:out], body[out:]


class Asked:
    """What :func:`answer_by_daemon` did: ``code`` set when the daemon answered.

    ``data`` is the event when it was read from stdin (the fallback must not read again);
    ``start`` says the daemon is not running and may be started; ``problem`` says why a
    daemon that took the event gave no answer (the event is then judged here all the same).
    """

    __slots__ = ("code", "data", "problem", "start")

    def __init__(
        self,
        code: int | None = None,
        data: bytes | None = None,
        start: bool = False,
        problem: str | None = None,
    ):
        self.code, self.data, self.start, self.problem = code, data, start, problem


def answer_by_daemon(agent: str, config: str | None) -> Asked:
    """Answer the event on stdin through the daemon, printing what it answered."""
    env = os.environ
    if not enabled(env):
        return Asked()
    data = read_stdin()
    try:
        return _hand_over(agent, config, env, data)
    except Exception:  # anything unexpected before the event was handed over: answer here
        return Asked(data=data)


def handed_on() -> Asked | None:
    """The event handed on by the native client after its daemon failed it, else None.

    ``antiloop-hook`` sets ``ANTILOOP_HOOKD_PROBLEM`` when the daemon took the event and gave
    no answer (it has taken that daemon out of the way): the event is judged in this process,
    and a new daemon started, without asking the daemon again.
    """
    problem = os.environ.pop("ANTILOOP_HOOKD_PROBLEM", None)
    if not problem:
        return None
    return Asked(data=read_stdin(), start=enabled(os.environ), problem=problem)


def read_stdin() -> bytes:
    """The event on stdin; empty when there is none or it cannot be read (an answer says so)."""
    stdin = sys.stdin
    try:
        return b"" if stdin is None or stdin.isatty() else stdin.buffer.read()
    except (OSError, ValueError):
        return b""


def _hand_over(agent: str, config: str | None, env: Mapping[str, str], data: bytes) -> Asked:
    directory = socket_dir(env)
    path = socket_path(env)
    if len(os.fsencode(path)) > _SOCKET_MAX:
        return Asked(data=data)
    if not private(directory):
        return Asked(data=data, start=True)
    import _socket

    wait = _wait(env)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(wait)
        try:
            inode = os.stat(path).st_ino
            sock.connect(path)
        except OSError:
            return Asked(data=data, start=True)
        cwd = _cwd(env)
        if config is not None:
            config = os.path.join(cwd, os.path.expanduser(config))
        environment = [key + b"=" + value for key, value in os.environb.items()]
        request = encode_request(agent, config or "", cwd, environment, data)
        raw = b""
        problem = None
        try:
            sock.sendall(request)
            sock.shutdown(_socket.SHUT_WR)
            raw = _receive(sock, wait)
        except TimeoutError:
            problem = f"the hook daemon gave no answer within {wait:g} s"
        except OSError as exc:
            problem = f"the hook daemon's connection failed ({exc})"
        if problem is None and not raw:
            problem = "the hook daemon closed the connection without an answer"
        if problem is not None:
            retire(path, inode, _peer(sock))
            return Asked(data=data, start=True, problem=problem)
    finally:
        sock.close()
    reply = decode_reply(raw)
    if reply is None:
        if raw[:5] == b"stale":  # an older daemon, on its way out: it did not judge the event
            return Asked(data=data, start=True)
        retire(path, inode, None)
        problem = "the hook daemon's answer could not be read"
        return Asked(data=data, start=True, problem=problem)
    code, out, err = reply
    _write(sys.stdout, out)
    _write(sys.stderr, err)
    return Asked(code=code)


def _receive(sock: object, wait: float) -> bytes:
    """The daemon's answer, its signs of life taken off.

    Raises:
        TimeoutError: ``wait`` seconds of silence, or ``_LONGEST`` in all.
    """
    import time

    chunks = []
    give_up = time.monotonic() + _LONGEST
    while True:
        left = give_up - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(min(wait, left))  # type: ignore[attr-defined]
        chunk = sock.recv(65536)  # type: ignore[attr-defined]
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).lstrip(ALIVE)


def _peer(sock: object) -> int | None:
    """The pid of the process at the other end of a Unix socket (Linux), else None."""
    import _socket

    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(_socket.SOL_SOCKET, option, 12)  # type: ignore[attr-defined]
    except OSError:
        return None
    pid = int.from_bytes(raw[:4], sys.byteorder)
    return pid if pid > 0 else None


def retire(path: str, inode: int, pid: int | None) -> None:
    """Take a daemon that failed an event out of the way: its socket goes, it is ended.

    The socket is removed only if it is still the one connected to (``inode``), so a newer
    daemon's is left alone; the process is killed only if it is a hook daemon of this user
    (its command line says so), so that a lock it may hold is released now. Never raises.
    """
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass
    if pid is None or pid == os.getpid():
        return
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        if b"antiloop.hooks.daemon" in argv and os.stat(f"/proc/{pid}").st_uid == os.getuid():
            os.kill(pid, _KILL)
    except OSError:
        pass


def _cwd(env: Mapping[str, str]) -> str:
    """This process's directory (``$PWD``, or ``/``, if it was removed)."""
    try:
        return os.getcwd()
    except OSError:
        return env.get("PWD") or "/"


def _wait(env: Mapping[str, str]) -> float:
    """Seconds the daemon has to answer (``ANTILOOP_HOOKD_WAIT``, 2 by default)."""
    raw = env.get("ANTILOOP_HOOKD_WAIT")
    if raw:
        try:
            return min(max(float(raw), 0.05), 60.0)
        except ValueError:
            pass
    return _DEFAULT_WAIT


def _write(stream: object, data: bytes) -> None:
    if not data:
        return
    try:
        buffer = stream.buffer  # type: ignore[attr-defined]
        buffer.write(data)
        buffer.flush()
    except (AttributeError, OSError, ValueError):
        pass
