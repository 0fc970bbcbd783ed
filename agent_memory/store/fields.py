"""One vector per indexed field: the embedder of a store with an index config, as LangGraph's.

LangGraph's stores embed each path of ``index['fields']`` (or of a put's ``index=[...]``) on
its own with ``index['embed']`` and score an item by its best field. :class:`FieldEmbedder`
is that embedder: ``embed`` (LangChain ``Embeddings``, a function, ``"provider:model"``, read by
LangGraph's ``ensure_embeddings``) of ``dims`` dimensions, or the service's own. It embeds what a
batch needs before the batch runs (no connection is held while a model runs), in one call for
the puts' texts, and remembers the last vectors it made. Its *space* (the embedder's name and
size) is stored with every vector (``store_vectors``): a query meets only vectors of its space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, Op, PutOp, SearchOp
from langgraph.store.base.embed import ensure_embeddings

from ..embeddings import embedding_dimensions
from ..errors import ConfigurationError, EmbeddingDimensionMismatchError
from ..validation import MAX_QUERY_LENGTH
from .ops import StoreSettings, field_texts_to_embed
from .vectors import RecentVectors

__all__ = ["FieldEmbedder", "FieldVectors", "field_work"]


@dataclass(frozen=True, slots=True)
class FieldVectors:
    """The vectors a batch needs from a store's field embedder: per text of an indexed field
    (``documents``) and per search query (``queries``)."""

    documents: Mapping[str, Sequence[float]] = field(default_factory=dict)
    queries: Mapping[str, Sequence[float]] = field(default_factory=dict)


def field_work(settings: StoreSettings, ops: Sequence[Op]) -> tuple[list[str], list[str]]:
    """What the field embedder must embed for ``ops``: the texts of the puts' indexed fields
    (those the gate lets through) and the searches' queries, each once."""
    documents: list[str] = []
    questions: list[str] = []
    for op in ops:
        if isinstance(op, PutOp) and op.value is not None:
            documents.extend(text for _, text in field_texts_to_embed(settings, op.value, op.index))
        elif (isinstance(op, SearchOp) and settings.embeds and isinstance(op.query, str)
              and 0 < len(op.query.strip()) <= MAX_QUERY_LENGTH):
            questions.append(op.query.strip())
    return list(dict.fromkeys(documents)), list(dict.fromkeys(questions))


class FieldEmbedder:
    """The embedder of one store's field vectors, its space, and the vectors it made last."""

    def __init__(self, service_embeddings: Embeddings, index: IndexConfig) -> None:
        embed = index.get("embed")
        #: whether this is the service's own embedder (a memory saved another way, which has no
        #: field vectors, is then scored by its own vector)
        self.own = embed is None or embed is service_embeddings
        if self.own:
            self.embeddings = service_embeddings
            self.dims = embedding_dimensions(service_embeddings)
            self.space = f"memory:{self.dims}"
        else:
            try:
                self.embeddings = ensure_embeddings(embed)
            except Exception as exc:  # LangGraph's words for a string it cannot load, a bad object
                raise ConfigurationError(f"index['embed'] could not be used: {exc}; give an Embeddings object, a "
                                         "function of a list of texts, or a 'provider:model' string") from exc
            self.dims = int(index["dims"])
            self.space = f"{_name(embed)}:{self.dims}"
        self._recent = RecentVectors()

    def _known(self, documents: list[str], questions: list[str]) -> FieldVectors:
        recent = self._recent
        return FieldVectors({t: v for t in documents if (v := recent.get(False, t)) is not None},
                            {q: v for q in questions if (v := recent.get(True, q)) is not None})

    def _learn(self, documents: list[str], vectors: Sequence[Any], questions: list[str], answers: Sequence[Any],
               also: RecentVectors) -> None:
        for kind, texts, found in ((False, documents, vectors), (True, questions, answers)):
            if len(found) != len(texts):
                raise ConfigurationError(f"index['embed'] answered {len(found)} vectors for {len(texts)} texts")
            for vector in found:
                if len(vector) != self.dims:
                    raise EmbeddingDimensionMismatchError(
                        f"index['embed'] made a {len(vector)}-dimensional vector but index['dims'] is {self.dims}; "
                        "give the dims your embedder makes")
            self._recent.learn(kind, texts, [list(map(float, v)) for v in found])
        if self.own:  # the memory's own vector of the same text is known too: not embedded twice
            also.learn(False, documents, vectors)

    def embed(self, documents: list[str], questions: list[str], *, also: RecentVectors) -> FieldVectors:
        """The vectors of ``documents`` and ``questions``, those not known yet embedded now
        (blocking); ``also``: the store's memory vectors, told what the service's embedder made."""
        known = self._known(documents, questions)
        todo = [t for t in documents if t not in known.documents]
        asked = [q for q in questions if q not in known.queries]
        if todo or asked:
            vectors = self.embeddings.embed_documents(todo) if todo else []
            answers = [self.embeddings.embed_query(q) for q in asked]
            self._learn(todo, vectors, asked, answers, also)
        return self._known(documents, questions)

    async def aembed(self, documents: list[str], questions: list[str], *, also: RecentVectors) -> FieldVectors:
        """:meth:`embed` for asyncio (LangChain's ``aembed_*``)."""
        known = self._known(documents, questions)
        todo = [t for t in documents if t not in known.documents]
        asked = [q for q in questions if q not in known.queries]
        if todo or asked:
            vectors = await self.embeddings.aembed_documents(todo) if todo else []
            answers = [await self.embeddings.aembed_query(q) for q in asked]
            self._learn(todo, vectors, asked, answers, also)
        return self._known(documents, questions)


def _name(embed: Any) -> str:
    """The name of an embedder's space: its ``"provider:model"`` string, else its class (or function)."""
    if isinstance(embed, str):
        return embed
    kind = embed if callable(embed) and not isinstance(embed, Embeddings) else type(embed)
    return f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', type(kind).__name__)}"
