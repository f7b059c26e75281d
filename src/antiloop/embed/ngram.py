"""A standard-library embedder: hashed character 3- to 5-grams and words, L2-normalised.

It sees spelling, not meaning: verbatim and near-verbatim repeats score high, paraphrases do
not (shared/reference/embeddings.md, section 4). It is the fallback when the ``embed`` extra is
absent, and a fast, deterministic embedder for tests.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
import unicodedata
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

_WORD = re.compile(r"\w+")
_WORD_BYTES = re.compile(rb"\w+")  # the same words in an ASCII text
_NUL = b"\x00"
_SPACE = re.compile(r"\s+")
_EMPTY_FEATURE = "\x00\x00empty"
_Text = TypeVar("_Text", str, bytes)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class NgramEmbedder:
    """Hashes the character n-grams and words of the normalised text into ``dim`` buckets.

    The text is NFKC-normalised, case-folded and its whitespace collapsed. Each distinct
    character n-gram (``n_min`` to ``n_max`` long, the text padded with a space on each side)
    and, with ``words``, each distinct word adds +1 or -1 to one bucket: the bucket and the sign
    come from CRC-32, so the vectors are the same in every process and on every machine.
    Features count once however often they occur, so frequent grams ("the") do not dominate.
    Blank texts all map to one fixed unit vector, so blank messages are equal to each other.

    Args:
        dim: number of dimensions.
        n_min: shortest character n-gram.
        n_max: longest character n-gram.
        words: also hash whole words.

    Example::

        NgramEmbedder().embed(["pytest: 3 failed", "pytest: 4 failed"])
    """

    dim: int = 512
    n_min: int = 3
    n_max: int = 5
    words: bool = True

    def __post_init__(self) -> None:
        if self.dim < 2 or not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"bad NgramEmbedder parameters: {self!r}")

    @property
    def id(self) -> str:
        """``ngram-v1``, with the parameters appended when they differ from the defaults."""
        if (self.dim, self.n_min, self.n_max, self.words) == (512, 3, 5, True):
            return "ngram-v1"
        return f"ngram-v1-d{self.dim}-n{self.n_min}-{self.n_max}{'-w' if self.words else ''}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of length ``dim`` per text, in order."""
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        norm = _normal_text(text)
        features: set[bytes]
        if not norm:
            features = {_utf8(_EMPTY_FEATURE)}
        elif norm.isascii():
            # The grams are slices of the text's bytes, encoded once and used as they are (the
            # same bytes as each gram's UTF-8, so the same vector). callgrind, the 1,429 texts
            # a corpus scan embeds: 12% fewer instructions than encoding each gram.
            features = _grams(f" {norm} ".encode(), self.n_min, self.n_max)
        else:
            features = set(map(_utf8, _grams(f" {norm} ", self.n_min, self.n_max)))
        if self.words and norm:
            features |= _word_features(norm)
        dim = self.dim
        vec = [0.0] * dim
        for h in map(zlib.crc32, features):
            vec[h % dim] += 1.0 if h & 0x80000000 else -1.0
        total = math.sqrt(sum(map(operator.mul, vec, vec)))
        if total == 0.0:  # the signed features cancelled out exactly: use the blank vector
            return self._one("")
        return list(map(operator.truediv, vec, itertools.repeat(total)))


def _normal_text(text: str) -> str:
    """The text as the embedder sees it: NFKC-normalised, case-folded, white space collapsed."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _word_features(norm: str) -> set[bytes]:
    """The word features of a normalised text: each distinct word after a NUL, as UTF-8."""
    if norm.isascii():  # as bytes, no word encoded (callgrind: 2% fewer instructions to embed)
        return set(map(_NUL.__add__, _WORD_BYTES.findall(norm.encode())))
    return {_utf8("\x00" + w) for w in _WORD.findall(norm)}


def _grams(padded: _Text, n_min: int, n_max: int) -> set[_Text]:
    size = len(padded)
    grams: set[_Text] = set()
    for n in range(n_min, n_max + 1):
        grams.update(padded[i : i + n] for i in range(max(1, size - n + 1)))
    return grams
