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

from antiloop.embed.ngram import NgramEmbedder
from antiloop.errors import ConfigError

if TYPE_CHECKING:
    from antiloop.embed import Embedder

VECTORS_KEPT = 1024
"""How many vectors a scan keeps (about 4 KB each for the 512 dimensions of ``ngram``)."""

NUMPY_AFTER = 25_000
"""Characters ``ngram`` embeds in plain Python before a scan turns to numpy for the rest.

Importing numpy costs about what embedding 24,000 characters does in plain Python (callgrind:
261 M instructions; about 11,000 a character in Python, 4,100 with numpy, over the 1,429 texts
a corpus scan embeds): a small scan never pays it, a large one pays it once, early.
"""


class ScanVectors:
    """An embedder that remembers the vectors of the texts it embedded, for one scan.

    With the plain ``ngram`` embedder and numpy installed, the texts that come after the first
    ``numpy_after`` characters are embedded by ``antiloop.embed.ngram_numpy`` (the same vectors).
    Not thread-safe: a scan runs in one thread of each process.

    Args:
        inner: the embedder.
        maxsize: how many vectors to keep.
        numpy_after: characters embedded in plain Python before numpy takes over.
    """

    def __init__(
        self, inner: Embedder, maxsize: int = VECTORS_KEPT, numpy_after: int = NUMPY_AFTER
    ) -> None:
        self.inner = inner
        self.maxsize = maxsize
        self.numpy_after = numpy_after
        self._fresh = inner.embed
        # the ngram embedder that numpy may take over once it pays, and what it embedded so far
        self._ngram = inner if type(inner) is NgramEmbedder and _has_numpy() else None
        self._plain = 0
        self.misses = 0
        self.hits = 0
        self._kept: OrderedDict[str, array[float]] = OrderedDict()

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
            fresh = self._embed(todo)
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
            kept.popitem(last=False)
        return out

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self._ngram is not None:
            self._plain += sum(map(len, texts))
            if self._plain > self.numpy_after:
                from antiloop.embed.ngram_numpy import NumpyNgram

                self._fresh = NumpyNgram(self._ngram).embed
                self._ngram = None
        return self._fresh(texts)


def _has_numpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("numpy") is not None
