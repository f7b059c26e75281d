"""Embedders: texts in, unit vectors out, for the semantic checks (goal reached, stagnation).

Built-ins are found by name the way a third party's are::

    "ngram"                              stdlib character n-grams (lexical only, no extra)
    "minilm"                             all-MiniLM-L6-v2 int8 ONNX (extra: antiloop[embed])
    "sentence-transformers:<name|path>"  any sentence-transformers model the user has
    "package.module:attr"                a third party's Embedder (class, factory or instance)
    "auto" / "default"                   minilm when the extra is installed, else ngram

Entry points in the group ``antiloop.embedders`` are found by their name as well.

Each implements the ``Embedder`` protocol of the core (``antiloop.core.semantic``, importable
here too). Thresholds are per model, so every embedder has an ``id`` that is stored beside them.
Importing this package imports neither numpy nor onnxruntime; ``minilm`` loads them at its
first ``embed``.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import operator
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence

from antiloop.core.errors import ConfigError
from antiloop.core.semantic import Embedder

__all__ = [
    "BUILTIN",
    "CachedEmbedder",
    "Embedder",
    "cosine",
    "get_embedder",
]

ENTRY_POINT_GROUP = "antiloop.embedders"

#: Built-in embedders by name, as ``"module:attr"`` (the registry third parties extend).
BUILTIN: dict[str, str] = {
    "ngram": "antiloop.embed.ngram:NgramEmbedder",
    "minilm": "antiloop.embed.minilm:MiniLMEmbedder",
}

_ST_PREFIX = "sentence-transformers:"
_notice_lock = threading.Lock()
_notice_shown = False


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors, in [-1, 1]; 0.0 when either is all zeros.

    Raises:
        ValueError: the vectors differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"vectors differ in length: {len(a)} and {len(b)}")
    dot = float(sum(map(operator.mul, a, b)))
    na = math.sqrt(float(sum(map(operator.mul, a, a))))
    nb = math.sqrt(float(sum(map(operator.mul, b, b))))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / (na * nb)))


class CachedEmbedder:
    """Wraps an embedder and keeps its vectors by text digest (bounded LRU).

    Each text is embedded once while it stays among the ``maxsize`` most recently used; a batch
    sends only its unseen texts to the wrapped embedder, each once. Safe to share between threads.

    Args:
        inner: the embedder to wrap (a ``CachedEmbedder`` is unwrapped, not stacked).
        maxsize: how many vectors to keep.

    Example::

        emb = CachedEmbedder(get_embedder("minilm", cached=False))
        emb.embed(["Fix the failing login test"])  # the model runs
        emb.embed(["Fix the failing login test"])  # from the cache
    """

    def __init__(self, inner: Embedder, maxsize: int = 4096) -> None:
        if maxsize < 1:
            raise ConfigError(f"CachedEmbedder maxsize must be at least 1, not {maxsize}")
        if isinstance(inner, CachedEmbedder):
            inner = inner.inner
        self.inner: Embedder = inner
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[bytes, tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, maxsize={self.maxsize})"

    @property
    def id(self) -> str:
        """The wrapped embedder's id: caching does not change the vectors."""
        return self.inner.id

    @property
    def goal_threshold(self) -> float | None:
        """The wrapped embedder's own goal threshold, if it states one."""
        value = getattr(self.inner, "goal_threshold", None)
        return float(value) if isinstance(value, int | float) else None

    @property
    def stagnation_threshold(self) -> float | None:
        """The wrapped embedder's own stagnation threshold, if it states one."""
        value = getattr(self.inner, "stagnation_threshold", None)
        return float(value) if isinstance(value, int | float) else None

    def __len__(self) -> int:
        return len(self._vectors)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order, from the cache where it can."""
        keys = [_digest(t) for t in texts]
        found: dict[bytes, tuple[float, ...]] = {}
        todo: dict[bytes, str] = {}
        with self._lock:
            for key, text in zip(keys, texts, strict=True):
                hit = self._vectors.get(key)
                if hit is not None:
                    self._vectors.move_to_end(key)
                    found[key] = hit
                    self.hits += 1
                elif key not in todo:
                    todo[key] = text
                    self.misses += 1
        if todo:
            fresh = self.inner.embed(list(todo.values()))
            if len(fresh) != len(todo):
                raise ConfigError(
                    f"embedder {self.inner.id!r} returned {len(fresh)} vectors "
                    f"for {len(todo)} texts"
                )
            with self._lock:
                for key, vec in zip(todo, fresh, strict=True):
                    found[key] = self._vectors[key] = tuple(vec)
                    self._vectors.move_to_end(key)
                while len(self._vectors) > self.maxsize:
                    self._vectors.popitem(last=False)
        return [list(found[k]) for k in keys]

    def clear(self) -> None:
        """Forget every vector and reset the counters."""
        with self._lock:
            self._vectors.clear()
            self.hits = self.misses = 0


def get_embedder(name: str = "auto", *, cached: bool = True) -> Embedder:
    """The embedder a config names, wrapped in a :class:`CachedEmbedder` unless ``cached=False``.

    Args:
        name: ``ngram``, ``minilm``, ``sentence-transformers:<name-or-path>``, ``module:attr``,
            an entry point name of the group ``antiloop.embedders``, or ``auto``/``default``
            (minilm when the ``embed`` extra is installed; otherwise ngram, after a one-line
            notice on stderr, once per process, that the semantic checks are lexical only).
        cached: wrap the embedder in a :class:`CachedEmbedder`.

    Raises:
        ConfigError: the name is unknown or does not give an embedder.
        MissingExtra: the named embedder needs a package that is not installed.
    """
    name = name.strip()
    shared = _SHARED
    if shared is not None and cached:
        found = shared.get(name)
        if found is None:
            found = shared[name] = CachedEmbedder(_resolve(name))
        return found
    embedder = _resolve(name)
    return CachedEmbedder(embedder) if cached else embedder


_SHARED: dict[str, Embedder] | None = None


def share_embedders() -> None:
    """From now on, one cached embedder per name for the whole process.

    For long-lived processes that build a guard per request (the hook daemon): the model is
    loaded once instead of at every goal or stagnation check. Embedders are thread-safe.
    """
    global _SHARED  # a process-wide switch, set once
    if _SHARED is None:
        _SHARED = {}


def _resolve(name: str) -> Embedder:
    if name in ("auto", "default"):
        from antiloop.embed import minilm

        if minilm.missing_package() is None:
            return minilm.MiniLMEmbedder()
        _lexical_notice()
        return _resolve("ngram")
    if name in BUILTIN:
        return _instantiate(_load_attr(BUILTIN[name], name), name)
    if name.startswith(_ST_PREFIX):
        from antiloop.embed.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(name[len(_ST_PREFIX) :])
    if ":" in name:
        return _instantiate(_load_attr(name, name), name)
    target = _entry_point(name)
    if target is None:
        known = ", ".join([*BUILTIN, "auto", f"{_ST_PREFIX}<name-or-path>", "module:attr"])
        raise ConfigError(f"unknown embedder {name!r}; known: {known}")
    return _instantiate(target, name)


def _load_attr(spec: str, name: str) -> object:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"embedder {name!r} is not 'module:attr'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"embedder {name!r}: cannot import module {module_name!r}") from exc
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(
                f"embedder {name!r}: module {module_name!r} has no attribute {attr!r}"
            ) from None
    return obj


def _entry_point(name: str) -> object | None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        try:
            obj: object = ep.load()
        except ImportError as exc:
            raise ConfigError(f"embedder {name!r}: cannot load entry point {ep.value!r}") from exc
        return obj
    return None


def _instantiate(obj: object, name: str) -> Embedder:
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Embedder)):
        obj = obj()
    if not isinstance(obj, Embedder):
        raise ConfigError(f"embedder {name!r} gives {obj!r}, which has no 'id' and 'embed'")
    return obj


def _lexical_notice() -> None:
    global _notice_shown
    with _notice_lock:
        if _notice_shown:
            return
        _notice_shown = True
    print(
        "antiloop: the 'embed' extra is not installed, so the semantic checks (goal, stagnation) "
        "are lexical only (ngram embedder); pip install -e '.[embed]' for minilm",
        file=sys.stderr,
    )


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
