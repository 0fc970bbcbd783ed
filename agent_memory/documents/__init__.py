"""Documents that teach: cut into passages (:mod:`.chunks`), searchable by passage
(:mod:`.search`), and learned from into memories that point back at their passage (:mod:`.learn`)."""

from .chunks import DEFAULT_MAX_CHARS, DEFAULT_OVERLAP, Passage, chunk_document
from .learn import MAX_DOCUMENT_PROPOSALS, DocumentReport, add_document
from .search import MAX_PASSAGE_HITS, PassageHit, search_documents

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_OVERLAP",
    "MAX_DOCUMENT_PROPOSALS",
    "MAX_PASSAGE_HITS",
    "DocumentReport",
    "Passage",
    "PassageHit",
    "add_document",
    "chunk_document",
    "search_documents",
]
