"""Mutation testing of the pure core: ``python -m bench.mutation`` (``make mutation``).

Runs mutmut 3 ([tool.mutmut] in pyproject.toml) over the core modules, one module at a time,
with the fast core tests, then writes bench/results/mutation.md and rebuilds RESULTS.md.
Every surviving mutant is listed: as equivalent with the reason from
bench/mutation_equivalent.tsv, or as not killed yet. ``--report`` only writes the report from
the last run (mutants/); ``--module`` picks modules (default: every one). A module this
checkout has no results for keeps its row, survivors and equivalents from the previous report,
so helpers that each run some modules do not overwrite the others' figures.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MUTANTS = ROOT / "mutants" / "src" / "antiloop"
EQUIVALENT = HERE / "mutation_equivalent.tsv"
REPORT = HERE / "results" / "mutation.md"

# guard.py: its decision code only (construction, wrapping and logging are not the core).
_GUARD = [
    "Guard\u01c1check",
    "Guard\u01c1_check",
    "Guard\u01c1record",
    "Guard\u01c1_record",
    "Guard\u01c1_judge",
    "Guard\u01c1_observe",
    "Guard\u01c1_record_of",
    "Guard\u01c1_allowed",
    "Guard\u01c1_terminated",
    "Guard\u01c1_shadowed",
    "Guard\u01c1enforce",
]
MODULES: dict[str, list[str]] = {
    "fingerprint": ["antiloop.fingerprint.*"],
    "verdict": ["antiloop.verdict.*"],
    "history": ["antiloop.history.*"],
    "events": ["antiloop.events.*"],
    "guard": [f"antiloop.guard.x\u01c1{name}__mutmut_*" for name in _GUARD]
    + [
        "antiloop.guard.x__relative_states__mutmut_*",
        "antiloop.guard.x__error_digest__mutmut_*",
        "antiloop.guard.x_default_detector__mutmut_*",
    ],
    "detectors": ["antiloop.detectors.*"],
    "readings": ["antiloop.readings.*"],
    "_shell": ["antiloop._shell.*"],
    "canonical": ["antiloop.canonical.*"],
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


_CELLS = ("killed", "timeout", "survived", "equivalent", "no tests", "not run")


class _Kept:
    """What the previous report says of each module: its row, survivor and equivalent lines."""

    def __init__(self, text: str) -> None:
        self.rows: dict[str, tuple[str, Counter[str]]] = {}
        self.survivors: dict[str, dict[str, list[str]]] = defaultdict(dict)
        self.equal: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for line in text.splitlines():
            row = re.fullmatch(r"\| (\w+) \| (\d+) \|((?: \d+ \|){6}) .*", line)
            if row:
                cells = map(int, row[3].replace("|", " ").split())
                self.rows[row[1]] = (line, Counter(dict(zip(_CELLS, cells, strict=True))))
            elif survivor := re.fullmatch(r"- `((\w+)\.[^`]+)`: ([\d, ]+)", line):
                numbers = survivor[3].split(", ")
                self.survivors[survivor[2]][survivor[1]] = numbers
            elif equal := re.fullmatch(r"- (.+?): ((?:`[^`]+`(?:, )?)+)", line):
                for name in re.findall(r"`([^`]+)`", equal[2]):
                    self.equal[name.partition(".")[0]][equal[1]].append(name)


def report() -> str:
    """The "Mutation testing of the core" section."""
    same = equivalents()
    kept = _Kept(REPORT.read_text(encoding="utf-8") if REPORT.exists() else "")
    rows, survivors, equal = [], defaultdict(list), defaultdict(list)
    totals: Counter[str] = Counter()
    for module in MODULES:
        codes = results(module)
        if module in kept.rows and all(c is None for c in codes.values()):  # not run here
            row, counts = kept.rows[module]
            rows.append(row)
            totals.update(counts)
            for fn, numbers in kept.survivors[module].items():
                survivors[fn].extend(numbers)
            for why, names in kept.equal[module].items():
                equal[why].extend(names)
            continue
        counts = Counter()
        for name, code in codes.items():
            state = status(code)
            if state == "survived" and name in same:
                state = "equivalent"
                equal[same[name]].append(_short(name))
            elif state in ("survived", "no tests"):
                fn, _, number = _short(name).rpartition("__mutmut_")
                survivors[fn].append(number)
            counts[state] += 1
        totals.update(counts)
        rows.append(_row(module, len(codes), counts))
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
        " fork) and so is the 16 s memory test; each test starts with the core's caches empty"
        " (tests/conftest.py), or a mutant would be answered from the original's cache.",
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
            lines.append(f"- {why}: {', '.join(f'`{n}`' for n in sorted(names))}")
        lines.append("")
    return "\n".join(lines)


def _row(module: str, total: int, c: Counter[str]) -> str:
    run_ = total - c["not run"]
    judged = run_ - c["equivalent"]
    score = f"{100 * (c['killed'] + c['timeout']) / judged:.1f}%" if judged else "-"
    cells = [c[k] for k in _CELLS]
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
    section = report()
    (HERE / "results").mkdir(exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    REPORT.write_text(f"{section}\n_Run {stamp}._\n", encoding="utf-8")
    from bench.__main__ import write_results

    write_results()
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
