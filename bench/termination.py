"""Termination checks: minilm speed, cold start, and the goal/stagnation check per step.

Compared in the same run with the seed's reference design: the same model, the goal
re-encoded at every step, goal reached at cosine >= 0.9, stagnation when the last three
outputs are mutually > 0.95 similar (no digit masking, no text rules).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from antiloop import Guard, GuardConfig
from antiloop.calibration import (
    GoalItem,
    Row,
    StagnationItem,
    calibrate,
    format_report,
    load_labelled,
)
from antiloop.core.step import Step
from antiloop.embed import CachedEmbedder, get_embedder

ROOT = Path(__file__).resolve().parents[1]
LABELLED = ROOT / "tests" / "data" / "labelled"

COLD = (
    "import time; t0 = time.perf_counter(); "
    "from antiloop.embed import get_embedder; "
    "e = get_embedder('minilm', cached=False); e.embed(['cold start']); "
    "print(time.perf_counter() - t0)"
)


def _pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * q))]


def _messages() -> tuple[list[str], list[str]]:
    items = load_labelled(LABELLED)
    short = [i.output for i in items if isinstance(i, GoalItem) and len(i.output) <= 120]
    goals = sorted({i.goal for i in items if isinstance(i, GoalItem)})
    return short, goals


def per_message(embedder: object, texts: list[str]) -> list[float]:
    """Milliseconds to embed each text alone (no cache)."""
    out = []
    embed = embedder.embed  # type: ignore[attr-defined]
    for text in texts:
        t0 = time.perf_counter()
        embed([text])
        out.append((time.perf_counter() - t0) * 1000)
    return out


def cold_start(runs: int) -> list[float]:
    """Seconds from the import to the first vector, in fresh processes."""
    out = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", COLD], capture_output=True, text=True, check=True
        )
        out.append(float(proc.stdout.strip().splitlines()[-1]))
    return out


def _stream(goals: list[str], texts: list[str], n: int) -> list[Step]:
    steps = []
    for i in range(n):
        session = f"s{i // 20}"
        steps.append(
            Step(
                tool="read",
                args={"path": f"f{i}.py"},
                output=f"line {i}\n",
                session=session,
                goal=goals[(i // 20) % len(goals)] if i % 20 == 0 else None,
                message=texts[i % len(texts)],
            )
        )
    return steps


def check_cost(embedder: CachedEmbedder, steps: list[Step]) -> tuple[float, float]:
    """Guard.record() per step (ms, p50) with and without the goal/stagnation detectors.

    The embedder's cache is warm, so the difference is the check beyond the embedding.
    """
    results = []
    for detectors in (("goal", "stagnation"), ()):
        cfg = GuardConfig(min_steps=1, detectors=detectors, max_steps=10**9)
        guard = Guard(config=cfg, embedder=embedder)
        times = []
        for step in steps:
            t0 = time.perf_counter()
            guard.record(step)
            times.append((time.perf_counter() - t0) * 1000)
        results.append(statistics.median(times))
    return results[0], results[1]


def reference_step_cost(embedder: object, goals: list[str], texts: list[str], n: int) -> float:
    """The seed's design per step (ms, p50): encode the goal and the output, compare."""
    embed = embedder.embed  # type: ignore[attr-defined]
    recent: list[list[float]] = []
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        goal_vec, vec = embed([goals[(i // 20) % len(goals)], texts[i % len(texts)]])
        _ = sum(a * b for a, b in zip(goal_vec, vec, strict=True)) >= 0.9
        recent = [*recent[-2:], vec]
        if len(recent) == 3:
            _ = all(
                sum(a * b for a, b in zip(recent[x], recent[y], strict=True)) > 0.95
                for x, y in ((0, 1), (0, 2), (1, 2))
            )
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def reference_accuracy(embedder: object, split: str | None) -> tuple[Row, Row]:
    """The seed's decisions on the labelled set: goal at cosine >= 0.9, stagnation > 0.95."""
    items = [i for i in load_labelled(LABELLED) if split is None or i.split == split]
    embed = embedder.embed  # type: ignore[attr-defined]
    goal = [0, 0, 0, 0]
    stag = [0, 0, 0, 0]
    for item in items:
        if isinstance(item, GoalItem):
            g, o = embed([item.goal, item.output])
            fired, label, counts = _dot(g, o) >= 0.9, item.reached, goal
        else:
            assert isinstance(item, StagnationItem)
            vecs = embed(list(item.messages))
            pairs = [(x, y) for x in range(len(vecs)) for y in range(x + 1, len(vecs))]
            fired = all(_dot(vecs[x], vecs[y]) > 0.95 for x, y in pairs)
            label, counts = item.stalled, stag
        counts[(0 if fired else 2) + (0 if label else 1)] += 1
    return Row(0.9, goal[0], goal[1], goal[2], goal[3]), Row(
        0.95, stag[0], stag[1], stag[2], stag[3]
    )


def run(quick: bool = False) -> str:
    """Run the suite; returns its markdown section."""
    short, goals = _messages()
    reps = 1 if quick else 3
    texts = short * reps
    minilm = get_embedder("minilm", cached=False)
    minilm.embed(["warm up"])
    times = per_message(minilm, texts)
    cold = cold_start(2 if quick else 3)

    n = 400 if quick else 2000
    cached = CachedEmbedder(minilm, maxsize=100_000)
    cached.embed(goals + short)
    steps = _stream(goals, short, n)
    with_checks, without = check_cost(cached, steps)
    reference = reference_step_cost(minilm, goals, short, min(n, 400))
    load = os.getloadavg()[0]
    embed_p50 = statistics.median(times)

    ours_all = calibrate(load_labelled(LABELLED), cached)
    ngram = calibrate(load_labelled(LABELLED), get_embedder("ngram"))
    ref_test = reference_accuracy(cached, "test")
    ref_all = reference_accuracy(cached, None)
    ours = {k.kind: k for k in ours_all.kinds}
    ng = {k.kind: k for k in ngram.kinds}

    def pr(row: Row | None) -> str:
        return "-" if row is None else f"{row.precision:.2f} / {row.recall:.2f}"

    lines = [
        "## Termination checks (goal reached, stagnation)",
        "",
        f"minilm (`minilm-l6-int8`, one intra-op thread), {len(short)} short messages "
        f"(<= 120 characters) x {reps}. Targets: <= 8 ms p50 per message, cold start <= 1 s, "
        "the check adds <= 1 ms beyond the embedding. "
        f"Load average at the end of the timing: {load:.1f} on {os.cpu_count()} cores "
        "(other jobs share the machine: latencies are pessimistic).",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| embed one short message, p50 | {embed_p50:.2f} ms | <= 8 ms |",
        f"| embed one short message, p99 | {_pct(times, 0.99):.2f} ms | |",
        f"| cold start, import to first vector (median of {len(cold)} processes) | "
        f"{statistics.median(cold):.2f} s | <= 1 s |",
        f"| Guard.record() p50 with goal + stagnation, vectors cached | {with_checks:.3f} ms | |",
        f"| Guard.record() p50 without them | {without:.3f} ms | |",
        f"| the check beyond the embedding (difference) | {with_checks - without:.3f} ms | "
        "<= 1 ms |",
        f"| whole check per step, ours: embed the message once + check | "
        f"{embed_p50 + with_checks - without:.2f} ms | |",
        f"| whole check per step, seed reference: encode goal + output, compare | "
        f"{reference:.2f} ms | |",
        "",
        "Accuracy on the labelled set (tests/data/labelled, precision / recall). Ours: the "
        "calibrated cut chosen on train+dev, measured on the held-out test part; the seed "
        "reference has no cut to choose.",
        "",
        "| decision | ours, minilm (test) | ours, ngram (test) | seed reference (test) | "
        "seed reference (all items) |",
        "|---|---|---|---|---|",
        f"| goal reached | {pr(ours['goal'].held_out)} | {pr(ng['goal'].held_out)} | "
        f"{pr(ref_test[0])} | {pr(ref_all[0])} |",
        f"| stagnation | {pr(ours['stagnation'].held_out)} | {pr(ng['stagnation'].held_out)} "
        f"| {pr(ref_test[1])} | {pr(ref_all[1])} |",
        "",
        "Thresholds chosen: minilm goal "
        f"{ours['goal'].best.threshold:.2f}, stagnation {ours['stagnation'].best.threshold:.2f}; "
        f"ngram goal {ng['goal'].best.threshold:.2f}, stagnation "
        f"{ng['stagnation'].best.threshold:.2f}.",
        "",
        "The test part was looked at before the last rule fixes (see "
        "tests/data/labelled/README.md): its first look gave goal precision 0.714 / recall "
        "0.769 with minilm, and the dev part's first look 0.765 / 0.765. The goal figures are "
        "carried by the text rules more than by the cosine: ngram scores the same.",
        "",
        "<details><summary>antiloop calibrate, minilm</summary>",
        "",
        format_report(ours_all, every=10),
        "</details>",
        "",
        "<details><summary>antiloop calibrate, ngram</summary>",
        "",
        format_report(ngram, every=10),
        "</details>",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(json.dumps(run(quick=True)))
