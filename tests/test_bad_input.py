"""Bad input: a clear error naming the field and what is allowed, and nothing written.

Every public method of the service is called with NUL characters, lone surrogates, wrong types,
huge and deep values, bools for numbers and numbers for bools; each call must raise
:class:`InvalidInputError` naming the field, sync and async alike, and leave the user's rows as
they were. Content that shows nothing (zero-width and other invisible characters) is refused by
the gate as empty, without breaking the joiners that emoji and some scripts need.
"""

from __future__ import annotations

import dataclasses
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
        memory.add_explicit_memory(content, **kwargs)
    assert info.value.field == field
    assert words in str(info.value)
    assert memory.list_memories(user_id=tenant.user, status=None) == []


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
]


@pytest.mark.parametrize(("override", "field", "words"), SEARCH_CASES, ids=[c[1] + str(i) for i, c in enumerate(SEARCH_CASES)])
async def test_search_rejects_malformed_arguments(memory, amemory, tenant, override, field, words):
    kwargs = dict(query="tabs", user_id=tenant.user)
    kwargs.update(override)
    query = kwargs.pop("query")
    with pytest.raises(InvalidInputError) as info:
        memory.search_memories(query, **kwargs)
    assert info.value.field == field and words in str(info.value)
    with pytest.raises(InvalidInputError) as ainfo:
        await amemory.search_memories(query, **kwargs)
    assert str(ainfo.value) == str(info.value)


@pytest.mark.parametrize("bad_id", ["", "not-a-uuid", 12, None, "x" * 10_000, "a3f1" * 9])
def test_id_taking_calls_reject_malformed_ids(memory, tenant, bad_id):
    for call in (memory.get_memory, memory.delete_memory, memory.restore_memory):
        with pytest.raises(InvalidInputError, match="memory_id") as info:
            call(bad_id, user_id=tenant.user)
        assert len(str(info.value)) < 200  # a huge id is described, not echoed


async def test_async_service_raises_the_same_errors_when_awaited(amemory, tenant):
    pending = amemory.add_explicit_memory(GOOD, user_id=None)  # building the call raises nothing yet
    with pytest.raises(InvalidInputError, match="user_id"):
        await pending
    assert await amemory.list_memories(user_id=tenant.user) == []


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
    ("add_explicit_memory", [GOOD], {"metadata": {"a\x00": 1}}, "metadata", "NUL"),
    ("add_explicit_memory", [GOOD], {"metadata": {"k": "v\x00"}}, "metadata", "NUL"),
    ("add_explicit_memory", [GOOD], {"metadata": {"\ud800": 1}}, "metadata", "surrogate"),
    ("add_explicit_memory", [GOOD], {"metadata": {"list": ["ok", "lone \udfff"]}}, "metadata", "surrogate"),
    ("add_explicit_memory", [GOOD], {"metadata": DEEP}, "metadata", "nested more than 32 levels"),
    ("add_explicit_memory", [GOOD], {"metadata": {"x": DEEP_LIST}}, "metadata", "nested more than 32 levels"),
    ("add_explicit_memory", [GOOD], {"metadata": {"a": [1, math.nan]}}, "metadata", "NaN"),
    ("add_explicit_memory", [GOOD], {"metadata": {1: "x"}}, "metadata", "keys must be strings"),
    ("add_explicit_memory", [GOOD], {"dedupe": "no"}, "dedupe", "True or False"),
    ("add_explicit_memory", [GOOD], {"confidence": math.inf}, "confidence", "between 0 and 1"),
    ("add_explicit_memory", [GOOD], {"memory_type": DEEP_LIST}, "memory_type", "must be one of"),
    ("add_explicit_memory", [GOOD], {"source_id": "\u200b\u2060"}, "source_id", "invisible"),
    ("add_resource", ["A design document about caching"], {"metadata": {"a\x00": 1}}, "metadata", "NUL"),
    ("add_resource", ["A design document about caching"], {"metadata": DEEP}, "metadata", "nested"),
    ("add_resource", ["A design document about caching"], {"kind": DEEP}, "kind", "must be one of"),
    ("list_memories", [], {"offset": HUGE}, "offset", "at most 9223372036854775807"),
    ("list_memories", [], {"offset": -1}, "offset", ">= 0"),
    ("list_memories", [], {"offset": True}, "offset", ">= 0"),
    ("list_memories", [], {"offset": 1.5}, "offset", ">= 0"),
    ("list_memories", [], {"limit": True}, "limit", "whole number"),
    ("list_memories", [], {"limit": HUGE}, "limit", "between 1 and 10000"),
    ("list_memories", [], {"limit": -5}, "limit", "between 1 and 10000"),
    ("list_memories", [], {"offset": DEEP}, "offset", ">= 0"),
    ("list_resources", [], {"offset": HUGE}, "offset", "at most"),
    ("list_resources", [], {"limit": DEEP_LIST}, "limit", "whole number"),
    ("import_memories", [None], {}, "items", "must be a list, got NoneType"),
    ("import_memories", [5], {}, "items", "must be a list, got int"),
    ("import_memories", ["I like green tea"], {}, "items", "must be a list, got str"),
    ("import_memories", [{"content": GOOD}], {}, "items", "must be a list, got dict"),
    ("import_memories", [[GOOD]], {"dedupe": "yes"}, "dedupe", "True or False"),
    ("import_memories", [[GOOD, {"content": GOOD, "metadata": {"a": "\x00"}}]], {}, "metadata", "NUL"),
    ("delete_memory", ["$mid"], {"hard": "no"}, "hard", "True or False"),
    ("delete_memory", ["$mid"], {"hard": 1}, "hard", "True or False"),
    ("delete_memory", ["$mid"], {"hard": None}, "hard", "True or False"),
    ("delete_memory", [DEEP], {}, "memory_id", "must be a memory id"),
    ("get_memory", [DEEP_LIST], {}, "memory_id", "must be a memory id"),
    ("edit_memory", ["$mid"], {"content": GOOD + " always", "reason": "why\x00"}, "reason", "NUL"),
    ("edit_memory", ["$mid"], {"confidence": math.nan}, "confidence", "between 0 and 1"),
    ("extract_memories", [["I like tea\x00 a lot"]], {"llm": None}, "messages", "message 0 contains a NUL"),
    ("extract_memories", [[{"role": "user", "content": "lone \ud800"}]], {"llm": None}, "messages", "surrogate"),
    ("extract_memories", [["I like green tea", "and\x00this"]], {"llm": None}, "messages", "message 1"),
    ("extract_memories", [[{"role": "user", "content": "hi", "id": "m\x00"}]], {"llm": None}, "messages", "the id"),
    ("extract_memories", [DEEP], {"llm": None}, "messages", "message 0"),
    ("extract_memories", [5], {"llm": None}, "messages", "list of messages"),
    ("extract_memories", [["I like tea"]], {"llm": None, "min_new_turns": DEEP}, "min_new_turns", ">= 1"),
    ("extract_memories", [["I like tea"]], {"llm": None, "min_new_turns": True}, "min_new_turns", ">= 1"),
    ("refresh_profiles", [], {"force": "yes", "llm": None}, "force", "True or False"),
    ("reset_profile_fields", [5], {}, "names", "must be a list"),
    ("get_profile", [DEEP], {}, "kind", "'user' or 'project'"),
    ("create_team", ["bad-input-team"], {"write": DEEP}, "write", "must be one of"),
    ("add_member", ["project", "$project", "bob", DEEP], {}, "role", "must be one of"),
    ("export_data", [], {"what": DEEP}, "what", "'visible'"),
    ("search_memories", ["tea"], {"k": True}, "k", "whole number"),
    ("search_memories", ["tea"], {"k": HUGE}, "k", "between 1 and"),
    ("search_memories", ["tea"], {"min_relevance": math.inf}, "min_relevance", "between 0 and 1"),
    ("search_memories", ["tea"], {"min_relevance": math.nan}, "min_relevance", "between 0 and 1"),
    ("search_memories", ["tea"], {"as_of": DEEP}, "as_of", "datetime"),
    ("search_memories", ["tea\x00"], {}, "query", "NUL"),
    ("search_memories", ["tea \udc00"], {}, "query", "surrogate"),
    ("search_memories", ["\u200b\u200d\ufeff"], {}, "query", "invisible"),
    ("search_with_conflicts", ["tea"], {"scope": DEEP_LIST}, "scope", "must be one of"),
    ("check_duplicate", ["\u200b\u2060\u200b"], {}, "content", "invisible"),
    ("memory_history", [12345], {}, "memory_id", "must be a memory id"),
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


def _bind(values: list, tenant, mid: str) -> list:
    return [mid if v == "$mid" else tenant.project if v == "$project" else v for v in values]


@pytest.mark.parametrize(("method", "args", "kwargs", "field", "words"), SERVICE_CASES,
                         ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(SERVICE_CASES)])
async def test_every_method_refuses_malformed_input_and_writes_nothing(
        memory, amemory, dsn, tenant, method, args, kwargs, field, words):
    mid = str(memory.add_explicit_memory("Prefers green tea in the afternoon", user_id=tenant.user).id)
    ids = {"user_id": tenant.user}
    if method in ("extract_memories",):
        ids["session_id"] = tenant.session
    before = footprint(dsn, tenant.user)
    call_args = _bind(args, tenant, mid)
    with pytest.raises(InvalidInputError) as info:
        getattr(memory, method)(*call_args, **ids, **kwargs)
    assert info.value.field == field, str(info.value)
    assert words in str(info.value)
    assert len(str(info.value)) < 400  # a huge or deep value is described, never dumped
    with pytest.raises(InvalidInputError) as ainfo:
        await getattr(amemory, method)(*call_args, **ids, **kwargs)
    assert str(ainfo.value) == str(info.value)
    assert footprint(dsn, tenant.user) == before
    assert memory.get_memory(mid, user_id=tenant.user).status.value == "active"


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
            await amemory._execute(failing_at(op, "SET status = 'done'"))
        else:
            memory._execute(failing_at(op, "SET status = 'done'"))
    with psycopg.connect(dsn) as conn:
        runs = conn.execute("SELECT status, error FROM memory_extraction_runs WHERE user_id = %s",
                            (tenant.user,)).fetchall()
    assert [r[0] for r in runs] == ["failed"] and "DivisionByZero" in runs[0][1]
    assert memory.list_memories(user_id=tenant.user, status=None) == []  # the run's writes were undone
    # the messages were not marked read: the next run learns from them
    report = memory.extract_memories(["I prefer tabs over spaces. I live in Lisbon."], user_id=tenant.user,
                                     session_id=tenant.session, llm=None)
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
    result = memory.add_explicit_memory(content, user_id=tenant.user)
    assert isinstance(result, Rejection) and result.reason is RejectionReason.EMPTY
    assert "content is empty" in result.message
    imported = memory.import_memories([content, GOOD], user_id=tenant.user)
    assert [i for i, _ in imported.rejected] == [0] and len(imported.inserted) == 1
    assert footprint(dsn, tenant.user)["memory_items"] == before["memory_items"] + 1


def test_invisible_characters_inside_text_are_removed(memory, tenant):
    saved = memory.add_explicit_memory("Prefers\u200b dark\u2060 mode\u202e in\U000e0041 editors\ufeff",
                                       user_id=tenant.user)
    assert isinstance(saved, MemoryItem) and saved.content == "Prefers dark mode in editors"
    again = memory.add_explicit_memory("Prefers dark mode in editors", user_id=tenant.user)
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
