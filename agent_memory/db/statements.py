"""Big statements, parsed once per process instead of on every execution.

psycopg finds a statement's ``%(name)s`` placeholders by splitting its text, and caches that work
only for statements under 4 KB with at most 50 parameters (``psycopg._queries``). Our search
statements are larger (the indexed search is about 10 KB), so every search paid the split again:
0.2-0.3 ms of a 2.5 ms statement (``benchmarks/statement_parse.py``). :func:`numbered` turns such a
statement into PostgreSQL's own ``$1, $2, ...`` form once (an LRU keyed by the statement's text)
and answers it with its parameters in order, for a raw cursor, which sends it as it is.

Only the placeholders psycopg itself reads are understood: ``%(name)s``, ``%s`` and ``%%``. A
statement with anything else (``%b``, ``%t``, a stray ``%``, positional and named mixed), or whose
parameters do not match it, goes to psycopg as usual, so what psycopg would reject it still
rejects, with its own message. Small statements go to psycopg too: its cache already serves them.
psycopg's own parser is private (``psycopg._queries``), which is why the three forms are read
here rather than by calling into it; ``tests/test_statements.py`` holds the two to the same answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from psycopg import sql

__all__ = ["BIG_STATEMENT", "numbered"]

#: statements at least this long (bytes) or with more than 50 parameters are parsed here
#: (psycopg's own cache takes up to 4,096 bytes and 50 parameters)
BIG_STATEMENT = 4097
_MAX_CACHED_PARAMS = 50

_PLACEHOLDER = re.compile(rb"%(?:%|\((\w+)\)s|s)|%")


@lru_cache(maxsize=256)
def _parse(query: bytes) -> tuple[bytes, tuple[str, ...] | int] | None:
    """``query`` with its placeholders numbered, and the parameter names in number order (a
    name used twice keeps one number) or, for ``%s`` placeholders, their count; None if it holds
    a placeholder this module does not read."""
    out: list[bytes] = []
    names: dict[str, int] = {}
    positional = 0
    last = 0
    for m in _PLACEHOLDER.finditer(query):
        token = m.group(0)
        out.append(query[last:m.start()])
        last = m.end()
        if token == b"%%":
            out.append(b"%")
        elif token == b"%s":
            positional += 1
            out.append(b"$%d" % positional)
        elif m.group(1) is not None:
            name = m.group(1).decode()
            number = names.setdefault(name, len(names) + 1)
            out.append(b"$%d" % number)
        else:
            return None  # %b, %t, a lone %: psycopg's to read (or to reject)
    if names and positional:
        return None
    out.append(query[last:])
    return b"".join(out), (tuple(names) if names else positional)


def numbered(query: Any, params: Sequence[Any] | Mapping[str, Any] | None,
             context: Any) -> tuple[Any, Any, bool]:
    """``(statement, parameters, raw)``: with ``raw``, the statement numbered and its parameters in
    order, for a raw cursor, because it is big enough that psycopg would parse it again on every
    execution; otherwise what to hand psycopg as usual (a composed statement already rendered, so
    it is rendered once either way). ``context``: the connection or cursor to render for."""
    text = query.as_bytes(context) if isinstance(query, sql.Composable) else query
    if params is None or not isinstance(text, (bytes, str)):
        return text, params, False
    if isinstance(text, str) and not text.isascii():
        return text, params, False  # psycopg encodes it for the connection
    data = text.encode() if isinstance(text, str) else text
    if len(data) < BIG_STATEMENT and len(params) <= _MAX_CACHED_PARAMS:
        return text, params, False
    parsed = _parse(data)
    if parsed is None:
        return text, params, False
    statement, order = parsed
    if isinstance(order, tuple):
        if isinstance(params, Mapping) and all(name in params for name in order):
            return statement, [params[name] for name in order], True
    elif not isinstance(params, Mapping) and len(params) == order:
        return statement, list(params), True
    return text, params, False  # psycopg says what does not match
