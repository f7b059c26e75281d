"""The hook's short way: hand the event to the hook daemon, importing almost nothing.

Each tool call of a coding agent starts ``antiloop hook <agent>`` as a new process. Importing
the engine costs that process tens of milliseconds, so the command first tries the hook
daemon (``antiloop.hooks.daemon``), a process of the same user and installation that keeps
the engine imported and answers on a Unix socket. This module needs only ``os``, ``sys`` and
``_socket``; anything unexpected before the event is handed over means "answer in this process
instead", so the daemon can only make the hook faster, never change its answer.

``ANTILOOP_HOOKD=0`` turns the daemon off; ``ANTILOOP_HOOKD_DIR`` moves its socket (default
``~/.antiloop/run``, a directory only the user may enter).
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
_DEFAULT_WAIT = 25.0  # below the 30 s timeout the installers give the agents


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
    """The socket of this installation's daemon: one per environment and package directory.

    ``sys.prefix`` (the venv), not ``sys.executable``: ``python`` and ``python3`` of one venv
    (the console script uses either) share the daemon.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(socket_dir(env), f"hookd-{_tag(sys.prefix + chr(0) + here)}.sock")


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
    """``ok CODE OUT ERR`` and the two bodies; None for anything else (``stale``, garbage)."""
    head, newline, body = reply.partition(b"\n")
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
    ``start`` says the daemon is not running and may be started.
    """

    __slots__ = ("code", "data", "start")

    def __init__(self, code: int | None = None, data: bytes | None = None, start: bool = False):
        self.code, self.data, self.start = code, data, start


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

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(_wait(env))
        try:
            sock.connect(path)
        except OSError:
            return Asked(data=data, start=True)
        cwd = _cwd(env)
        if config is not None:
            config = os.path.join(cwd, os.path.expanduser(config))
        environment = [key + b"=" + value for key, value in os.environb.items()]
        request = encode_request(agent, config or "", cwd, environment, data)
        try:
            sock.sendall(request)
            sock.shutdown(_socket.SHUT_WR)
        except OSError:
            return Asked(data=data)  # not handed over: answer here
        # Handed over: from here on the event is never judged again in this process.
        try:
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            raw = b"".join(chunks)
        except Exception as exc:
            return Asked(code=_lost(f"no answer from the hook daemon ({exc})", env))
    finally:
        sock.close()
    reply = decode_reply(raw)
    if reply is None:
        if raw[:5] == b"stale":  # an older daemon, on its way out: it did not judge the event
            return Asked(data=data, start=True)
        return Asked(code=_lost("the hook daemon's answer could not be read", env))
    code, out, err = reply
    _write(sys.stdout, out)
    _write(sys.stderr, err)
    return Asked(code=code)


def _cwd(env: Mapping[str, str]) -> str:
    """This process's directory (``$PWD``, or ``/``, if it was removed)."""
    try:
        return os.getcwd()
    except OSError:
        return env.get("PWD") or "/"


def _wait(env: Mapping[str, str]) -> float:
    raw = env.get("ANTILOOP_HOOK_DEADLINE")
    if raw:
        try:
            return max(float(raw), 0.01) + 5.0
        except ValueError:
            pass
    return _DEFAULT_WAIT


def _lost(problem: str, env: Mapping[str, str]) -> int:
    """The event was handed over but no answer came back: never judge it twice.

    A second judgement here could count the step twice (and call it a repeat), so the answer
    is the runner's for an internal error: allow with a line on stderr, or under
    ``ANTILOOP_FAIL=closed`` exit 2 (the agents' "block").
    """
    closed = env.get("ANTILOOP_FAIL", "").strip().lower() == "closed"
    line = f"antiloop hook: {problem}; this event was not checked.\n"
    if closed:
        line += "antiloop hook: ANTILOOP_FAIL=closed: blocking.\n"
    _write(sys.stderr, line.encode())
    return 2 if closed else 0


def _write(stream: object, data: bytes) -> None:
    if not data:
        return
    try:
        buffer = stream.buffer  # type: ignore[attr-defined]
        buffer.write(data)
        buffer.flush()
    except (AttributeError, OSError, ValueError):
        pass
