"""Store values, their indexed text and search filters: pure functions, no I/O.

A value is a JSON object kept whole in the memory's metadata; the memory's content (what is
embedded, searched by keyword and injected into prompts) is the text at the index config's
``fields``, as in LangGraph: ``"$"`` is the whole value as JSON, ``"a.b"`` a nested field,
``"a[0]"`` / ``"a[-1]"`` / ``"a[*]"`` array elements. Several texts are joined with line breaks
into one content, the memory's own text; a store with an index config also embeds each
field's text on its own (:func:`field_texts`, LangGraph's paths and names), and a query search
scores an item by its best field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError
from ..filters import FILTER_OPERATORS, Filter, parse_filter
from ..validation import check_metadata, shown

__all__ = [
    "FILTER_OPERATORS",
    "check_fields",
    "check_filter",
    "check_value",
    "field_texts",
    "indexed_text",
    "text_at_path",
]

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\*|-?\d+)\]|(\.)")


def check_fields(field: str, fields: Any) -> tuple[str, ...]:
    """An index config's ``fields`` (or a put's ``index`` list): non-empty paths."""
    if isinstance(fields, str) or not isinstance(fields, Sequence) or not fields:
        raise InvalidInputError(field, f"must be a non-empty list of paths such as ['text'] or ['$'], got "
                                       f"{shown(fields)}")
    for path in fields:
        if not isinstance(path, str) or not path:
            raise InvalidInputError(field, f"paths must be non-empty strings, got {shown(path)}")
        if path != "$":
            _tokens(field, path)
    return tuple(fields)


def _tokens(field: str, path: str) -> list[str | int]:
    tokens: list[str | int] = []
    pos = 0
    for match in _TOKEN.finditer(path):
        if match.start() != pos:
            break
        pos = match.end()
        name, index, dot = match.groups()
        if dot is None:
            tokens.append(name if name is not None else ("*" if index == "*" else int(index)))
    if pos != len(path) or not tokens or ".." in path or path.startswith(".") or path.endswith("."):
        raise InvalidInputError(field, f"{path!r} is not a path: use 'field', 'a.b', 'a[0]', 'a[-1]', 'a[*]' or '$'")
    return tokens


def _as_text(node: Any) -> list[str]:
    if node is None:
        return []
    if isinstance(node, str):
        return [node]
    if isinstance(node, (bool, int, float)):
        return [json.dumps(node)]
    return [json.dumps(node, sort_keys=True, ensure_ascii=False)]


def text_at_path(value: Mapping[str, Any], path: str) -> list[str]:
    """The texts at ``path`` in ``value`` (none when the path is missing)."""
    if path == "$":
        return [json.dumps(value, sort_keys=True, ensure_ascii=False)]
    nodes: list[Any] = [value]
    for token in _tokens("index", path):
        nodes = [child for node in nodes for child in _children(node, token)]
    return [text for node in nodes for text in _as_text(node)]


def _children(node: Any, token: str | int) -> list[Any]:
    """What one path token selects in ``node``: ``*`` every element, an int one, a name one field."""
    if isinstance(node, list):
        if token == "*":
            return list(node)
        return [node[token]] if isinstance(token, int) and -len(node) <= token < len(node) else []
    if isinstance(node, Mapping) and isinstance(token, str) and token != "*" and token in node:
        return [node[token]]
    return []


def indexed_text(value: Mapping[str, Any], fields: Sequence[str]) -> str:
    """The text of ``value`` at ``fields``, joined by line breaks ("" when none is present)."""
    return "\n".join(text for path in fields for text in text_at_path(value, path) if text.strip())


def field_texts(value: Mapping[str, Any], paths: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, text)`` per text to embed on its own, as LangGraph's stores name them: each path's
    text (``get_text_at_path``); a path that selects several (``a[*]``) gives ``"a[*].0"``,
    ``"a[*].1"``...; empty texts are left out (they have no meaning to compare)."""
    from langgraph.store.base.embed import get_text_at_path, tokenize_path

    found: list[tuple[str, str]] = []
    for path in paths:
        texts = get_text_at_path(dict(value), path if path == "$" else tokenize_path(path))
        named = [(path, texts[0])] if len(texts) == 1 else [(f"{path}.{i}", t) for i, t in enumerate(texts)]
        found.extend((name, text) for name, text in named if text.strip())
    return found


def check_value(value: Any) -> dict[str, Any]:
    """A value to store: a JSON object (string keys; finite numbers; storable strings) small
    enough for a memory's metadata (16 KiB as JSON)."""
    if not isinstance(value, Mapping):
        raise InvalidInputError("value", f"must be a JSON object (a dict), got {type(value).__name__}; "
                                         "wrap other values, e.g. {'content': ...}")
    return check_metadata(value, "value")


def check_filter(filter: Any) -> Filter | None:
    """A search filter on top-level keys of the value, in the language of :mod:`agent_memory.filters`
    (the same as a memory search's ``filter``): ``{"color": "red"}`` (equality),
    ``{"score": {"$gte": 3, "$lt": 10}}``, ``$in``/``$nin``/``$contains``/``$exists``, ``$or``."""
    return parse_filter(filter)
