"""Embedding less: a batch's texts in one call, and the vectors of the texts a store embedded last.

Every memory has a vector (the schema keeps ``embedding NOT NULL``: a store item is found by
``memory_search`` like any memory), so a store put embeds its text. LangGraph code puts the
same values over and over (a value written again unchanged, a key rewritten with the value it
had), and its batches hold many puts; the model is the slowest part of a put. So a batch embeds
the texts of all its puts in one call before its first statement (no connection is held while
the model runs), and a store remembers the vectors of the last texts it embedded, per kind
(document or query): an op's ``Embed`` request for texts already known is answered here and never
reaches the embedder. Vectors depend on the text only, so a remembered vector is the one the
embedder would give again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, TypeVar

from ..db.requests import Embed, Op

__all__ = ["RecentVectors", "answered", "embed_first"]

T = TypeVar("T")


class RecentVectors:
    """The vectors of the last ``size`` texts embedded (least recently used go first); thread-safe."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[bool, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, query: bool, text: str) -> Any | None:
        with self._lock:
            vector = self._vectors.get((query, text))
            if vector is not None:
                self._vectors.move_to_end((query, text))
            return vector

    def learn(self, query: bool, texts: Sequence[str], vectors: Sequence[Any]) -> None:
        if len(vectors) != len(texts):
            return  # an embedder that answered oddly: remember nothing, the op will say what is wrong
        with self._lock:
            for text, vector in zip(texts, vectors):
                self._vectors[(query, text)] = vector
                self._vectors.move_to_end((query, text))
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


def answered(op: Op[T], recent: RecentVectors, batch: dict[str, Any] | None = None) -> Op[T]:
    """Run ``op``, answering its ``Embed`` requests whose every text is in ``batch`` (this batch's
    document vectors) or ``recent``; every other request goes to the driver, and what the embedder
    answers is remembered. Errors thrown in by the driver reach ``op`` where it asked."""
    answer: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                request = op.throw(error) if error is not None else op.send(answer)
            except StopIteration as stop:
                return stop.value
            answer, error = None, None
            if isinstance(request, Embed):
                known = [(batch or {}).get(text) if not request.query else None for text in request.texts]
                known = [v if v is not None else recent.get(request.query, t) for v, t in zip(known, request.texts)]
                if all(v is not None for v in known):
                    answer = known
                    continue
            try:
                answer = yield request
            except Exception as exc:  # the driver's: thrown into the op at its request
                error = exc
                continue
            if isinstance(request, Embed):
                recent.learn(request.query, request.texts, answer)
    finally:
        op.close()


def embed_first(texts: Sequence[str], recent: RecentVectors) -> Op[dict[str, Any]]:
    """The document vectors of ``texts``: those not known yet in one ``Embed`` request."""
    batch: dict[str, Any] = {}
    missing = []
    for text in dict.fromkeys(texts):
        vector = recent.get(False, text)
        if vector is None:
            missing.append(text)
        else:
            batch[text] = vector
    if missing:
        vectors = yield Embed(tuple(missing))
        recent.learn(False, missing, vectors)
        batch.update(zip(missing, vectors))
    return batch
