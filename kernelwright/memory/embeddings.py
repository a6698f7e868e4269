"""Optional embedding encoder for skill ranking, used only when a model is already on disk.

We never download: the model comes from KW_EMBEDDING_MODEL (a local path or a model id
present in the Hugging Face cache) or the small default model if cached. Anything missing or broken
means None, and retrieval stays on BM25 without a word, as the issue asks.
"""
from __future__ import annotations

import importlib.util
import math
import os
from typing import Callable, Sequence

from kernelwright import envvars

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_ENV = "KW_EMBEDDING_MODEL"
DISABLE_ENV = "KW_NO_EMBEDDINGS"


def local_encoder() -> Callable[[list[str]], Sequence[Sequence[float]]] | None:
    if envvars.get(DISABLE_ENV) or importlib.util.find_spec("sentence_transformers") is None:
        return None
    try:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: never reach the network
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415 -- sentence-transformers is optional (not a dependency) and heavy (torch models): BM25 alone without it

        model = SentenceTransformer(envvars.get(MODEL_ENV) or DEFAULT_MODEL, local_files_only=True)
    except Exception:  # noqa: BLE001 -- no model cached, an old library, a broken install: BM25 it is
        return None
    return lambda texts: model.encode(list(texts), normalize_embeddings=True).tolist()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
