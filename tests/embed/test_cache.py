"""CachedEmbedder: vectors kept by text digest in a bounded LRU."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from antiloop.core.errors import ConfigError
from antiloop.embed import CachedEmbedder


class Counting:
    """A fake embedder that records every batch it is asked for."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @property
    def id(self) -> str:
        return "counting"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(len(t)), 1.0] for t in texts]


class Short(Counting):
    """A broken embedder that drops the last vector."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return super().embed(texts)[:-1]


def test_second_request_is_served_from_the_cache() -> None:
    """A text embedded once is not sent to the wrapped embedder again."""
    inner = Counting()
    emb = CachedEmbedder(inner)
    first = emb.embed(["goal", "step"])
    second = emb.embed(["step", "goal"])
    assert inner.calls == [["goal", "step"]]
    assert second == [first[1], first[0]]
    assert (emb.hits, emb.misses) == (2, 2)


def test_a_batch_sends_only_unseen_texts_once_each() -> None:
    """Duplicates in a batch and cached texts are not re-embedded."""
    inner = Counting()
    emb = CachedEmbedder(inner)
    emb.embed(["a"])
    out = emb.embed(["a", "bb", "bb", "ccc"])
    assert inner.calls == [["a"], ["bb", "ccc"]]
    assert out == [[1.0, 1.0], [2.0, 1.0], [2.0, 1.0], [3.0, 1.0]]


def test_least_recently_used_vector_is_evicted() -> None:
    """Past maxsize the least recently used text is forgotten, a recently used one kept."""
    inner = Counting()
    emb = CachedEmbedder(inner, maxsize=2)
    emb.embed(["a", "b"])
    emb.embed(["a"])  # a is now the most recent
    emb.embed(["c"])  # evicts b
    assert len(emb) == 2
    emb.embed(["a", "b"])
    assert inner.calls[-1] == ["b"]


def test_returned_vectors_do_not_alias_the_cache() -> None:
    """Changing a returned vector does not change what the cache returns next."""
    emb = CachedEmbedder(Counting())
    emb.embed(["x"])[0][0] = 99.0
    assert emb.embed(["x"]) == [[1.0, 1.0]]


def test_id_repr_and_unwrapping() -> None:
    """The cache keeps the inner id, reads like its constructor and never stacks on itself."""
    inner = Counting()
    emb = CachedEmbedder(CachedEmbedder(inner), maxsize=8)
    assert emb.inner is inner
    assert emb.id == "counting"
    assert repr(emb) == f"CachedEmbedder({inner!r}, maxsize=8)"


def test_clear_forgets_everything() -> None:
    """After clear() every text is embedded afresh and the counters restart."""
    inner = Counting()
    emb = CachedEmbedder(inner)
    emb.embed(["x"])
    emb.clear()
    emb.embed(["x"])
    assert len(inner.calls) == 2
    assert (emb.hits, emb.misses) == (0, 1)


def test_wrong_number_of_vectors_is_a_config_error() -> None:
    """An inner embedder that returns too few vectors is reported, not silently cached."""
    emb = CachedEmbedder(Short())
    with pytest.raises(ConfigError, match="returned 1 vectors for 2 texts"):
        emb.embed(["a", "b"])
    assert len(emb) == 0


def test_maxsize_must_be_positive() -> None:
    """A cache of no entries is a configuration error."""
    with pytest.raises(ConfigError, match="maxsize"):
        CachedEmbedder(Counting(), maxsize=0)


class Calibrated(Counting):
    """An embedder that states its own thresholds."""

    goal_threshold = 0.31
    stagnation_threshold = 0.77


def test_the_cache_keeps_the_wrapped_embedders_own_thresholds() -> None:
    """A goal or stagnation check over the cache uses the thresholds the embedder states."""
    from antiloop.core.detectors import calibrated_goal_threshold, calibrated_stagnation_threshold

    cached = CachedEmbedder(Calibrated())
    assert calibrated_goal_threshold(cached) == 0.31
    assert calibrated_stagnation_threshold(cached) == 0.77
    plain = CachedEmbedder(Counting())  # none stated: the defaults by id
    assert calibrated_goal_threshold(plain) == calibrated_goal_threshold(Counting())
