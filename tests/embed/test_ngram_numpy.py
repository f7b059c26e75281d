"""The ngram embedder's vectors through numpy: the same floats as the plain one, bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from antiloop.embed.ngram import NgramEmbedder

pytest.importorskip("numpy")

from tests.embed.test_ngram import EXACT_TEXTS

from antiloop.embed.ngram_numpy import NumpyNgram

EMBEDDERS = [
    NgramEmbedder(),
    NgramEmbedder(dim=64, n_min=2, n_max=3, words=False),
    NgramEmbedder(dim=2),
    NgramEmbedder(dim=100, n_min=1, n_max=7),
    NgramEmbedder(n_max=9),  # grams too long for one key: the plain path
]

EDGE_TEXTS = [
    "aae eaa",  # with dim=2 its features cancel out: the blank vector
    "abc",
    "ab cd",
    "a\x00b c\x00d and some words",  # a NUL: the plain path
    "aaaa aaaa aaaa aaaa",  # a gram repeated many times counts once
    "word word Word WORD",
    "tab\tand\nnew  lines   collapse",
    "\u212b ligature \ufb01 made ASCII by NFKC",
    "x" * 3000,
]


@pytest.mark.parametrize("embedder", EMBEDDERS, ids=lambda e: e.id)
def test_the_vectors_are_the_plain_embedders(embedder: NgramEmbedder, shared: Path) -> None:
    """On edge cases and slices of the corpus, every vector is the plain one, bit for bit."""
    texts = list(EXACT_TEXTS) + EDGE_TEXTS
    for path in sorted((shared / "corpus").rglob("*.json*"))[:6]:
        raw = path.read_text(encoding="utf-8", errors="replace")
        texts += [raw[i : i + 400] for i in range(0, min(len(raw), 80_000), 4_000)]
    fast = NumpyNgram(embedder)
    assert fast.embed(texts) == embedder.embed(texts)


@given(st.text(st.characters(max_codepoint=127), max_size=300))
def test_any_ascii_text_gives_the_plain_vector(text: str) -> None:
    """Whatever the ASCII text, the numpy vector equals the plain one."""
    embedder = NgramEmbedder()
    assert NumpyNgram(embedder).embed([text]) == embedder.embed([text])


@given(st.text(st.sampled_from("ab \x00c"), max_size=40))
def test_small_alphabets_with_many_repeats_give_the_plain_vector(text: str) -> None:
    """Texts of few letters (grams repeating, buckets colliding) give the plain vector too."""
    for embedder in (NgramEmbedder(dim=2), NgramEmbedder(dim=16, n_min=1, n_max=6)):
        assert NumpyNgram(embedder).embed([text]) == embedder.embed([text])


def test_it_is_the_embedder_it_wraps() -> None:
    """Same id, so the calibrated thresholds of ``ngram-v1`` apply."""
    fast = NumpyNgram(NgramEmbedder(dim=64))
    assert fast.id == NgramEmbedder(dim=64).id
    assert "NumpyNgram(NgramEmbedder(dim=64" in repr(fast)
