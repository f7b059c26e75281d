"""Goal check on the held-out part of the labelled set: precision and recall per embedder.

The cut is chosen by ``antiloop calibrate`` on every goal item outside the held-out part
(``split`` ``test``: tests/data/labelled/goal-holdout-2.jsonl) and measured on that part, for
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
HOLDOUT = LABELLED / "goal-holdout-2.jsonl"
#: The target for the shipped model on the held-out part.
TARGET_PRECISION = 0.95
TARGET_RECALL = 0.85
#: Measured once, with the rules as they were, right after the fresh part was committed (the
#: cut each embedder's calibration chose then; see the set's README).
FIRST_LOOK = {"minilm-l6-int8": (0.773, 0.708, 0.02), "ngram-v1": (0.773, 0.708, 0.08)}


#: The reading of the misjudged held-out items when the target was missed (2026-12-02).
WHY = (
    "What changed this round, on the training part only (the old held-out part's misses, now "
    "training data): the stemmer drops a final e after its suffix (rotate, rotated -> rotat: a "
    "verb and its forms meet), 'cleaned up' is a completion cue, 'no longer <verb>s' reports a "
    "change unless the verb is a working behaviour ('no longer works' still blocks), and a part "
    "count in parentheses is a statistic ('(11 of 14)'). Training misses went from 11 to 7 at "
    "the same 3 false stops; on the fresh part the figures did not move. "
    "Why the target is missed (the misjudged fresh items as read on 2026-12-02, after the "
    "figures above; no rule was changed after reading them): the 5 false stops are starting "
    "states told in the goal's words with no cue at all ('the backup job has failed every "
    "night since Monday', 'the dashboard takes 5.6 s to load', 'the onboarding emails exist "
    "only in English'): a message that covers half the goal's terms is taken as reached even "
    "with no completion word. The 7 misses are successes told in negative words the rules "
    "read as a negation or failure: 'grep finds no reference left', 'No code imports "
    "legacy_auth any more', 'no longer flaky' (an adjective, not a verb), 'without a "
    "failure', 'nothing older remains', 'customer_id is still accepted', 'no client-facing "
    "test broke'. Both classes are general: the first needs a completion cue (or a claim) "
    "before coverage alone may reach a goal (on the training part that costs recall, 0.919 -> "
    "0.860, for precision 0.977 -> 0.992); the second needs negation scope (what the "
    "negation applies to: a defect or the work) rather than word lists. Similarity plays no "
    "part: the two embedders misjudge the same items."
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
    new = sum(1 for i in items if i.id.startswith(("rg", "rh", "ri")))
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
        f"How the split was made: the held-out part is goal-holdout-2.jsonl ({held} pairs, "
        f"{positives} reached): 12 goal groups and 6 unrelated pairs, written fresh and "
        "committed before any rule change of this round; the previous held-out part "
        "(goal-holdout.jsonl, ids rh...) became training data (split dev3). The rules were "
        "then changed on the training part only; the held-out part's aggregate figures were "
        "looked at once before the change (the first look) and once after it, and its "
        "misjudged items were read only at the end, to explain the figures below. The cut is "
        f"chosen on the other {total - held} goal items (F0.5, precision >= 0.9, middle of the "
        "best plateau) and measured on the held-out part. "
        f"Target for the shipped model: precision >= {TARGET_PRECISION} at recall >= "
        f"{TARGET_RECALL}.",
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
