"""Near names for a mistyped key or command: "did you mean 'repeat_threshold'?".

Example:
    >>> unknown("key", "repeat_treshold", ["repeat_threshold", "max_steps"])
    "unknown key 'repeat_treshold' (did you mean 'repeat_threshold'?)"
"""

from __future__ import annotations

from collections.abc import Iterable


def near(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name``, when one is close enough to be a typo.

    A typo is a letter wrong, missing, added or two swapped (``lgo`` for ``log``; two of them
    in a name of eight letters or more), or a spelling ``difflib`` finds close.

    Example:
        >>> near("lgo", ["log", "scan"]), near("--confg", ["--config", "--color"])
        ('log', '--config')
    """
    from difflib import get_close_matches

    names = list(known)
    lowered = {k.lower(): k for k in names}
    if name.lower() in lowered:
        return lowered[name.lower()]
    allowed = 1 if len(name.lstrip("-")) < 8 else 2
    scored = sorted((edits(name.lower(), k.lower()), k) for k in names)
    if scored and scored[0][0] <= allowed:
        return scored[0][1]
    found = get_close_matches(name, names, n=1, cutoff=0.75)
    return found[0] if found else None


def edits(a: str, b: str) -> int:
    """The letters to change, add, remove or swap (two neighbours) to turn ``a`` into ``b``.

    Example:
        >>> edits("lgo", "log"), edits("verfy", "verify"), edits("scan", "check")
        (1, 1, 5)
    """
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(current[j - 1] + 1, row[j] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], before[j - 2] + 1)
        before, row = row, current
    return row[-1]


def unknown(what: str, name: str, known: Iterable[str]) -> str:
    """``unknown WHAT 'NAME'``, with the near name, or else the known ones listed."""
    names = sorted(known)
    guess = near(name, names)
    if guess is not None:
        return f"unknown {what} {name!r} (did you mean {guess!r}?)"
    return f"unknown {what} {name!r} (known: {', '.join(names)})"


def resolve(name: str, candidates: Iterable[str], what: str) -> str:
    """``name`` itself, or the one candidate it is a prefix of.

    Raises:
        ConfigError: no candidate is or starts with ``name`` (the near one named), or several
            start with it (listed).
    """
    from antiloop.core.errors import ConfigError

    names = sorted(set(candidates))
    if name in names:
        return name
    matches = [c for c in names if c.startswith(name)] if name else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:8]) + (
            f" and {len(matches) - 8} more" if len(matches) > 8 else ""
        )
        raise ConfigError(f"{what} {name!r} is ambiguous: it starts {len(matches)} ({shown})")
    guess = near(name, names)
    hint = f" (did you mean {guess!r}?)" if guess else f" ({len(names)} known)"
    raise ConfigError(f"no {what} {name!r}{hint}")
