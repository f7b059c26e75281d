"""Fleet controls over many sessions and replicas: a kill switch, known loops, the fleet view.

- ``kills``: what a kill stops (the whole fleet, an agent name, a fingerprint, a session).
- ``procedure``: the op and context of a step or a fingerprint (what a known loop matches).
- ``local``: the controls in one process (memory and SQLite stores), and their logic.
- ``redis``: the same over Redis, shared by every replica: durable kills and counts, pub/sub.
- ``status``: the fleet view (live sessions, stops per hour, the costliest fingerprints).

The guard consults a ``Fleet`` before each step (``before``: a kill gives ``stop``) and after
it (``after``: stops are counted, a known procedure is nudged once per session). The pure core
never imports this package.
"""

from __future__ import annotations

from antiloop.fleet.kills import SCOPES, Kill, KillSet
from antiloop.fleet.local import Fleet, open_fleet

__all__ = ["SCOPES", "Fleet", "Kill", "KillSet", "open_fleet"]
