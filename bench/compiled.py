"""The compiled core modules (mypyc, `make compiled`) against pure Python, and the speed caches.

Every figure comes from a worker process (``python -m bench.compiled --worker``) whose
PYTHONPATH picks the build: ``src/`` for pure Python, ``.cache/compiled/site`` for the compiled
one, and, per module, a build that compiles only that module. Wall-clock figures are the best
of interleaved rounds (the machine is shared); instruction counts come from callgrind, which
counts only the measured loop (``callgrind_control -i on/off`` around it) and is stable under
load.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMPILED = ROOT / ".cache" / "compiled"
VARIANTS = COMPILED / "bench"
_SKIP = shutil.ignore_patterns("__pycache__", "*.so")
_PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w")


# The modules measured one at a time (the hook compiles those of them that pay).
CANDIDATES = ("canonical", "readings", "_shell", "fingerprint", "redact", "events", "verdict")


def compiled_modules() -> list[str]:
    """The modules pyproject.toml's mypyc hook compiles (short names)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    hook = config["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]
    return [Path(p).stem for p in hook["include"]]


# ------------------------------------------------------------------------------------------
# The speed caches of canonical.py and readings.py, each turned off by a patch of the pure
# modules (a worker on the pure build only): the function without its cache, a FIFO that keeps
# nothing.
# ------------------------------------------------------------------------------------------


class _KeepsNothing(dict[Any, Any]):
    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def _unwrap(module: Any, name: str, *also: Any) -> None:
    plain = getattr(module, name).__wrapped__
    for m in (module, *also):
        setattr(m, name, plain)


def _caches() -> dict[str, Callable[[], None]]:
    from antiloop.core import decide
    from antiloop.core import forms as _forms
    from antiloop.core import procedure as canonical
    from antiloop.core import result as readings
    from antiloop.core.shell import engine as _commands

    return {
        "_forms.canonical_path (lru 4096)": lambda: _unwrap(
            _forms, "canonical_path", canonical, _commands, decide
        ),
        "canonical._known (procedure FIFO 1024)": lambda: setattr(
            canonical, "_known", _KeepsNothing()
        ),
        "readings._known (readings FIFO 1024)": lambda: setattr(
            readings, "_known", _KeepsNothing()
        ),
    }


# ------------------------------------------------------------------------------------------
# The worker: one build, one measure, one JSON line.
# ------------------------------------------------------------------------------------------


def _callgrind(state: str) -> None:
    """Turn callgrind's instrumentation on or off for this process.

    Valgrind reads the command when this process runs again after a system call: it sleeps in
    short naps (a few instructions each) until the command is done, not in one long wait.
    """
    p = subprocess.Popen(
        ["callgrind_control", "-i", state, str(os.getpid())], stdout=subprocess.DEVNULL
    )
    while p.poll() is None:
        time.sleep(0.005)


def worker(n: int, sessions: int, without: list[str], callgrind: bool) -> dict[str, Any]:
    import antiloop.core.procedure
    from antiloop import GuardConfig, step_from_dict
    from antiloop.guard import Guard
    from bench.engine import _quantiles, check_vs_parse, guard_record, naive_floor
    from bench.workload import steps

    caches = _caches()
    for name in without:
        caches[name]()
    raw = list(steps(n, sessions))
    events = [step_from_dict(e) for e in raw]
    lines = b"".join(json.dumps(e).encode() + b"\n" for e in raw)
    del raw
    gc.collect()
    gc.freeze()
    out: dict[str, Any] = {"canonical": Path(str(antiloop.core.procedure.__file__)).suffix}
    if callgrind:
        warm = n // 3
        guard = Guard(config=GuardConfig(embedder="ngram", mode="shadow"))
        for step in events[:warm]:
            guard.record(step)
        record = guard.record
        _callgrind("on")
        for step in events[warm:]:
            record(step)
        _callgrind("off")
        out["steps"] = n - warm
        return out
    floor_p50, _ = _quantiles(naive_floor(events))
    times, _guard = guard_record(events)
    rec_p50, _ = _quantiles(times)
    parse_s, check_s = check_vs_parse(lines)
    out.update(floor_p50=floor_p50, record_p50=rec_p50, parse_s=parse_s, check_s=check_s, n=n)
    return out


def _run_worker(
    site: Path, n: int, sessions: int, without: tuple[str, ...] = (), callgrind: bool = False
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-m", "bench.compiled", "--worker", "-n", str(n), "-s", str(sessions)]
    for name in without:
        cmd += ["--without", name]
    if not callgrind:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
        return dict(json.loads(out.stdout.splitlines()[-1]))
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp, "callgrind.out")
        vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={trace}"]
        out = subprocess.run(
            [*vg, *cmd, "--callgrind"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        result = dict(json.loads(out.stdout.splitlines()[-1]))
        totals = re.search(r"^totals: (\d+)", trace.read_text(), re.MULTILINE)
        assert totals, "callgrind wrote no totals"
        result["instructions"] = int(totals.group(1)) / result["steps"]
    return result


# ------------------------------------------------------------------------------------------
# The builds
# ------------------------------------------------------------------------------------------


def _build_all() -> Path:
    """`make compiled`: the compiled build every user gets."""
    subprocess.run(["make", "-s", "compiled"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return COMPILED / "site"


def _build_only(module: str) -> Path:
    """A build that compiles only ``module``, as `make compiled` does (hook narrowed)."""
    dest = VARIANTS / module
    site = dest / "site"
    stamp = dest / ".built"
    if (
        stamp.exists()
        and stamp.stat().st_mtime >= (ROOT / f"src/antiloop/{module}.py").stat().st_mtime
    ):
        # the module's .so is current: bring the pure modules beside it up to date
        shutil.copytree(ROOT / "src/antiloop", site / "antiloop", dirs_exist_ok=True, ignore=_SKIP)
        return site
    shutil.rmtree(dest, ignore_errors=True)
    tree = dest / "tree"
    tree.mkdir(parents=True)
    for name in ("README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    hook = project.index("[tool.hatch.build.targets.wheel.hooks.mypyc]")
    start = project.index("include = [", hook)
    end = project.index("]\n", start) + 2
    only = f'include = ["src/antiloop/{module}.py"]\n'
    (tree / "pyproject.toml").write_text(project[:start] + only + project[end:], encoding="utf-8")
    (tree / ".gitignore").write_text("", encoding="utf-8")
    subprocess.run(
        [*_PIP_WHEEL, str(dest / "wheel"), "."],
        cwd=tree,
        env={**os.environ, "HATCH_BUILD_HOOK_ENABLE_MYPYC": "true"},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (wheel,) = (dest / "wheel").glob("antiloop-*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    stamp.touch()
    return site


# ------------------------------------------------------------------------------------------
# The suite
# ------------------------------------------------------------------------------------------


def _best(results: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "record_p50": min(r["record_p50"] for r in results),
        "floor_p50": min(r["floor_p50"] for r in results),
        "check_s": min(r["check_s"] for r in results),
        "parse_s": min(r["parse_s"] for r in results),
        "n": results[0]["n"],
    }


def run(quick: bool = False) -> str:
    n, sessions, rounds = (6_000, 600, 2) if quick else (30_000, 3_000, 3)
    cg_n, cg_sessions = (900, 90) if quick else (2_400, 240)
    pure = ROOT / "src"
    compiled = _build_all()

    timed: dict[str, list[dict[str, Any]]] = {"pure": [], "compiled": []}
    for _ in range(rounds):
        for name, site in (("pure", pure), ("compiled", compiled)):
            result = _run_worker(site, n, sessions)
            want = ".py" if name == "pure" else ".so"
            assert result["canonical"].endswith(want), f"{name} loaded {result['canonical']}"
            timed[name].append(result)
    best = {name: _best(results) for name, results in timed.items()}
    p, c = best["pure"], best["compiled"]
    rows = [
        f"| Guard.record() p50 | {p['record_p50']:.1f} µs ({p['record_p50'] / p['floor_p50']:.2f}x)"
        f" | {c['record_p50']:.1f} µs ({c['record_p50'] / c['floor_p50']:.2f}x)"
        f" | {p['record_p50'] / c['record_p50']:.2f}x |",
        f"| antiloop check | {n / p['check_s']:,.0f} steps/s ({p['check_s'] / p['parse_s']:.2f}x)"
        f" | {n / c['check_s']:,.0f} steps/s ({c['check_s'] / c['parse_s']:.2f}x)"
        f" | {p['check_s'] / c['check_s']:.2f}x |",
    ]
    print("\n".join(rows))

    cg_rows: list[str] = []
    cache_rows: list[str] = []
    if shutil.which("valgrind") and shutil.which("callgrind_control"):
        base = _run_worker(pure, cg_n, cg_sessions, callgrind=True)["instructions"]
        full = _run_worker(compiled, cg_n, cg_sessions, callgrind=True)["instructions"]
        cg_rows.append(f"| pure Python | {base:,.0f} | 1.00x |")
        cg_rows.append(
            f"| compiled: {', '.join(compiled_modules())} | {full:,.0f} | {base / full:.2f}x |"
        )
        for module in CANDIDATES:
            site = _build_only(module)
            one = _run_worker(site, cg_n, cg_sessions, callgrind=True)["instructions"]
            cg_rows.append(f"| compiled: {module} only | {one:,.0f} | {base / one:.2f}x |")
            print(cg_rows[-1])
        for cache in _caches():
            off = _run_worker(pure, cg_n, cg_sessions, (cache,), callgrind=True)["instructions"]
            cache_rows.append(f"| {cache} | {off:,.0f} | {(off - base) / base:+.1%} |")
            print(cache_rows[-1])
    else:
        cg_rows.append("| (valgrind is not installed: no instruction counts) | | |")

    cg_table = "\n".join(cg_rows)
    cache_table = "\n".join(cache_rows) or "| (valgrind is not installed) | | |"
    return f"""## Compiled core modules (mypyc) against pure Python

`make compiled` builds the wheel with the hot pure modules compiled by mypyc
({", ".join(compiled_modules())}; pyproject.toml's mypyc hook), from the same typed source;
the rest stays Python. Each figure comes from a worker process on one build (PYTHONPATH),
the builds interleaved, best of {rounds} rounds; workload: {n:,} steps over {sessions:,}
sessions of `bench/workload.py` (the engine suite's mix), the guard in shadow mode. The floor
beside each figure is measured in the same worker: the naive guard for `record()`, a JSON
parse of the lines for `check` (as in the engine suite).

| measure | pure Python (x floor) | compiled (x floor) | compiled speed-up |
|---|---:|---:|---:|
{chr(10).join(rows)}

### Instructions per `Guard.record()` (callgrind)

{cg_n:,} steps over {cg_sessions:,} sessions; the first third warms the guard up, uncounted;
callgrind counts only the loop over the other steps. A build per module tells what
compiling that module alone buys.

| build | instructions per step | fewer than pure |
|---|---:|---:|
{cg_table}

### The speed caches of canonical.py and readings.py (pure Python, callgrind)

Each cache turned off in turn (the function without its `lru_cache`, a FIFO dict that keeps
nothing), the same {cg_n:,}-step run: how many more instructions a step takes without it.

| cache turned off | instructions per step | change |
|---|---:|---:|
{cache_table}

Dropped after the same measure (2,400 steps, pure Python: 453,900 instructions a step with
every cache), as they bought less than 0.1%: the `lru_cache`s of `operation_of_tool` (+0.06%
without it), `_encode_key` (+0.05%), `pattern_words` (+0.02%) and `_lines` (-0.01%). The
ones above, which pay, say their gain beside them in the source.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compiled")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("-n", type=int, default=6_000)
    parser.add_argument("-s", type=int, default=600)
    parser.add_argument("--without", action="append", default=[])
    parser.add_argument("--callgrind", action="store_true")
    ns = parser.parse_args(argv)
    if ns.worker:
        print(json.dumps(worker(ns.n, ns.s, ns.without, ns.callgrind)))
        return 0
    print(run(quick=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
