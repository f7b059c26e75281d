"""What redaction and the Unicode rule at the entry cost a step, by instruction count.

Each figure comes from a worker process (``python -m bench.redaction --worker``) run under
callgrind, which counts only the measured loop (``callgrind_control -i on/off`` around it), so
the figures are stable on a loaded machine. The worker's PYTHONPATH picks the source: this
tree's ``src/``, and, as "before", the ``src/`` of a commit given with ``--before`` (exported
with ``git archive`` into ``.cache/``). Three loops over ``bench/workload.py`` (3,000 steps over
300 sessions, the guard in shadow mode):

- ``record``: ``Guard.record()`` of each step as a dict (the library's entry, the Unicode rule
  included), after 1,000 warm-up steps;
- ``sinks``: what one step sends to the sinks, redacted: its arguments (``redact_value``), its
  output and error (``redact_text``), as the audit log and the live events take them;
- ``corpus``: ``redact_text`` of each text of the secrets corpus (``tests/secrets_corpus.py``),
  per text; "before" misses some of them, so this one compares the work, not the result.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "652eee3"  # main before this round's redaction work
N, SESSIONS, WARM = 3000, 300, 1000


def _callgrind(state: str) -> None:
    p = subprocess.Popen(
        ["callgrind_control", "-i", state, str(os.getpid())], stdout=subprocess.DEVNULL
    )
    while p.poll() is None:
        time.sleep(0.005)


def worker(loop: str, n: int) -> dict[str, Any]:
    """Run one loop with callgrind counting only it; how many items it counted."""
    from antiloop import GuardConfig
    from antiloop.guard import Guard

    try:
        from antiloop.core.redact import redact_text, redact_value
    except ImportError:  # the source before the core moved
        from antiloop.redact import redact_text, redact_value  # type: ignore[no-redef]
    from bench.workload import steps

    raw = list(steps(n, SESSIONS))
    if loop == "record":
        guard = Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
        for event in raw[:WARM]:
            guard.record(event)
        record = guard.record
        _callgrind("on")
        for event in raw[WARM:]:
            record(event)
        _callgrind("off")
        return {"items": n - WARM}
    if loop == "sinks":
        for event in raw[:WARM]:
            redact_value(event.get("args", {}))
        _callgrind("on")
        for event in raw[WARM:]:
            redact_value(event.get("args", {}))
            redact_text(event.get("output") or "")
            redact_text(event.get("error") or "")
        _callgrind("off")
        return {"items": n - WARM}
    from tests.secrets_corpus import NEAR_MISSES, SECRETS

    texts = [case.text for case in SECRETS] + list(NEAR_MISSES)
    for text in texts:
        redact_text(text)
    _callgrind("on")
    for text in texts:
        redact_text(text)
    _callgrind("off")
    return {"items": len(texts)}


def _source(commit: str) -> Path:
    """``src/`` as it was at ``commit``, exported once into ``.cache/``."""
    out = ROOT / ".cache" / f"src-{commit}"
    if not (out / "src").is_dir():
        out.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", commit, "src"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out / "src"


def _count(src: Path, loop: str) -> float:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}", "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-m", "bench.redaction", "--worker", loop, "-n", str(N)]
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp, "callgrind.out")
        vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={trace}"]
        out = subprocess.run([*vg, *cmd], env=env, capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise RuntimeError(out.stderr[-2000:])
        items = json.loads(out.stdout.splitlines()[-1])["items"]
        totals = re.search(r"^totals: (\d+)", trace.read_text(), re.MULTILINE)
        assert totals, "callgrind wrote no totals"
        return int(totals.group(1)) / items


def run(quick: bool = False, before: str = BEFORE) -> str:
    """Count each loop on the source before and after; the section of bench/RESULTS.md."""
    global N
    if quick:
        N = 1500
    old, new = _source(before), ROOT / "src"
    load = os.getloadavg()
    rows = []
    for loop, what in (
        ("record", "`Guard.record()` of a step (a dict: the entry's Unicode rule included)"),
        ("sinks", "redaction of a step's arguments, output and error (audit log, live events)"),
        ("corpus", "`redact_text` of one text of the secrets corpus"),
    ):
        after = _count(new, loop)
        first = _count(old, loop)
        change = (after - first) / first * 100
        rows.append(f"| {what} | {first:,.0f} | {after:,.0f} | {change:+.1f}% |")
        print(rows[-1], flush=True)
    return "\n".join(
        [
            "## Redaction and the Unicode rule: instructions per step (callgrind)",
            "",
            f"Source before: {before} (main before the secrets corpus and the Unicode rule);",
            f"after: this tree. bench/workload.py, {N:,} steps over {SESSIONS} sessions, the",
            f"first {WARM:,} uncounted; `python -m bench redaction`. Load average"
            f" {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (instruction counts do not move"
            " with it).",
            "",
            "| loop | before | after | change |",
            "|---|---:|---:|---:|",
            *rows,
            "",
            "`record()` after pays for the entry's checks the source before had not: every",
            "string of the event tested for lone surrogates (a walk of the event) and the",
            "session, agent and tool names for secrets (remembered per name); the redaction it",
            "does itself (contexts, heads, fingerprints) is cheaper. The sinks redact more kinds",
            "with fewer instructions: token runs are found by translating the text to a class",
            "per character (C loops) and searched as one text, the key-word rules run on the",
            "lower-cased text with the key word first, and the end-of-text rule reads the last",
            "run only. The corpus row counts the work only: before misses some of its kinds.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.redaction")
    parser.add_argument("--worker", choices=("record", "sinks", "corpus"))
    parser.add_argument("-n", type=int, default=N)
    parser.add_argument("--before", default=BEFORE)
    ns = parser.parse_args()
    if ns.worker:
        print(json.dumps(worker(ns.worker, ns.n)))
    else:
        print(run(before=ns.before))


if __name__ == "__main__":
    main()
