"""Two network namespaces of a test's own, joined by two veth pairs, and a partition of one.

``hub`` holds Redis, the replicas that stay connected and the client; ``cut`` holds the
replica to partition. The ``data`` pair carries the cut replica's Redis traffic (hub
10.253.1.1, cut 10.253.1.2), the ``api`` pair the client's requests to it (hub 10.253.2.1,
cut 10.253.2.2). ``partition()`` takes the data link down in ``cut`` (packets dropped, no
reset: connections hang until their timeout), ``heal()`` brings it up. Nothing touches the
host's own network: every address lives inside the two namespaces, which go with ``destroy``.

Needs root and ``ip`` (iproute2); elsewhere the tests skip with the reason (fail under CI).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable
from typing import TypeVar

from tests.conftest import missing

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
HUB_DATA, CUT_DATA = "10.253.1.1", "10.253.1.2"
HUB_API, CUT_API = "10.253.2.1", "10.253.2.2"


def enter(name: str) -> None:
    """Move the calling thread (only it) into network namespace ``name``."""
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
    finally:
        os.close(fd)


def inside(name: str, fn: Callable[[], T]) -> T:
    """``fn()`` in a thread of its own inside ``name`` (processes it starts are there too)."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            enter(name)
            result.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


class Namespaces:
    """``hub`` and ``cut``, joined by the ``data`` and ``api`` veth pairs."""

    def __init__(self) -> None:
        if shutil.which("ip") is None:
            missing("the network partition test needs ip (iproute2)")
        if os.geteuid() != 0:
            missing("the network partition test needs root (network namespaces)")
        tag = uuid.uuid4().hex[:6]
        self.hub, self.cut = f"al{tag}hub", f"al{tag}cut"
        self.tag = f"al{tag}"
        self.data = f"{self.tag}dc"  # the cut end of the data pair
        self.made: list[str] = []
        try:
            for name in (self.hub, self.cut):
                self._ip("netns", "add", name)
                self.made.append(name)
                self._ip("-n", name, "link", "set", "lo", "up")
            self._pair("d", HUB_DATA, CUT_DATA)
            self._pair("a", HUB_API, CUT_API)
        except subprocess.CalledProcessError as exc:
            self.destroy()
            missing(f"network namespaces are not available here: {exc.stderr.decode().strip()}")

    def _pair(self, kind: str, hub: str, cut: str) -> None:
        hub_end, cut_end = f"{self.tag}{kind}h", f"{self.tag}{kind}c"
        self._ip(
            *("link", "add", hub_end, "netns", self.hub, "type", "veth"),
            *("peer", "name", cut_end, "netns", self.cut),
        )
        for space, end, addr in ((self.hub, hub_end, hub), (self.cut, cut_end, cut)):
            self._ip("-n", space, "addr", "add", f"{addr}/30", "dev", end)
            self._ip("-n", space, "link", "set", end, "up")

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def partition(self) -> None:
        """Take the cut replica's link to Redis down: its packets go nowhere."""
        self._ip("-n", self.cut, "link", "set", self.data, "down")

    def heal(self) -> None:
        """Bring the link up again (its address and route come back with it)."""
        self._ip("-n", self.cut, "link", "set", self.data, "up")

    def destroy(self) -> None:
        """Delete the namespaces (their veth ends go with them)."""
        for name in self.made:
            with contextlib.suppress(subprocess.CalledProcessError):
                self._ip("netns", "del", name)
        self.made = []
