"""The ``ngram`` embedder's vectors computed with numpy: the same floats, bit for bit.

For a scan, which embeds thousands of messages (``antiloop.scan.vectors`` picks it when numpy
is installed). The hooks never import it: numpy takes longer to import than a hook may run.

CRC-32 is affine over GF(2). Starting from a zero register, each byte moves the register as the
table-driven update ``r = (r >> 8) ^ TABLE[(r ^ byte) & 0xFF]``, linear in ``r`` and the byte;
and ``crc32(m) = register(m) ^ crc32(n zero bytes)`` for any ``m`` of ``n`` bytes. So the
registers of every window of a text, one byte longer at each round, are a few array operations
over its bytes, and the n-grams of each length are the windows after ``n`` rounds. The buckets
and signs are those of ``zlib.crc32``; the bucket sums are integers, exact in any order; the
norm is the square root of an exact integer; the division is IEEE's: the vectors are the ones
``NgramEmbedder`` gives, which the tests check bit for bit.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from antiloop.embed.ngram import NgramEmbedder, normal_text, word_features

_KEY_BYTES = 7
"""Grams up to this long are told apart by one 64-bit key; longer ones take the slow path."""
_8 = np.uint32(8)
_LOW = np.uint64(0xFFFFFFFF)


def _crc_table() -> Any:
    table = []
    for byte in range(256):
        r = byte
        for _ in range(8):
            r = (r >> 1) ^ (0xEDB88320 if r & 1 else 0)
        table.append(r)
    return np.array(table, dtype=np.uint32)


_TABLE = _crc_table()
_BLANKS = [zlib.crc32(bytes(n)) for n in range(_KEY_BYTES + 1)]


class NumpyNgram:
    """``NgramEmbedder``'s vectors, computed with numpy; the texts it cannot do go to it.

    Texts that are not ASCII, hold a NUL or are shorter than the longest gram are embedded by
    the wrapped embedder itself (a few in a corpus).

    Args:
        inner: the ngram embedder whose vectors to give.
    """

    def __init__(self, inner: NgramEmbedder) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"NumpyNgram({self.inner!r})"

    @property
    def id(self) -> str:
        """The wrapped embedder's id: the vectors are its own."""
        return self.inner.id

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector of length ``dim`` per text, in order."""
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        inner = self.inner
        norm = normal_text(text)
        padded = f" {norm} ".encode() if norm.isascii() else b""
        if len(padded) < max(inner.n_max, 3) or inner.n_max > _KEY_BYTES or b"\x00" in padded:
            return inner.embed([text])[0]
        found = _gram_hashes(padded, inner.n_min, inner.n_max)
        if inner.words:
            words = word_features(norm)
            found = np.concatenate(
                (found, np.fromiter(map(zlib.crc32, words), np.uint32, len(words)))
            )
        signs = np.where(found & np.uint32(0x80000000), 1.0, -1.0)
        vec = np.bincount(found % np.uint32(inner.dim), weights=signs, minlength=inner.dim)
        total = math.sqrt(float(np.dot(vec, vec)))
        if total == 0.0:  # the signed features cancelled out exactly: the blank vector
            return inner.embed([""])[0]
        out: list[float] = (vec / total).tolist()
        return out


def _gram_hashes(padded: bytes, n_min: int, n_max: int) -> Any:
    """The CRC-32 of each distinct gram of ``n_min`` to ``n_max`` bytes."""
    data = np.frombuffer(padded, dtype=np.uint8)
    size = len(data)
    register = np.take(_TABLE, data)  # one byte from the zero register
    keys = [_keys(register ^ np.uint32(_BLANKS[1]), data, 1)] if n_min == 1 else []
    for n in range(2, n_max + 1):
        count = size - n + 1
        register = register[:count]
        low = register.astype(np.uint8)
        low ^= data[n - 1 : n - 1 + count]
        register = (register >> _8) ^ np.take(_TABLE, low)
        if n >= n_min:
            keys.append(_keys(register ^ np.uint32(_BLANKS[n]), data, n))
    found = np.sort(np.concatenate(keys))
    first = np.empty(len(found), dtype=bool)  # np.unique gives the same in 5 times the time
    first[0] = True
    np.not_equal(found[1:], found[:-1], out=first[1:])
    return (found[first] & _LOW).astype(np.uint32)


def _keys(crc: Any, data: Any, n: int) -> Any:
    """One key a gram of ``n`` bytes, equal for equal grams only: its CRC, first bytes, ``n``.

    CRC-32 tells apart any two texts of up to 4 bytes (it is a one-to-one linear map of them),
    so a longer gram is told apart by its CRC and its first ``n - 4`` bytes.
    """
    key = crc.astype(np.uint64) | np.uint64(n << 56)
    for i in range(n - 4):
        key |= data[i : i + len(crc)].astype(np.uint64) << np.uint64(32 + 8 * i)
    return key
