"""The vectors of one scan, by text: a message that comes back is embedded once.

Agents repeat themselves, within a run (the loops a scan looks for) and across runs (the same
templates); of the 2,020 messages the stagnation check embeds in the shared corpus, 1,892 are
distinct. The cache is bounded (the most recently used texts) and keeps each vector as an array
of doubles, the embedder's own floats, so a vector from the cache is the one the embedder gave.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from antiloop.core.errors import ConfigError

if TYPE_CHECKING:
    from antiloop.embed import Embedder

VECTORS_KEPT = 1024
"""How many vectors a scan keeps (about 4 KB each for the 512 dimensions of ``ngram``)."""


class ScanVectors:
    """An embedder that remembers the vectors of the texts it embedded, for one scan.

    Not thread-safe: a scan runs in one thread of each process.

    Args:
        inner: the embedder.
        maxsize: how many vectors to keep.
    """

    def __init__(self, inner: Embedder, maxsize: int = VECTORS_KEPT) -> None:
        self.inner = inner
        self.maxsize = maxsize
        self.misses = 0
        self.hits = 0
        self._kept: OrderedDict[str, array[float]] = OrderedDict()
        self._single: dict[str, array[float]] = {}  # of texts kept: the vector32 arrays

    def __getattr__(self, name: str) -> object:
        # what else the inner embedder says of itself (its calibrated thresholds) shows through
        if name.startswith("_") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def id(self) -> str:
        """The inner embedder's id: the vectors are its own."""
        return self.inner.id

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; the texts not kept go to the inner embedder at once."""
        kept = self._kept
        todo = list(dict.fromkeys(t for t in texts if t not in kept))
        if todo:
            fresh = self.inner.embed(todo)
            if len(fresh) != len(todo):
                raise ConfigError(
                    f"embedder {self.inner.id!r} returned {len(fresh)} vectors "
                    f"for {len(todo)} texts"
                )
            for text, vector in zip(todo, fresh, strict=True):
                kept[text] = array("d", vector)
        self.misses += len(todo)
        self.hits += len(texts) - len(todo)
        out = []
        for text in texts:
            kept.move_to_end(text)
            out.append(kept[text].tolist())
        while len(kept) > self.maxsize:
            self._single.pop(kept.popitem(last=False)[0], None)
        return out

    def vector32(self, text: str) -> array[float]:
        """The text's vector in single precision, as the detectors keep it; made once, kept.

        The same values as ``array("f", self.embed([text])[0])``, without a list each time.
        """
        single = self._single.get(text)
        if single is not None:
            self.hits += 1
            self._kept.move_to_end(text)
            return single
        single = array("f", self.embed([text])[0])
        if text in self._kept:
            self._single[text] = single
        return single
