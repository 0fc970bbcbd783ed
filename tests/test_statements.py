"""Big statements parsed once (``agent_memory.db.statements``): the numbering reads exactly the
placeholders psycopg reads, leaves everything else to psycopg, and a statement run through a raw
cursor answers what psycopg's own path answers, sync and async, the search statement included."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from agent_memory import DatabaseError, MemoryService
from agent_memory.db import requests
from agent_memory.db.requests import Sql, arun, run
from agent_memory.db.statements import BIG_STATEMENT, _parse, numbered


def _big(expression: str) -> str:
    """``SELECT expression`` padded past psycopg's cache limit with a comment."""
    statement = f"SELECT {expression} AS answer"
    return statement + " -- " + "x" * (BIG_STATEMENT - len(statement)) + "\n"


# --- the numbering, without a server ---------------------------------------------------------


def test_named_placeholders_get_one_number_per_name_in_order_of_first_use():
    assert _parse(b"SELECT %(b)s, %(a)s, %(b)s") == (b"SELECT $1, $2, $1", ("b", "a"))


def test_positional_placeholders_are_counted_and_doubled_percent_signs_unescaped():
    assert _parse(b"SELECT %s || '%%', %s") == (b"SELECT $1 || '%', $2", 2)
    assert _parse(b"SELECT 1") == (b"SELECT 1", 0)


@pytest.mark.parametrize("query", [b"SELECT %(a)s, %s", b"SELECT %(a)b", b"SELECT %b", b"SELECT 5 % 2",
                                   b"SELECT %(a-b)s", b"SELECT %"])
def test_what_it_does_not_read_is_left_to_psycopg(query):
    assert _parse(query) is None


def test_small_statements_go_to_psycopg_as_they_are_and_composed_ones_rendered_once():
    assert numbered("SELECT %(a)s", {"a": 1}, None) == ("SELECT %(a)s", {"a": 1}, False)
    composed = sql.SQL("SELECT {}::int").format(sql.Placeholder("a"))
    assert numbered(composed, {"a": 1}, None) == (b"SELECT %(a)s::int", {"a": 1}, False)
    assert numbered(_big("%(a)s"), None, None)[2] is False  # no parameters: nothing to number


def test_big_statements_are_numbered_with_their_parameters_in_order():
    query, params, raw = numbered(_big("%(b)s::int + %(a)s::int + %(b)s::int"), {"a": 1, "b": 2, "unused": 3}, None)
    assert raw and query.startswith(b"SELECT $1::int + $2::int + $1::int AS answer") and params == [2, 1]
    query, params, raw = numbered(_big("%s::int - %s::int"), (5, 3), None)
    assert raw and query.startswith(b"SELECT $1::int - $2::int") and params == [5, 3]
    many = " + ".join(f"%(p{i})s::int" for i in range(60))  # short, but over psycopg's 50 parameters
    query, params, raw = numbered(f"SELECT {many}", {f"p{i}": i for i in range(60)}, None)
    assert raw and params == list(range(60))


def test_a_parameter_that_does_not_match_is_left_for_psycopg_to_report():
    assert numbered(_big("%(a)s::int"), {"b": 1}, None)[2] is False
    assert numbered(_big("%s::int"), (1, 2), None)[2] is False
    assert numbered(_big("%(a)s::int"), (1,), None)[2] is False


# --- through the drivers, against the server -------------------------------------------------


@pytest.fixture
def connection(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def _op(query, params, fetch="one"):
    return (yield Sql(query, params, fetch))


@pytest.mark.parametrize("query, params, expected", [
    (_big("%(b)s::int * 10 + %(a)s::int + %(b)s::int"), {"a": 1, "b": 2}, 23),
    (_big("%s::int - %s::int"), (5, 3), 2),
    (_big("length(%(t)s::text || '%%')"), {"t": "50%"}, 4),
])
def test_a_big_statement_answers_the_same_through_either_path(connection, monkeypatch, query, params, expected):
    assert numbered(query, params, connection)[2]
    assert run(_op(query, params), connection, None)["answer"] == expected
    assert asyncio.run(_arun_once(connection.info.dsn, query, params))["answer"] == expected
    monkeypatch.setattr(requests, "numbered", lambda q, p, c: (q, p, False))
    assert run(_op(query, params), connection, None)["answer"] == expected


async def _arun_once(dsn, query, params):
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return await arun(_op(query, params), conn, None)


def test_a_failing_big_statement_is_reported_as_a_database_error(connection):
    with pytest.raises(DatabaseError, match="DivisionByZero"):
        run(_op(_big("%(a)s::int / 0"), {"a": 1}), connection, None)


def test_the_search_statement_is_numbered_and_searches_agree_through_either_path(memory: MemoryService, monkeypatch):
    user_id = f"statements-{uuid.uuid4().hex[:8]}"
    user = memory.for_user(user_id)
    for text in ("I keep my bike in the garage", "my sister lives in Lisbon", "I take the train to work"):
        user.add(text)
    seen: list[bool] = []
    original = requests.numbered

    def spy(query, params, context):
        answer = original(query, params, context)
        seen.append(answer[2])
        return answer

    monkeypatch.setattr(requests, "numbered", spy)
    numbered_hits = [h.item.content for h in user.search("where do I keep my bicycle?", k=3)]
    assert True in seen, "the search statement is big enough to be numbered"
    monkeypatch.setattr(requests, "numbered", lambda q, p, c: (q, p, False))
    plain_hits = [h.item.content for h in user.search("where do I keep my bicycle?", k=3)]
    assert numbered_hits[0] == plain_hits[0] == "I keep my bike in the garage"
    assert sorted(numbered_hits) == sorted(plain_hits)
    memory.forget_user(user_id=user_id)
