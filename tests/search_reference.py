"""What the search tests compare against: the exhaustive search, the true ``memory_terms``, and
the sentences both search suites store.

Import it as ``from search_reference import exhaustive, terms_diff, texts``: pytest puts
``tests/`` on the path.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import psycopg

from agent_memory import ops, queries

TOPICS = ["coffee", "hiking", "python", "tax return", "guitar", "kubernetes", "sourdough", "marathon",
          "chess", "invoice", "vacation", "database", "release", "budget", "deploy", "holiday"]
FORMS = ["I like {t} a lot", "We talked about {t} yesterday", "Notes on {t} are in the wiki",
         "The team is worried about {t}", "Remember the {t} deadline on Friday", "{t} is the weekend plan",
         "Never schedule {t} before noon", "We decided to stop {t} for a month"]


def texts(rng: random.Random, label: str, n: int) -> list[str]:
    """``n`` distinct sentences (the label and a number keep them apart)."""
    return [rng.choice(FORMS).format(t=rng.choice(TOPICS)) + f" ({label} {i})" for i in range(n)]


@contextmanager
def exhaustive() -> Iterator[None]:
    """Searches answered by the statement that scans every visible row (the path a search takes
    for archived rows or ``as_of``), with every visible row a candidate: the exact reference."""
    def scan(identity, *, scopes, types, k, min_relevance, keyword_share=None, **terms):
        terms["pool"] = 10 ** 6
        terms.pop("cached", None)  # the reference reads every row itself
        terms.pop("distributed", None)  # and is one statement, cluster or not
        return queries.search_candidates(queries.item_filter(identity, scopes=scopes, types=types), **terms)

    with mock.patch.object(ops.queries, "indexed_search", scan):
        yield


#: the postings ``memory_terms`` should hold (one per lexeme of each active memory) against what it
#: holds: rows on either side only, at most 20
TERMS_DIFF = """
WITH truth AS (
    SELECT m.scope, m.scope_key, u.lexeme, m.id, coalesce(cardinality(u.positions), 1) AS tf, m.owner_key,
           m.visibility, m.memory_type
    FROM memory_items m CROSS JOIN LATERAL unnest(m.content_tsv) AS u WHERE m.status = 'active'
), kept AS (
    SELECT scope, scope_key, lexeme, id, tf, owner_key, visibility, memory_type FROM memory_terms
)
SELECT 'missing' AS side, * FROM (SELECT * FROM truth EXCEPT ALL SELECT * FROM kept) a
UNION ALL
SELECT 'stale' AS side, * FROM (SELECT * FROM kept EXCEPT ALL SELECT * FROM truth) b
LIMIT 20
"""


def terms_diff(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(TERMS_DIFF).fetchall()
