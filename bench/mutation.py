"""Mutation testing of the pure core: ``python -m bench.mutation`` (``make mutation``).

Runs mutmut 3 ([tool.mutmut] in pyproject.toml) over the core modules, one module at a time,
with the fast core tests, then writes bench/results/mutation.md and rebuilds RESULTS.md.
Every surviving mutant is listed: as equivalent with the reason from
bench/mutation_equivalent.tsv, or as not killed yet. ``--report`` only writes the report from
the last run (mutants/); ``--module`` picks modules (default: every one).

Each module's figures are kept in bench/results/mutation.json: a module that mutants/ holds no
results for keeps the figures of its last run, so a run of some modules (or a helper's
worktree that ran only its own) never blanks the others' rows.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MUTANTS = ROOT / "mutants" / "src" / "antiloop"
EQUIVALENT = HERE / "mutation_equivalent.tsv"
FIGURES = HERE / "results" / "mutation.json"

MODULES: dict[str, list[str]] = {
    "fingerprint": ["antiloop.core.fingerprint.*"],
    "verdict": ["antiloop.core.verdict.*"],
    "history": ["antiloop.core.history.*"],
    "events": ["antiloop.core.step.*"],
    "decide": ["antiloop.core.decide.*"],
    "deferred": ["antiloop.core.deferred.*"],
    "detectors": ["antiloop.core.detectors.*"],
    "readings": [
        "antiloop.core.result.*",
        "antiloop.core.rules.readings.*",
        "antiloop.core.text.engine.*",
    ],
    "_shell": ["antiloop.core.shell.tokens.*"],
    "canonical": [
        "antiloop.core.procedure.*",
        "antiloop.core.shell.engine.*",
        "antiloop.core.rules.programs.*",
        "antiloop.core.rules.ruleset.*",
        "antiloop.core.forms.*",
        "antiloop.core.text.patterns.*",
    ],
}
STATUS = {0: "survived", 1: "killed", 3: "killed", 33: "no tests", 5: "no tests", 37: "killed"}
TIMEOUTS = {24, -24, 152, 255, 36}


def run(modules: list[str], children: int, survivors: bool = False) -> None:
    """mutmut run, one module at a time; ``survivors``: only the mutants that survived."""
    env = dict(os.environ)
    env.setdefault("ANTILOOP_TEST_SHARED", str(ROOT.parent / "shared"))
    mutmut = Path(sys.executable).with_name("mutmut")
    for module in modules:
        names = MODULES[module]
        if survivors:
            names = [k for k, v in results(module).items() if status(v) == "survived"]
            if not names:
                continue
        started = time.monotonic()
        print(f"mutation: {module} ({len(names)} names or patterns) ...", flush=True)
        subprocess.run(
            [str(mutmut), "run", "--max-children", str(children), *names],
            cwd=ROOT,
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
        )
        print(f"mutation: {module} done in {time.monotonic() - started:.0f} s", flush=True)


def equivalents() -> dict[str, str]:
    """Mutant name -> why it is equivalent (bench/mutation_equivalent.tsv)."""
    found: dict[str, str] = {}
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition("\t")
            found[name.strip()] = why.strip()
    return found


def results(module: str) -> dict[str, int | None]:
    """Mutant name -> mutmut's exit code (None: not run) for the module's chosen mutants."""
    meta = MUTANTS / f"{module}.py.meta"
    if not meta.exists():
        return {}
    codes: dict[str, int | None] = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
    return {k: v for k, v in codes.items() if any(fnmatch.fnmatch(k, p) for p in MODULES[module])}


def status(code: int | None) -> str:
    """killed, survived, timeout, no tests or not run."""
    if code is None:
        return "not run"
    if code in TIMEOUTS:
        return "timeout"
    return STATUS.get(code, "killed" if code else "survived")


def _short(name: str) -> str:
    return name.removeprefix("antiloop.").replace("x\u01c1", "").replace("\u01c1", ".")


def figures(module: str, same: dict[str, str]) -> dict[str, Any] | None:
    """A module's figures from mutants/: counts, survivors, equivalents; None if none was run."""
    codes = results(module)
    if all(code is None for code in codes.values()):
        return None
    counts: Counter[str] = Counter()
    survivors: list[str] = []
    equal: list[str] = []
    for name, code in codes.items():
        state = status(code)
        if state == "survived" and name in same:
            state = "equivalent"
            equal.append(name)
        elif state in ("survived", "no tests"):
            survivors.append(name)
        counts[state] += 1
    return {"mutants": len(codes), "counts": dict(counts), "survivors": survivors, "equal": equal}


def stored_figures() -> dict[str, dict[str, Any]]:
    """The figures of each module's last run (bench/results/mutation.json)."""
    if not FIGURES.exists():
        return {}
    stored: dict[str, dict[str, Any]] = json.loads(FIGURES.read_text(encoding="utf-8"))
    return stored


def report(stored: dict[str, dict[str, Any]] | None = None) -> str:
    """The "Mutation testing of the core" section; ``stored`` gets every module's figures."""
    same = equivalents()
    kept = stored_figures()
    rows, survivors, equal = [], defaultdict(list), defaultdict(list)
    totals: Counter[str] = Counter()
    for module in MODULES:
        found = figures(module, same) or kept.get(module)
        if found is None:
            found = {"mutants": 0, "counts": {}, "survivors": [], "equal": []}
        if stored is not None:
            stored[module] = found
        counts: Counter[str] = Counter(found["counts"])
        for name in found["survivors"]:
            fn, _, number = _short(name).rpartition("__mutmut_")
            survivors[fn].append(number)
        for name in found["equal"]:
            equal[same.get(name, "equivalent (reason no longer listed)")].append(name)
        totals.update(counts)
        rows.append(_row(module, found["mutants"], counts))
    lines = [
        "## Mutation testing of the core",
        "",
        "`make mutation` (`python -m bench.mutation`): mutmut 3 over the pure core (guard.py:"
        " its decision code) with the fast core tests (tests/test_*.py). Score = killed (a"
        " timeout counts as killed) / (mutants run - equivalent). Not part of `make test`.",
        "",
        "mutmut rather than cosmic-ray: mutmut forks each mutant from a process that has"
        " imported everything and runs only the tests that reach the mutated function (recorded"
        " in a first pass), 1 to 3 mutants a second on this 2-core machine; cosmic-ray starts a"
        " fresh test run for each mutant (seconds of imports and collection each), too slow for"
        " 5,300 mutants. minilm tests are left out (onnxruntime's threads do not survive the"
        " fork) and so are the two memory tests (16 s, and 60 s under tracemalloc: every"
        " canonical.py mutant would have run it); each test starts with the core's caches empty"
        " (tests/conftest.py), or a mutant would be answered from the original's cache. A test"
        " past 60 s fails (`--timeout 60`): a mutant that loops is killed within a minute, not"
        " at mutmut's CPU limit (30 times the time of the tests that reach it), and hypothesis"
        " tries 20 fixed examples. A module's row is its last run (bench/results/mutation.json);"
        " `python -m bench.mutation --module canonical` runs one module, and mutmut itself runs"
        " chunks: `mutmut run 'antiloop.core.procedure.x__unwrap__mutmut_*'`, then `--report`.",
        "",
        "| module | mutants | killed | timeout | survived | equivalent | no tests | not run"
        " | score |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        _row("**all**", sum(totals.values()), totals),
        "",
    ]
    if survivors:
        lines += ["Surviving mutants not killed yet (`mutmut show antiloop.<fn>__mutmut_<n>`):", ""]
        for fn, numbers in sorted(survivors.items()):
            lines.append(f"- `{fn}`: {', '.join(sorted(numbers, key=int))}")
        lines.append("")
    if equal:
        lines += ["Equivalent mutants (same behaviour as the original), by reason:", ""]
        for why, names in sorted(equal.items()):
            lines.append(f"- {why}: {', '.join(f'`{_short(n)}`' for n in sorted(names))}")
        lines.append("")
    return "\n".join(lines)


def _row(module: str, total: int, c: Counter[str]) -> str:
    run_ = total - c["not run"]
    judged = run_ - c["equivalent"]
    score = f"{100 * (c['killed'] + c['timeout']) / judged:.1f}%" if judged else "-"
    cells = [c[k] for k in ("killed", "timeout", "survived", "equivalent", "no tests", "not run")]
    return f"| {module} | {total} | {' | '.join(map(str, cells))} | {score} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation")
    parser.add_argument("--module", action="append", choices=list(MODULES), help="default: all")
    parser.add_argument("--report", action="store_true", help="only write the report")
    parser.add_argument(
        "--survivors", action="store_true", help="run again only the mutants that survived"
    )
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1)
    ns = parser.parse_args(argv)
    if not ns.report:
        run(ns.module or list(MODULES), ns.max_children, ns.survivors)
    stored: dict[str, dict[str, Any]] = {}
    section = report(stored)
    (HERE / "results").mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (HERE / "results" / "mutation.md").write_text(f"{section}\n_Run {stamp}._\n", encoding="utf-8")
    FIGURES.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    from bench.__main__ import write_results

    write_results()
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
