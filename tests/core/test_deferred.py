"""Deferred readings and the text budget: readings made once, texts dropped oldest first,
fallback readings that only the exact digest matches."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from antiloop.core.deferred import BUDGET, Deferred, TextBudget, exact_digest, fallback, is_fallback
from antiloop.core.step import FileState


@pytest.fixture
def small_budget() -> Iterator[None]:
    """The global text budget at 2 KiB: a text over 128 bytes is read at once."""
    limit = BUDGET.limit
    BUDGET.clear()
    BUDGET.limit = 2048
    yield
    BUDGET.clear()
    BUDGET.limit = limit


def _text(output: str = "x") -> Deferred:
    return Deferred("grep", False, output, None, None, {})


def test_a_lone_surrogate_has_an_exact_digest():
    assert exact_digest("a\ud800", None) == "421ebafec07cebb6"
    assert exact_digest(None, "b\udfff") == "ad82c75434343a98"


def test_fallback_readings_carry_only_the_digest_the_exit_code_and_the_files():
    files = (("a.py", "1", None),)
    found = fallback("abc", 1, files)
    assert is_fallback(found)
    assert (found.exact, found.exit_code, found.scrubbed, found.head) == ("abc", 1, "", "")
    assert (found.count_only, found.files) == (False, files)


def test_a_kept_text_has_no_exact_digest_until_it_is_read():
    text = _text("a.py:1: x")
    assert text.exact == ""
    text.readings()
    assert text.exact == exact_digest("a.py:1: x", None)


def test_a_dropped_text_falls_back_with_its_files():
    text = Deferred("edit", False, "ok", None, 0, {"a.py": FileState("1", 2.0)})
    text.drop()
    found = text.readings()
    assert is_fallback(found)
    assert (found.exact, found.files) == ("", (("a.py", "1", 2.0),))


def test_a_text_of_a_sixteenth_of_the_budget_is_kept_and_a_bigger_error_is_read(small_budget):
    assert _text("o" * 64).made is None  # 64 + 64 bytes: exactly 2048 // 16
    assert _text("o" * 57).made is None
    big_error = Deferred("bash", True, None, "e" * 100, 1, {})
    assert big_error.made is not None
    assert not big_error.kept


def test_a_new_budget_is_empty():
    budget = TextBudget(100)
    assert (budget.used, len(budget)) == (0, 0)
    assert repr(budget) == "TextBudget(limit=100, used=0, texts=0)"


def test_a_budget_holds_up_to_its_limit_then_drops_the_oldest_with_its_digest():
    budget = TextBudget(200)
    first, second, third = _text("first"), _text("second"), _text("third")
    budget.keep(first, 100)
    budget.keep(second, 100)
    assert (budget.used, len(budget), first.kept) == (200, 2, True)
    budget.keep(third, 50)
    assert (budget.used, len(budget)) == (150, 2)
    assert not first.kept
    assert first.exact == exact_digest("first", None)


def test_a_budget_passes_over_a_text_already_dropped():
    budget = TextBudget(100)
    dropped, other = _text("a"), _text("b")
    budget.keep(dropped, 60)
    dropped.drop()  # gone from the global budget only
    budget.keep(other, 60)
    assert (budget.used, dropped.exact) == (60, "")


def test_a_forgotten_text_gives_its_bytes_back():
    budget = TextBudget(1000)
    kept, gone = _text("a"), _text("b")
    budget.keep(kept, 30)
    budget.keep(gone, 100)
    budget.forget(gone)
    assert (budget.used, len(budget)) == (30, 1)


def test_a_text_whose_record_is_gone_gives_its_bytes_back():
    budget = TextBudget(1000)
    kept = _text("a")
    budget.keep(kept, 30)
    budget.keep(_text("b"), 100)
    gc.collect()
    assert (budget.used, len(budget)) == (30, 1)


def test_clearing_a_budget_lets_every_text_go():
    budget = TextBudget(1000)
    text = _text("a")
    budget.keep(text, 30)
    budget.clear()
    assert not text.kept
    assert (budget.used, len(budget)) == (0, 0)
