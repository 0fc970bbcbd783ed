"""Bad input: a clear error naming the field and what is allowed, and nothing written.

Every public method of the service is called with NUL characters, lone surrogates, wrong types,
huge and deep values, bools for numbers and numbers for bools; each call must raise
:class:`InvalidInputError` naming the field, sync and async alike, and leave the user's rows as
they were. Content that shows nothing (zero-width and other invisible characters) is refused by
the gate as empty, without breaking the joiners that emoji and some scripts need.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import unicodedata

import psycopg
import pytest

from agent_memory import (
    ConfigurationError,
    InvalidInputError,
    MemoryConfig,
    MemoryItem,
    Rejection,
    RejectionReason,
)
from agent_memory.db.requests import Sql
from agent_memory.errors import DatabaseError
from agent_memory.extraction.pipeline import extract_memories
from agent_memory.gate import normalize_content
from agent_memory.validation import check_identity
from identity_args import split_ids

GOOD = "I prefer tabs over spaces"

SAVE_CASES = [
    # (kwargs overriding a valid save, field named, words in the message)
    ({"content": None}, "content", "must be a string"),
    ({"content": 42}, "content", "must be a string"),
    ({"content": "nul\x00byte in here"}, "content", "NUL"),
    ({"content": "lone \ud800 surrogate"}, "content", "surrogate"),
    ({"memory_type": "opinion"}, "memory_type", "preference, fact, skill, habit, event, context, constraint, decision"),
    ({"memory_type": 3}, "memory_type", "must be one of"),
    ({"scope": "global"}, "scope", "session, project, user"),
    ({"visibility": "secret"}, "visibility", "public, members, owner_only"),
    ({"source": "web"}, "source", "user, ai, knowledge_base, project_resource"),
    ({"confidence": 1.5}, "confidence", "between 0 and 1"),
    ({"confidence": -0.1}, "confidence", "between 0 and 1"),
    ({"confidence": math.nan}, "confidence", "between 0 and 1"),
    ({"confidence": "high"}, "confidence", "number"),
    ({"confidence": True}, "confidence", "number"),
    ({"user_id": ""}, "user_id", "empty"),
    ({"user_id": "   "}, "user_id", "empty"),
    ({"user_id": None}, "user_id", "required"),
    ({"user_id": "u" * 300}, "user_id", "limit is 256"),
    ({"user_id": "bad\x00id"}, "user_id", "NUL"),
    ({"user_id": ["alice"]}, "user_id", "string id"),
    ({"project_id": "p\ud800"}, "project_id", "surrogate"),
    ({"session_id": "s\n1"}, "session_id", "control characters"),
    ({"source_id": "x" * 1000}, "source_id", "limit"),
    ({"metadata": "not a dict"}, "metadata", "JSON object"),
    ({"metadata": {"x": object()}}, "metadata", "JSON-serialisable"),
    ({"metadata": {"x": math.inf}}, "metadata", "NaN"),
    ({"metadata": {"big": "x" * 20_000}}, "metadata", "16384 bytes"),
    ({"scope": "project", "project_id": None}, "scope", "project_id"),
]


@pytest.mark.parametrize(("override", "field", "words"), SAVE_CASES, ids=[c[1] + str(i) for i, c in enumerate(SAVE_CASES)])
def test_save_rejects_malformed_arguments(memory, tenant, override, field, words):
    kwargs = dict(content=GOOD, user_id=tenant.user, project_id=tenant.project, session_id=tenant.session)
    kwargs.update(override)
    content = kwargs.pop("content")
    with pytest.raises(InvalidInputError) as info:
        ids, rest = split_ids(kwargs)
        memory.for_user(**ids).add(content, **rest)
    assert info.value.field == field
    assert words in str(info.value)
    assert memory.for_user(tenant.user).list(status=None) == []


SEARCH_CASES = [
    ({"query": ""}, "query", "empty"),
    ({"query": "   "}, "query", "empty"),
    ({"query": 5}, "query", "string"),
    ({"query": "x" * 5000}, "query", "limit is 4000"),
    ({"k": 0}, "k", "between 1 and 100"),
    ({"k": -3}, "k", "between 1 and 100"),
    ({"k": 10**9}, "k", "between 1 and 100"),
    ({"k": 2.5}, "k", "whole number"),
    ({"k": "5"}, "k", "whole number"),
    ({"memory_type": ["fact", "nope"]}, "memory_type", "must be one of"),
    ({"memory_type": []}, "memory_type", "empty list"),
    ({"scope": 7}, "scope", "must be"),
    ({"status": "deleted"}, "status", "active, archived, superseded"),
    ({"filter": {"tag\x00": "billing"}}, "filter", "NUL"),            # reached PostgreSQL
    ({"filter": {"tag\ud800": "billing"}}, "filter", "surrogate"),    # a raw UnicodeEncodeError
    ({"filter": {"$or": [{"n": i} for i in range(65)]}}, "filter", "more than 64 conditions"),
    ({"filter": {"n": {"$in": list(range(1001))}}}, "filter['n']", "the limit is 1000"),
]


@pytest.mark.parametrize(("override", "field", "words"), SEARCH_CASES, ids=[c[1] + str(i) for i, c in enumerate(SEARCH_CASES)])
async def test_search_rejects_malformed_arguments(memory, amemory, tenant, override, field, words):
    kwargs = dict(query="tabs", user_id=tenant.user)
    kwargs.update(override)
    query = kwargs.pop("query")
    ids, rest = split_ids(kwargs)
    with pytest.raises(InvalidInputError) as info:
        memory.for_user(**ids).search(query, **rest)
    assert info.value.field == field and words in str(info.value)
    with pytest.raises(InvalidInputError) as ainfo:
        await amemory.for_user(**ids).search(query, **rest)
    assert str(ainfo.value) == str(info.value)


@pytest.mark.parametrize("bad_id", ["", "not-a-uuid", 12, None, "x" * 10_000, "a3f1" * 9])
def test_id_taking_calls_reject_malformed_ids(memory, tenant, bad_id):
    me = memory.for_user(tenant.user)
    for call in (me.get, me.delete, me.restore, me.history, me.source):
        with pytest.raises(InvalidInputError, match="memory_id") as info:
            call(bad_id)
        assert len(str(info.value)) < 200  # a huge id is described, not echoed


async def test_async_handle_checks_the_identity_when_made_and_arguments_when_awaited(amemory, tenant):
    with pytest.raises(InvalidInputError, match="user_id"):
        amemory.for_user(None)  # who is asking is checked once, when the handle is made
    pending = amemory.for_user(tenant.user).add(GOOD, memory_type="opinion")  # building the call raises nothing
    with pytest.raises(InvalidInputError, match="memory_type"):
        await pending
    assert await amemory.for_user(tenant.user).list() == []


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"min_confidence": 2}, "min_confidence must be a number between 0 and 1"),
        ({"duplicate_threshold": -1}, "duplicate_threshold"),
        ({"max_extractions": -1}, "max_extractions must be a whole number >= 0"),
        ({"min_length": 10, "max_length": 5}, "must not exceed"),
        ({"embeddings": "cohere"}, "embeddings must be one of local, openai"),
        ({"database_url": "  "}, "database_url"),
        ({"scope_priority": {"planet": 1.0}}, "scope_priority"),
        ({"prompt_budget_chars": 10}, "prompt_budget_chars"),
        ({"pool_min_size": 5, "pool_max_size": 2}, "pool_min_size"),
    ],
)
def test_config_is_validated_at_construction(kwargs, words):
    with pytest.raises(ConfigurationError, match=words):
        MemoryConfig(**kwargs)


def test_config_reads_documented_environment_variables():
    env = {"MEMORY_MIN_CONFIDENCE": "0.5", "MEMORY_DUPLICATE_THRESHOLD": "0.9", "MEMORY_MAX_EXTRACTIONS": "7",
           "MEMORY_MIN_LENGTH": "3", "MEMORY_MAX_LENGTH": "500", "DATABASE_URL": "postgresql://x@h/db",
           "MEMORY_EMBEDDINGS": "openai"}
    config = MemoryConfig.from_env(env)
    assert (config.min_confidence, config.duplicate_threshold, config.max_extractions) == (0.5, 0.9, 7)
    assert (config.min_length, config.max_length) == (3, 500)
    assert config.database_url == "postgresql://x@h/db" and config.embeddings == "openai"
    # code beats the environment
    assert MemoryConfig.from_env(env, min_confidence=0.8).min_confidence == 0.8
    with pytest.raises(ConfigurationError, match="MEMORY_MAX_EXTRACTIONS='lots'"):
        MemoryConfig.from_env({"MEMORY_MAX_EXTRACTIONS": "lots"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        MemoryConfig().min_confidence = 0.1


# --- every public method: malformed arguments raise, name the field, and write nothing ------


def nested(depth: int, *, as_list: bool = False):
    """A dict (or list) nested ``depth`` levels deep, built without recursion."""
    value: object = [] if as_list else {}
    for _ in range(depth):
        value = [value] if as_list else {"a": value}
    return value


DEEP, DEEP_LIST = nested(5000), nested(5000, as_list=True)
HUGE = 2**70

#: (method, positional args, keyword args, field named, words in the message); "$mid" is the id of a
#: memory the tenant owns, "$project" the tenant's project
SERVICE_CASES = [
    ("add", [GOOD], {"metadata": {"a\x00": 1}}, "metadata", "NUL"),
    ("add", [GOOD], {"metadata": {"k": "v\x00"}}, "metadata", "NUL"),
    ("add", [GOOD], {"metadata": {"\ud800": 1}}, "metadata", "surrogate"),
    ("add", [GOOD], {"metadata": {"list": ["ok", "lone \udfff"]}}, "metadata", "surrogate"),
    ("add", [GOOD], {"metadata": DEEP}, "metadata", "nested more than 32 levels"),
    ("add", [GOOD], {"metadata": {"x": DEEP_LIST}}, "metadata", "nested more than 32 levels"),
    ("add", [GOOD], {"metadata": {"a": [1, math.nan]}}, "metadata", "NaN"),
    ("add", [GOOD], {"metadata": {1: "x"}}, "metadata", "keys must be strings"),
    ("add", [GOOD], {"dedupe": "no"}, "dedupe", "True or False"),
    ("add", [GOOD], {"confidence": math.inf}, "confidence", "between 0 and 1"),
    ("add", [GOOD], {"memory_type": DEEP_LIST}, "memory_type", "must be one of"),
    ("add", [GOOD], {"source_id": "\u200b\u2060"}, "source_id", "invisible"),
    ("add_resource", ["A design document about caching"], {"metadata": {"a\x00": 1}}, "metadata", "NUL"),
    ("add_resource", ["A design document about caching"], {"metadata": DEEP}, "metadata", "nested"),
    ("add_resource", ["A design document about caching"], {"kind": DEEP}, "kind", "must be one of"),
    ("list", [], {"offset": HUGE}, "offset", "at most 9223372036854775807"),
    ("list", [], {"offset": -1}, "offset", ">= 0"),
    ("list", [], {"offset": True}, "offset", ">= 0"),
    ("list", [], {"offset": 1.5}, "offset", ">= 0"),
    ("list", [], {"limit": True}, "limit", "whole number"),
    ("list", [], {"limit": HUGE}, "limit", "between 1 and 10000"),
    ("list", [], {"limit": -5}, "limit", "between 1 and 10000"),
    ("list", [], {"offset": DEEP}, "offset", ">= 0"),
    ("list_resources", [], {"offset": HUGE}, "offset", "at most"),
    ("list_resources", [], {"limit": DEEP_LIST}, "limit", "whole number"),
    ("add_many", [None], {}, "items", "must be a list, got NoneType"),
    ("add_many", [5], {}, "items", "must be a list, got int"),
    ("add_many", ["I like green tea"], {}, "items", "must be a list, got str"),
    ("add_many", [{"content": GOOD}], {}, "items", "must be a list, got dict"),
    ("add_many", [[GOOD]], {"dedupe": "yes"}, "dedupe", "True or False"),
    ("add_many", [[GOOD, {"content": GOOD, "metadata": {"a": "\x00"}}]], {}, "metadata", "NUL"),
    ("delete", ["$mid"], {"hard": "no"}, "hard", "True or False"),
    ("delete", ["$mid"], {"hard": 1}, "hard", "True or False"),
    ("delete", ["$mid"], {"hard": None}, "hard", "True or False"),
    ("delete", [DEEP], {}, "memory_id", "must be a memory id"),
    ("get", [DEEP_LIST], {}, "memory_id", "must be a memory id"),
    ("edit", ["$mid"], {"content": GOOD + " always", "reason": "why\x00"}, "reason", "NUL"),
    ("edit", ["$mid"], {"confidence": math.nan}, "confidence", "between 0 and 1"),
    ("extract", [["I like tea\x00 a lot"]], {"llm": None}, "messages", "message 0 contains a NUL"),
    ("extract", [[{"role": "user", "content": "lone \ud800"}]], {"llm": None}, "messages", "surrogate"),
    ("extract", [["I like green tea", "and\x00this"]], {"llm": None}, "messages", "message 1"),
    ("extract", [[{"role": "user", "content": "hi", "id": "m\x00"}]], {"llm": None}, "messages", "the id"),
    ("extract", [DEEP], {"llm": None}, "messages", "message 0"),
    ("extract", [5], {"llm": None}, "messages", "list of messages"),
    ("extract", [["I like tea"]], {"llm": None, "min_new_turns": DEEP}, "min_new_turns", ">= 1"),
    ("extract", [["I like tea"]], {"llm": None, "min_new_turns": True}, "min_new_turns", ">= 1"),
    ("refresh_profiles", [], {"force": "yes", "llm": None}, "force", "True or False"),
    ("reset_profile_fields", [5], {}, "names", "must be a list"),
    ("profile", [DEEP], {}, "kind", "'user' or 'project'"),
    ("create_team", ["bad-input-team"], {"write": DEEP}, "write", "must be one of"),
    ("add_member", ["project", "$project", "bob", DEEP], {}, "role", "must be one of"),
    ("export_data", [], {"what": DEEP}, "what", "'visible'"),
    ("search", ["tea"], {"k": True}, "k", "whole number"),
    ("search", ["tea"], {"k": HUGE}, "k", "between 1 and"),
    ("search", ["tea"], {"min_relevance": math.inf}, "min_relevance", "between 0 and 1"),
    ("search", ["tea"], {"min_relevance": math.nan}, "min_relevance", "between 0 and 1"),
    ("search", ["tea"], {"as_of": DEEP}, "as_of", "datetime"),
    ("search", ["tea\x00"], {}, "query", "NUL"),
    ("search", ["tea \udc00"], {}, "query", "surrogate"),
    ("search", ["\u200b\u200d\ufeff"], {}, "query", "invisible"),
    ("search_with_conflicts", ["tea"], {"scope": DEEP_LIST}, "scope", "must be one of"),
    ("find_duplicate", ["\u200b\u2060\u200b"], {}, "content", "invisible"),
    ("history", [12345], {}, "memory_id", "must be a memory id"),
]


def footprint(dsn: str, user: str) -> dict[str, int]:
    """How many rows the user has in every table that records a user: what a bad call must not change."""
    with psycopg.connect(dsn) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND column_name = 'user_id' ORDER BY 1")]
        counts = {t: conn.execute(f'SELECT count(*) FROM "{t}" WHERE user_id = %s', (user,)).fetchone()[0]
                  for t in tables}
        counts["memory_scopes"] = conn.execute("SELECT count(*) FROM memory_scopes WHERE created_by = %s",
                                               (user,)).fetchone()[0]
        counts["memory_profiles"] = conn.execute("SELECT count(*) FROM memory_profiles WHERE subject_id = %s",
                                                 (user,)).fetchone()[0]
    return counts


def _door(service, method: str, ids: dict):
    """The handle's method, or the service's (with ``user_id=``) for what is not one principal's."""
    handle = service.for_user(**ids)
    if hasattr(handle, method):
        return getattr(handle, method)
    return functools.partial(getattr(service, method), user_id=ids["user_id"])


def _bind(values: list, tenant, mid: str) -> list:
    return [mid if v == "$mid" else tenant.project if v == "$project" else v for v in values]


@pytest.mark.parametrize(("method", "args", "kwargs", "field", "words"), SERVICE_CASES,
                         ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(SERVICE_CASES)])
async def test_every_method_refuses_malformed_input_and_writes_nothing(
        memory, amemory, dsn, tenant, method, args, kwargs, field, words):
    mid = str(memory.for_user(tenant.user).add("Prefers green tea in the afternoon").id)
    ids = {"user_id": tenant.user}
    if method == "extract":
        ids["session_id"] = tenant.session
    before = footprint(dsn, tenant.user)
    call_args = _bind(args, tenant, mid)
    with pytest.raises(InvalidInputError) as info:
        _door(memory, method, ids)(*call_args, **kwargs)
    assert info.value.field == field, str(info.value)
    assert words in str(info.value)
    assert len(str(info.value)) < 400  # a huge or deep value is described, never dumped
    with pytest.raises(InvalidInputError) as ainfo:
        await _door(amemory, method, ids)(*call_args, **kwargs)
    assert str(ainfo.value) == str(info.value)
    assert footprint(dsn, tenant.user) == before
    assert memory.for_user(tenant.user).get(mid).status.value == "active"


def test_format_memories_for_prompt_checks_its_arguments(memory, tenant):
    for args, kwargs, field in [((None,), {}, "memories"), ((5,), {}, "memories"), ((["a memory"],), {}, "memories[0]"),
                                (([],), {"budget_chars": True}, "budget_chars"),
                                (([],), {"budget_chars": "500"}, "budget_chars")]:
        with pytest.raises(InvalidInputError) as info:
            memory.format_memories_for_prompt(*args, **kwargs)
        assert info.value.field == field


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_database_error_in_mid_extraction_marks_the_run_failed(memory, amemory, dsn, tenant, use_async):
    """The run row never stays ``running``: an error thrown into the run after it started (here a
    division by zero in place of the statement that closes it) undoes the run's writes, marks it
    ``failed`` with the error, and reaches the caller."""
    def failing_at(op, marker):
        answer, error = None, None
        while True:
            try:
                request = op.throw(error) if error is not None else op.send(answer)
            except StopIteration as stop:
                return stop.value
            if isinstance(request, Sql) and isinstance(request.query, str) and marker in request.query:
                request = Sql("SELECT 1 / 0", fetch="none")
            try:
                answer, error = (yield request), None
            except Exception as exc:  # noqa: BLE001 - handed to the operation, as the driver does
                answer, error = None, exc

    identity = check_identity(tenant.user, None, tenant.session)
    op = extract_memories(memory.config, identity, ["I prefer tabs over spaces. I live in Lisbon."])
    with pytest.raises((psycopg.Error, DatabaseError), match="(?i)division by zero"):
        if use_async:
            await amemory.execute(failing_at(op, "SET status = 'done'"))
        else:
            memory.execute(failing_at(op, "SET status = 'done'"))
    with psycopg.connect(dsn) as conn:
        runs = conn.execute("SELECT status, error FROM memory_extraction_runs WHERE user_id = %s",
                            (tenant.user,)).fetchall()
    assert [r[0] for r in runs] == ["failed"] and "DivisionByZero" in runs[0][1]
    assert memory.for_user(tenant.user).list(status=None) == []  # the run's writes were undone
    # the messages were not marked read: the next run learns from them
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(["I prefer tabs over spaces. I live in Lisbon."], llm=None)
    assert report.status == "done" and report.added


# --- invisible content: normalized away, then refused as empty ------------------------------

INVISIBLE = [
    "\u200b" * 12,
    "\u200b \u200c \u200d \u2060",
    "\ufeff\u00ad\u2060\u180e\u200b\u200b\u200b",
    "\u202e\u202d\u2066\u2069\u200e\u200f\u061c",
    "\U000e0049\U000e0047\U000e004e\U000e004f\U000e0052\U000e0045",  # tag characters: invisible ASCII
    "\ufe0f" * 8,
    "\u3164\u3164\u3164\u3164\u3164\u3164",
    "\u2800\u2800\u2800\u2800\u2800\u2800",
    "\x1b\x07\x7f\x01\x02\x03\x04\x05",
    "  \u2028\u2029\x85\v\f\u200b  ",
]


@pytest.mark.parametrize("content", INVISIBLE, ids=[f"inv{i}" for i in range(len(INVISIBLE))])
def test_invisible_only_content_is_refused_as_empty(memory, dsn, tenant, content):
    before = footprint(dsn, tenant.user)
    result = memory.for_user(tenant.user).add(content)
    assert isinstance(result, Rejection) and result.reason is RejectionReason.EMPTY
    assert "content is empty" in result.message
    imported = memory.for_user(tenant.user).add_many([content, GOOD])
    assert [i for i, _ in imported.rejected] == [0] and len(imported.inserted) == 1
    assert footprint(dsn, tenant.user)["memory_items"] == before["memory_items"] + 1


def test_invisible_characters_inside_text_are_removed(memory, tenant):
    saved = memory.for_user(tenant.user).add("Prefers\u200b dark\u2060 mode\u202e in\U000e0041 editors\ufeff")
    assert isinstance(saved, MemoryItem) and saved.content == "Prefers dark mode in editors"
    again = memory.for_user(tenant.user).add("Prefers dark mode in editors")
    assert again.deduplicated and again.id == saved.id


#: sequences whose joiners, selectors and tags are meaning, not noise: each must survive unchanged
KEPT = [
    "👨\u200d👩\u200d👧\u200d👦", "👩\u200d❤\ufe0f\u200d👨", "🏳\ufe0f\u200d🌈", "🏳\ufe0f\u200d⚧\ufe0f", "🏴\u200d☠\ufe0f",
    "👩🏽\u200d💻", "🧑🏿\u200d🚀", "👁\ufe0f\u200d🗨\ufe0f", "❤\ufe0f\u200d🔥", "🐕\u200d🦺", "🐻\u200d❄\ufe0f",
    "🧔\u200d♂\ufe0f", "🏃\u200d♀\ufe0f\u200d➡\ufe0f", "👨\u200d👨\u200d👧", "🫱🏻\u200d🫲🏿",
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # England: black flag + tags
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland
    "1\ufe0f\u20e3", "#\ufe0f\u20e3", "☺\ufe0f", "🇵🇹", "👍🏾",
    "می\u200cخواهم",  # Persian: the non-joiner keeps two letter forms apart
    "क्\u200dष",  # Devanagari: the joiner asks for a half form
    "ക്\u200d",  # Malayalam chillu, joiner at the end of a word
    "\u05e9\u05dc\u05d5\u05dd \u200eabc\u200f",  # bidi marks in mixed-direction text
]


@pytest.mark.parametrize("text", KEPT, ids=[f"kept{i}" for i in range(len(KEPT))])
def test_emoji_sequences_and_scripts_keep_their_joiners(text):
    sentence = f"Loves {text} a lot"
    if text.endswith("\u200d"):  # a joiner at the end of a word joins the space: it goes, the word stays
        assert normalize_content(sentence) == f"Loves {text[:-1]} a lot"
    else:
        assert normalize_content(sentence) == sentence


def test_only_script_format_characters_survive_between_letters():
    """Measured over every format and control character Python knows: between two letters, all
    are removed except the joiners, the bidi marks, and the signs some scripts write with them."""
    scripts = ("ARABIC", "SYRIAC", "KAITHI", "EGYPTIAN HIEROGLYPH")
    kept, removed = [], 0
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        if c in "\t\n" or 0xD800 <= cp <= 0xDFFF or unicodedata.category(c) not in ("Cf", "Cc"):
            continue
        if c in normalize_content(f"a{c}b"):
            kept.append(c)
        else:
            removed += 1
    assert set("\u200c\u200d\u200e\u200f") <= set(kept)
    assert all(c in "\u200c\u200d\u200e\u200f" or unicodedata.name(c, "").startswith(scripts) for c in kept)
    assert removed > 150 and len(kept) < 40
