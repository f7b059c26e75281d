"""Goal check on the held-out part of the labelled set: precision and recall per embedder.

The cut is chosen by ``antiloop calibrate`` on every goal item outside the held-out part
(``split`` ``test``: tests/data/labelled/goal-holdout-6.jsonl) and measured on that part, for
the shipped model (minilm) and the standard-library ngram embedder. ``--quick`` skips minilm.
"""

from __future__ import annotations

import json
from pathlib import Path

from antiloop.calibration import GoalItem, KindReport, calibrate, load_labelled, score, sweep
from antiloop.core.detectors import GOAL_THRESHOLDS
from antiloop.embed import get_embedder
from antiloop.embed import minilm as minilm_module

ROOT = Path(__file__).resolve().parents[1]
LABELLED = ROOT / "tests" / "data" / "labelled"
HOLDOUT = LABELLED / "goal-holdout-6.jsonl"
#: The target for the shipped model on the held-out part.
TARGET_PRECISION = 0.95
TARGET_RECALL = 0.85
#: Measured once, with the rules as they were, right after the fresh part was committed (the
#: cut each embedder's calibration chose then; see the set's README).
FIRST_LOOK = {"minilm-l6-int8": (1.0, 0.731, 0.31), "ngram-v1": (1.0, 0.731, 0.12)}
#: Every fresh part of this round (issue 28 item 5), in the order written: its first look and
#: its one measurement after the rules were changed on the training part (minilm at 0.19).
ROUNDS = (
    ("goal-holdout-3.jsonl", 79, (0.731, 0.731), (0.909, 0.769), "1st change"),
    ("goal-holdout-4.jsonl", 78, (0.875, 0.808), (0.880, 0.846), "2nd change"),
    ("goal-holdout-5.jsonl", 73, (0.875, 0.808), (0.913, 0.808), "3rd change"),
    ("goal-holdout-6.jsonl", 72, (1.000, 0.731), (1.000, 0.731), "4th change"),
)


#: The reading of the misjudged held-out items when the target was missed (2026-12-02).
WHY = (
    "What changed this round, on the training part only (docs/protocol.md section 5, "
    "antiloop.core.text.done, .negation and .target): coverage alone no longer reaches a "
    "goal, the message must report work (a completion word, a goal verb in its past form, a "
    "past verb of a change, a claim; a goal that asks for a fact is answered by a statement "
    "of it); negation scope decides whether a negation applies to a defect or leftover ('no "
    "test broke', 'nothing older remains', 'failures no longer fail', 'never went above 310 "
    "MB') or to the work ('do not pass'); failures told as the state before the change, in "
    "a relative clause before 'now', in a purpose clause, as a gate ('fails the build if') or "
    "as the diagnosis before the fix do not block, a failure after 'but' does even in the "
    "goal's words; participles dated in the past or done by the system are the state; a "
    "measure reported on the wrong side of the goal's numeric bound blocks. Each fresh "
    "part's misses were general classes, each fixed by a rule once the part became training "
    "data; each new part then showed new wording of the same classes. Pooled over the four "
    "fresh parts, each measured once after its change: precision 82/89 = 0.921, recall "
    "82/104 = 0.788. Why the target is missed on the last part (its misjudged items read "
    "after the figures; no rule changed after), all misses: 'a selector that broke the "
    "layout' (the cause in a relative clause), 'CI now fails under 80%' (a gate without an "
    "object), 'crashes are back to 0.2%' (a recovery read as a revert), 'JPEG output still "
    "gets a white background' (a kept behaviour outside the lists), a telegraphic summary "
    "with no completion word, 'No more leaked connections' (the goal's word read as work), "
    "and a fact answer naming 1 of 7 goal terms. What stands in the way: the rules are word "
    "lists and patterns; unseen final messages bring new words for the same classes, so "
    "each fresh part lands at precision 0.88-1.00 and recall 0.73-0.85 while training "
    "reaches 0.99 / 0.97. A learned classifier for 'reports the work' versus 'describes the "
    "state or a problem', trained on these 686 labelled items, is what the figures point to. "
    "Similarity plays little part: the two embedders misjudge nearly the same items."
)


def _goal(name: str) -> tuple[str, KindReport, list[str], tuple[float, float, float] | None]:
    """The goal calibration for one embedder, its misjudged held-out ids and the shipped cut."""
    embedder = get_embedder(name)
    items = load_labelled(LABELLED)
    report = calibrate(items, embedder)
    goal = next(k for k in report.kinds if k.kind == "goal")
    held = [i for i in items if isinstance(i, GoalItem) and i.split == "test"]
    scored = score(held, embedder)
    wrong = [
        f"{s.item.id} ({'missed' if s.label else 'false'}, {s.item.tag})"
        for s in scored
        if s.decide(goal.best.threshold) != s.label
    ]
    shipped = GOAL_THRESHOLDS.get(report.embedder)
    at_shipped = None
    if shipped is not None and shipped != goal.best.threshold:
        row = sweep(scored, [shipped])[0]
        at_shipped = (shipped, row.precision, row.recall)
    return report.embedder, goal, wrong, at_shipped


def _sizes() -> tuple[int, int, int]:
    items = [i for i in load_labelled(LABELLED) if isinstance(i, GoalItem)]
    new = sum(1 for i in items if i.id.startswith(("rg", "rh", "ri", "rj", "rk", "rl", "rm")))
    return len(items), new, sum(1 for i in items if i.split == "test")


def run(quick: bool = False) -> str:
    """Run the suite; returns its markdown section."""
    names = ["ngram"] if quick or minilm_module.missing_package() else ["minilm", "ngram"]
    total, new, held = _sizes()
    positives = sum(
        1
        for line in HOLDOUT.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["reached"]
    )
    lines = [
        "## Goal check (held-out)",
        "",
        f"`python -m bench goal`: the goal-reached decision (docs/protocol.md section 5) on the "
        f"labelled set tests/data/labelled, {total} goal items, of which {new} were written in "
        "the style of real agents' final messages (successes, summaries with numbers, partial "
        "and undone work, plans, descriptions of the starting state, reverted changes, tests "
        "still failing, intentions, questions).",
        "",
        f"How the split was made: the held-out part is goal-holdout-6.jsonl ({held} pairs, "
        f"{positives} reached): 13 goal groups and 6 unrelated pairs, written fresh and "
        "committed alone before the last rule change of this round. This round wrote four "
        "fresh parts in turn (below): each was committed before any rule change, looked at "
        "once with the rules as they were (the first look), measured once after the rules "
        "were changed on the training part only, and its misjudged items were read only "
        "then; it then became training data (splits dev5, dev6, dev7) and the next part was "
        "written. The cut is chosen on the other "
        f"{total - held} goal items (F0.5, precision >= 0.9, middle of the best plateau) and "
        "measured on the held-out part; the shipped minilm cut (0.19) scores the same. "
        f"Target for the shipped model: precision >= {TARGET_PRECISION} at recall >= "
        f"{TARGET_RECALL}.",
        "",
        "| fresh part | pairs | first look P / R | after the change P / R (minilm 0.19) | rules |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {n} | {a[0]:.3f} / {a[1]:.3f} | {b[0]:.3f} / {b[1]:.3f} | {c} |"
            for name, n, a, b, c in ROUNDS
        ),
        "",
        "| embedder | threshold | held-out precision | held-out recall | TP | FP | FN | TN "
        "| train P / R | train items | held-out items | first look (P / R at the old cut) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name in names:
        ident, goal, wrong, at_shipped = _goal(name)
        h = goal.held_out
        assert h is not None
        first = FIRST_LOOK.get(ident)
        first_text = f"{first[0]:.3f} / {first[1]:.3f} at {first[2]:.2f}" if first else "-"
        lines.append(
            f"| `{ident}` | {goal.best.threshold:.2f} | **{h.precision:.3f}** | "
            f"**{h.recall:.3f}** | {h.tp} | {h.fp} | {h.fn} | {h.tn} | "
            f"{goal.best.precision:.3f} / {goal.best.recall:.3f} | {goal.train_size} | "
            f"{goal.test_size} | {first_text} |"
        )
        if at_shipped is not None:
            notes.append(
                f"`{ident}` at the threshold shipped in antiloop.core.detectors "
                f"({at_shipped[0]:.2f}): precision {at_shipped[1]:.3f}, recall "
                f"{at_shipped[2]:.3f}."
            )
        notes.append(f"`{ident}` misjudged held-out items: {', '.join(wrong) or 'none'}.")
    lines += ["", *(f"- {n}" for n in notes)]
    lines += [
        "",
        "The first look is the held-out part judged by the rules as they were before this "
        "change, at the thresholds then shipped: the honest estimate of how the old rules "
        "met real final messages.",
        "",
        WHY,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick=True))
