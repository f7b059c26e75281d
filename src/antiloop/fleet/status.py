"""The fleet view: live sessions, stops per hour, the costliest fingerprints; as text or JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from antiloop.config import FleetConfig

HOURS = 24


@dataclass(frozen=True, slots=True)
class Counts:
    """What one fingerprint cost: sessions it stopped, steps and tokens wasted, last stop."""

    sessions: int = 0
    steps: int = 0
    tokens: int = 0
    last: float = 0.0


def summarize(
    *,
    now: float,
    live: int,
    stops: Sequence[float],
    counts: Mapping[str, Counts],
    kills: list[dict[str, Any]],
    config: FleetConfig,
    store: str,
    shared: bool,
    top: int = 10,
) -> dict[str, Any]:
    """The view as JSON: ``stops_per_hour[0]`` is the last hour, ``[1]`` the hour before."""
    hours = [0] * HOURS
    for at in stops:
        ago = int((now - at) // 3600)
        if 0 <= ago < HOURS:
            hours[ago] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1].steps, -kv[1].tokens, kv[0]))
    return {
        "store": store,
        "shared": shared,
        "live_sessions": live,
        "live_window": config.live_window,
        "stops_last_hour": hours[0],
        "stops_per_hour": hours,
        "known_after": config.known_after,
        "fingerprints": [
            {
                "fingerprint": fp,
                "sessions": c.sessions,
                "steps_wasted": c.steps,
                "tokens_wasted": c.tokens,
                "last_stop": c.last,
                "known": c.sessions >= config.known_after,
            }
            for fp, c in ranked[:top]
        ],
        "kills": kills,
    }


def render(view: Mapping[str, Any]) -> str:
    """The view as a plain text table."""
    lines = [
        f"fleet of {view['store']}" + ("" if view["shared"] else " (this process only)"),
        f"live sessions     {view['live_sessions']} (a step in the last {view['live_window']:g} s)",
        f"stops last hour   {view['stops_last_hour']}",
        "stops per hour    "
        + " ".join(str(n) for n in view["stops_per_hour"][:12])
        + "  (the last hour first)",
    ]
    kills = view["kills"]
    lines.append(f"kills             {len(kills) or 'none'}")
    for k in kills:
        target = k["target"] or "every session"
        why = f": {k['reason']}" if k["reason"] else ""
        lines.append(f"  {k['scope']:<12} {target} (by {k['by']}){why}")
    rows = view["fingerprints"]
    if not rows:
        lines.append("fingerprints      none stopped a session yet")
        return "\n".join(lines)
    lines += ["", f"{'steps':>6} {'tokens':>8} {'sessions':>8}  fingerprint"]
    for r in rows:
        mark = "  (known)" if r["known"] else ""
        lines.append(
            f"{r['steps_wasted']:>6} {r['tokens_wasted']:>8} {r['sessions']:>8}  "
            f"{r['fingerprint']}{mark}"
        )
    return "\n".join(lines)
