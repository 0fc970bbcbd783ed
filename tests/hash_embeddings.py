"""A deterministic embedder for tests about the schema rather than the model: words hashed
into ``dims`` buckets, normalised, so models differ by size and the same text gets the same
vector. Import it as ``from hash_embeddings import HashEmbeddings`` (``tests/`` is on the path)."""

from __future__ import annotations

import hashlib
import math
import re

from langchain_core.embeddings import Embeddings


class HashEmbeddings(Embeddings):
    """Words hashed into ``dims`` buckets, normalized: same text, same vector; models differ by size."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.model = f"hash-{dims}"
        self.calls: list[int] = []

    def _vector(self, text: str) -> list[float]:
        v = [0.01] * self.dims
        for word in re.findall(r"\w+", text.lower()):
            v[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims] += 1.0
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)
