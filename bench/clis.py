"""The real agent CLIs, headless, with and without antiloop's hooks (`python -m bench clis`).

Each CLI (installed by `make clis`) plays the same scripted session against the scripted model
on 127.0.0.1 (tests/hooks/model_server.py): ten different shell commands (`sh step.sh N`),
then an answer. A run is the whole `claude -p` / `codex exec` / `gemini -p` process. Runs with
and without the hooks are interleaved round by round so that both see the same machine load;
the hooks run as installed (`antiloop install <agent> --project`, the hook daemon on, after
one warm-up run).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from tests.hooks.real_clis import CLIS, PINNED, CliProject, Say, shell

CALLS = 10


def _script(cli: str) -> list[object]:
    return [*(shell(cli, f"sh step.sh {n}") for n in range(CALLS)), Say("done")]


def _time(project: CliProject, cli: str) -> float:
    ran = project.run(_script(cli))  # type: ignore[arg-type]
    steps = project.project / "steps.log"
    ran_all = steps.is_file() and len(steps.read_text().splitlines()) == CALLS
    steps.unlink(missing_ok=True)
    if ran.proc.returncode != 0 or len(ran.model.main_requests) != CALLS + 1 or not ran_all:
        raise RuntimeError(f"{cli}: the scripted run did not finish\n{ran.log}")
    return ran.seconds


def measure(cli: str, rounds: int, root: Path) -> tuple[list[float], list[float], int]:
    """(seconds without, seconds with, hook events seen) of ``rounds`` runs each."""
    bare = CliProject(cli, root / "bare")
    hooked = CliProject(cli, root / "hooked")
    for project in (bare, hooked):  # no redirection: Gemini asks before a `>>` headless
        (project.project / "step.sh").write_text('echo "step $1" >> steps.log\necho "step $1"\n')
    hooked.install()
    hooked.trust_folder()
    bare.trust_folder()
    _time(hooked, cli)  # warm-up: the first event starts the hook daemon
    without: list[float] = []
    with_hooks: list[float] = []
    for _ in range(rounds):
        without.append(_time(bare, cli))
        with_hooks.append(_time(hooked, cli))
    events = sum(1 for r in hooked.audit() if r.kind == "step")
    hooked.stop_daemon()
    return without, with_hooks, events


def _floor(runs: int) -> float:
    """Median ms of ``python -c pass``: the price of any process, in this run's machine load."""
    import subprocess
    import sys
    import time

    took = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took)


def run(quick: bool = False) -> str:
    """Measure and return the markdown section."""
    from tests.hooks.real_clis import binary

    rounds = 2 if quick else 5
    floor = _floor(5)
    rows = []
    for cli in CLIS:
        try:
            binary(cli)
        except BaseException as exc:  # pytest's skip outside pytest
            rows.append(f"| {cli} | not installed: {exc} | | | |")
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-{cli}-") as tmp:
            without, with_hooks, events = measure(cli, rounds, Path(tmp))
        a, b = statistics.median(without), statistics.median(with_hooks)
        per = (b - a) / CALLS * 1000
        rows.append(
            f"| {cli} {PINNED[cli]} | {a:.2f} s | {b:.2f} s | {b - a:+.2f} s "
            f"({(b / a - 1) * 100:+.0f} %) | {per:+.0f} ms |"
        )
        print(rows[-1], f"({events} steps recorded)")
    floor = (floor + _floor(5)) / 2
    return "\n".join(
        [
            "## Real agent CLIs: a headless session with and without the hooks",
            "",
            f"Each CLI ran one scripted session of {CALLS} different shell commands and an "
            f"answer against the scripted model on 127.0.0.1, {rounds} times without antiloop "
            "and as many times with it (`antiloop install <agent> --project`, the hook daemon "
            "running), interleaved; the median of the whole process's wall time. A tool call "
            "costs the CLI a PreToolUse and a PostToolUse hook (Gemini: BeforeTool, AfterTool); "
            "the per-call column is the difference spread over the calls. For scale, "
            f"`python -c pass` took {floor:.0f} ms in the same run (median, before and after); "
            "the machine's 2 cores were shared with other work, so the figures vary by some "
            "tens of percent from run to run.",
            "",
            "| CLI | without | with antiloop | difference | per tool call |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )
