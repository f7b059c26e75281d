"""Run benchmark suites: ``python -m bench [SUITE ...] [--quick]``.

Each suite prints a table and writes ``bench/results/<suite>.md``; ``bench/RESULTS.md`` is then
rebuilt from every section there, so suites can be re-run one at a time.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = {
    "engine": "bench.engine",
    "scan": "bench.scan",
    "serve": "bench.serve",
    "hooks": "bench.hooks",
    "stores": "bench.stores",
    "termination": "bench.termination",
    "durability": "bench.durability",
    "clis": "bench.clis",
    "goal": "bench.goal",
    "telemetry": "bench.telemetry",
    "json": "bench.json_lib",
    "capacity": "bench.capacity",
    "service": "bench.service",
    "compiled": "bench.compiled",
    "outage": "bench.outage",
    "second_family": "bench.second_family",
    "redaction": "bench.redaction",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("suites", nargs="*", choices=[*SUITES, []], help="default: all")
    parser.add_argument("--quick", action="store_true", help="a smaller workload (smoke run)")
    ns = parser.parse_args(argv)
    chosen = ns.suites or list(SUITES)
    (HERE / "results").mkdir(exist_ok=True)
    for name in chosen:
        module = importlib.import_module(SUITES[name])
        started = time.perf_counter()
        section = module.run(quick=ns.quick)
        took = time.perf_counter() - started
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        quick = " (quick)" if ns.quick else ""
        text = f"{section.rstrip()}\n\n_Run {stamp} in {took:.0f} s{quick}._\n"
        (HERE / "results" / f"{name}.md").write_text(text, encoding="utf-8")
    write_results()
    return 0


def write_results() -> None:
    machine = (
        f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    )
    parts = [
        "# Benchmark results\n",
        f"Written by `python -m bench` (`make bench`). Machine: {machine}, "
        f"{_cores()} cores. Each figure is compared with a floor measured in the same run.\n",
    ]
    parts.extend(f.read_text(encoding="utf-8") for f in sorted((HERE / "results").glob("*.md")))
    (HERE / "RESULTS.md").write_text("\n".join(parts), encoding="utf-8")


def _cores() -> int:
    import os

    return os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
