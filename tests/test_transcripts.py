"""Memories that keep their context: a transcript's turns loaded with their position, the turns
before them, and the vector of that window (issue 29)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from agent_memory import InvalidInputError, MemoryService
from agent_memory.ops import NewMemory
from agent_memory.transcripts import TRANSCRIPT_WINDOW, context_windows

TURNS = [
    "Rosa: I finally repaired the old sailboat's rudder last weekend.",
    "Tomas: Nice, did you test it on the lake?",
    "Rosa: Yes, on Sunday, and it steered much better than before.",
    "Tomas: Good. By the way, I started learning the cello.",
    "Rosa: Great! Which piece are you practising?",
]


def _stored(dsn: str, user: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT context_position, content, context, source, source_id, context_embedding::text, embedding::text"
            " FROM memory_items WHERE user_id = %s ORDER BY context_position", (user,)).fetchall()


def _vec(text: str) -> np.ndarray:
    return np.asarray([float(x) for x in text.strip("[]").split(",")])


def test_context_windows_are_the_turn_and_the_turns_before_it():
    assert context_windows([], ["a", "b", "c", "d"], 2) == ["a", "a\nb", "a\nb\nc", "b\nc\nd"]
    assert context_windows(["x", "y"], ["a", "b"], 2) == ["x\ny\na", "y\na\nb"]
    assert context_windows(["x"], ["a"], 0) == ["a"]


def test_a_transcript_keeps_order_source_and_the_window_vector(dsn, memory: MemoryService, embeddings, tenant):
    h = memory.for_user(tenant.user)
    report = h.add_transcript(TURNS, conversation="sailing-chat-1")
    assert len(report.inserted) == len(TURNS) and not report.rejected
    rows = _stored(dsn, tenant.user)
    assert [r[0] for r in rows] == list(range(len(TURNS)))  # the order of the turns, though created_at is one
    assert [r[1] for r in rows] == TURNS
    assert {(r[3], r[4]) for r in rows} == {("conversation", "sailing-chat-1")}
    assert rows[3][2] == "\n".join(TURNS[1:4])  # the turn and the 2 turns before it
    assert TRANSCRIPT_WINDOW == 2
    # the context's vector is the model's vector of the window, not the turn's own
    want = np.asarray(embeddings.embed_documents([rows[3][2]])[0])
    got = _vec(rows[3][5])
    assert np.allclose(got, want, atol=1e-5) and not np.allclose(got, _vec(rows[3][6]), atol=1e-3)
    item = h.get(report.inserted[3])
    assert (item.position, item.context, item.source_id) == (3, "\n".join(TURNS[1:4]), "sailing-chat-1")


def test_a_second_call_appends_and_reads_the_stored_turns_as_context(dsn, memory, tenant):
    h = memory.for_user(tenant.user)
    h.add_transcript(TURNS[:3], conversation="c")
    h.add_transcript(TURNS[3:], conversation="c")
    rows = _stored(dsn, tenant.user)
    assert [r[0] for r in rows] == list(range(5))
    assert rows[3][2] == "\n".join(TURNS[1:4]) and rows[4][2] == "\n".join(TURNS[2:5])
    # another conversation starts at 0 and reads nothing of the first
    h.add_transcript(["Tomas: a new talk about the weekend camping trip"], conversation="d")
    other = [r for r in _stored(dsn, tenant.user) if r[4] == "d"]
    assert [(r[0], r[2]) for r in other] == [(0, "Tomas: a new talk about the weekend camping trip")]


def test_the_context_of_appended_turns_is_read_only_from_the_callers_memories(dsn, memory, tenant):
    """Two users loading a conversation of the same name: neither's turns become the other's context."""
    memory.for_user(tenant.user).add_transcript(["Alice: my secret plan is to move to Lisbon next spring"],
                                                conversation="shared-name")
    memory.for_user(tenant.other_user).add_transcript(["Bob: I am thinking about buying a bicycle"],
                                                      conversation="shared-name")
    rows = _stored(dsn, tenant.other_user)
    assert [(r[0], r[2]) for r in rows] == [(0, "Bob: I am thinking about buying a bicycle")]


def test_a_refused_turn_keeps_its_place_and_secrets_are_withheld_from_context(dsn, memory, tenant):
    turns = ["Dana: my api key is sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6" + " for the deploy",
             "Eli: thanks, I will rotate it after the deploy tomorrow"]
    report = memory.for_user(tenant.user).add_transcript(turns, conversation="sec")
    assert [i for i, _ in report.rejected] == [0] and len(report.inserted) == 1
    [row] = _stored(dsn, tenant.user)
    assert row[0] == 1 and "sk-proj" not in row[2] and "[withheld:" in row[2] and row[2].endswith(turns[1])


def test_memories_added_by_hand_have_no_context(dsn, memory, tenant):
    h = memory.for_user(tenant.user)
    one = h.add("I prefer green tea in the afternoon")
    h.add_many(["We moved the standup to ten o'clock"])
    assert one.context is None and one.position is None
    assert all(r[2] is None and r[5] is None and r[0] is None for r in _stored(dsn, tenant.user))


def test_add_many_takes_context_and_embeds_it_in_the_same_batch(memory, tenant, monkeypatch):
    """A context is one more text of the batch the memories' own vectors are made in."""
    calls = []
    original = memory.embeddings.embed_documents

    def spy(texts):
        calls.append(list(texts))
        return original(texts)

    monkeypatch.setattr(memory.embeddings, "embed_documents", spy)
    memory.for_user(tenant.user).add_many([
        NewMemory(content="The offsite is in Lisbon", context="Planning call\nThe offsite is in Lisbon", position=4),
        NewMemory(content="Budget approved for the offsite"),
    ])
    assert calls == [["The offsite is in Lisbon", "Budget approved for the offsite",
                      "Planning call\nThe offsite is in Lisbon"]]


@pytest.mark.parametrize(("turns", "kwargs", "match"), [
    ("not a list", {"conversation": "c"}, "turns"),
    ([{"text": "no content key"}], {"conversation": "c"}, "turns\\[0\\]"),
    (["a turn that is long enough"], {"conversation": ""}, "conversation"),
    (["a turn that is long enough"], {"conversation": "c", "window": -1}, "window"),
    (["a turn that is long enough"], {"conversation": "c", "start": -3}, "start"),
])
def test_malformed_transcripts_are_refused_before_anything_is_written(dsn, memory, tenant, turns, kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        memory.for_user(tenant.user).add_transcript(turns, **kwargs)
    assert _stored(dsn, tenant.user) == []


async def test_the_async_handle_loads_a_transcript_too(dsn, amemory, tenant):
    report = await amemory.for_user(tenant.user).add_transcript(TURNS[:2], conversation="a", start=7)
    assert len(report.inserted) == 2
    assert [(r[0], r[2]) for r in _stored(dsn, tenant.user)] == [(7, TURNS[0]), (8, "\n".join(TURNS[:2]))]


def test_export_carries_the_context_and_an_import_embeds_it_again(dsn, memory, tenant, fresh_dsn, config, embeddings):
    memory.for_user(tenant.user).add_transcript(TURNS, conversation="exp")
    data = memory.export_data(user_id=tenant.user)
    exported = sorted((m["context_position"], m["context"]) for m in data["memories"])
    assert exported == [(i, "\n".join(TURNS[max(0, i - 2): i + 1])) for i in range(len(TURNS))]
    target = fresh_dsn()
    with MemoryService(target, config=config, embeddings=embeddings) as other:
        report = other.import_data(data, user_id=tenant.user)
        assert report.inserted["memories"] == len(TURNS)
        got = sorted(other.for_user(tenant.user).list(limit=100), key=lambda m: m.position)
        assert [(m.position, m.context) for m in got] == exported
    before = {r[0]: _vec(r[5]) for r in _stored(dsn, tenant.user)}
    after = {r[0]: _vec(r[5]) for r in _stored(target, tenant.user)}
    assert all(np.allclose(before[p], after[p], atol=1e-5) for p in before)


def test_forgetting_the_user_takes_the_context_with_the_memories(dsn, memory, tenant):
    """The context is columns of ``memory_items`` (listed in USER_DATA_TABLES): forget covers it."""
    from agent_memory.queries.tables import table_of

    assert table_of("memories") == "memory_items"
    marker = f"the password hint is the name of {tenant.user}'s first cat"
    memory.for_user(tenant.user).add_transcript([marker, "Sure, I will remember where it is written"],
                                                conversation="gone")
    count = "SELECT count(*) FROM memory_items WHERE context LIKE %s"
    with psycopg.connect(dsn) as conn:
        assert conn.execute(count, (f"%{marker}%",)).fetchone()[0] == 2
    memory.forget_user(user_id=tenant.user)
    with psycopg.connect(dsn) as conn:
        assert conn.execute(count, (f"%{marker}%",)).fetchone()[0] == 0


def test_an_extracted_memory_keeps_the_turn_it_was_read_from(memory, tenant):
    """The extraction pipeline (offline rules) records the text a memory came from as its context."""
    h = memory.for_user(tenant.user, session_id=tenant.session)
    report = h.extract([{"role": "user", "content": "I'm allergic to peanuts, so please never suggest satay."}],
                       llm=None)
    added = [o.memory for o in report.outcomes if o.memory is not None]
    assert added, report
    assert all(m.context and "peanuts" in m.context for m in added)


def test_a_memory_learned_from_a_document_keeps_the_text_it_was_read_from(memory, tenant):
    h = memory.for_user(tenant.user)
    report = h.add_document("# Team handbook\n\nWe always deploy on Tuesdays after the code review is done.\n",
                            title="Handbook", llm=None)
    learned = [m for m in h.list(limit=100) if m.source.value != "user"]
    assert report.passages_added >= 1 and learned, report
    assert all(m.context and "Tuesdays" in m.context for m in learned)
