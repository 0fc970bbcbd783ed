"""Two timelines: event time (``valid_from``/``valid_to``, read by ``as_of``) and record time
(``recorded_at``/``known_to``, read by ``known_at``), against the real database.

The clock is controlled two ways: record time is stamped by the database, so a test reads a
moment between two writes from its clock (``_tick``); event time comes from what the user said,
resolved against the time a message carries (a ``timestamp`` the test chooses) or now.
"""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agent_memory import MemoryService
from agent_memory.errors import InvalidInputError
from agent_memory.extraction.transcript import turns_from_messages
from agent_memory.extraction.when import resolve_when, said_on
from agent_memory.models import MemoryItem, Status
from agent_memory.testing import ScriptedChatModel

NOW = datetime(2026, 11, 26, 15, 30, tzinfo=UTC)  # a Thursday


def _tick(memory: MemoryService) -> datetime:
    """A moment strictly between two writes, read from the database's clock (which stamps them)."""
    time.sleep(0.01)
    with memory.conn.connection() as conn:
        [moment] = conn.execute("SELECT clock_timestamp()").fetchone()
    time.sleep(0.01)
    return moment


def _day(d: date, tz=UTC) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=tz)


def _month_before(at: datetime) -> datetime:
    month = at.month - 1 or 12
    return _day(date(at.year - (at.month == 1), month, at.day), at.tzinfo)  # the tests' days exist in both


def _ids(items) -> list:
    return [i.id for i in items]


# --- the resolver: pure ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("I moved to Lisbon last month.", date(2026, 10, 26)),
    ("Yesterday I adopted a cat.", date(2026, 11, 25)),
    ("the day before yesterday we shipped it", date(2026, 11, 24)),
    ("I started running today", date(2026, 11, 26)),
    ("I joined Acme two weeks ago", date(2026, 11, 12)),
    ("a couple of weeks ago I quit sugar", date(2026, 11, 12)),
    ("10 days ago", date(2026, 11, 16)),
    ("I got married 3 years ago", date(2023, 11, 26)),
    ("a year ago I moved", date(2025, 11, 26)),
    ("I switched jobs last week", date(2026, 11, 19)),
    ("last year we adopted Go", date(2025, 11, 26)),
    ("since last year", date(2025, 11, 26)),
    ("I've lived here since 2019", date(2019, 1, 1)),
    ("I was born in 1990", date(1990, 1, 1)),
    ("we switched to Rust in March", date(2026, 3, 1)),
    ("we switched to Rust in December", date(2025, 12, 1)),  # said in November: last December
    ("in early March 2023 we moved", date(2023, 3, 1)),
    ("last November I started", date(2025, 11, 1)),
    ("on 3 May 2024 I got my licence", date(2024, 5, 3)),
    ("on the 3rd of May 2024", date(2024, 5, 3)),
    ("May 3rd, 2024", date(2024, 5, 3)),
    ("it happened on May 3", date(2026, 5, 3)),
    ("the 5th of December", date(2025, 12, 5)),
    ("released 2024-05-03", date(2024, 5, 3)),
    ("last Tuesday I broke my arm", date(2026, 11, 24)),
    ("last Thursday", date(2026, 11, 19)),  # today is Thursday: a week ago
    ("on Monday we chose Postgres", date(2026, 11, 23)),
    ("this year I learn Rust", date(2026, 1, 1)),
    ("this month I run daily", date(2026, 11, 1)),
])
def test_dates_and_relative_expressions_resolve_against_when_it_was_said(text, expected) -> None:
    assert resolve_when(text, NOW) == _day(expected)


@pytest.mark.parametrize("text", [
    "May I ask you something?", "March on, soldiers.", "I may march tomorrow.", "in may", "I have 3 cats.",
    "We use Python 3.", "the 2019 report is great", "Prefers concise answers.", "next month I move",
    "in two weeks", "in 2030 I retire", "Remember that I like tea.", "31 April", "Feb 29, 2023", "", "ago",
    "a few weeks ago", "I moved recently",
])
def test_what_is_not_a_past_date_resolves_to_nothing(text) -> None:
    assert resolve_when(text, NOW) is None


def test_the_resolved_day_is_in_the_zone_it_was_said_in() -> None:
    from zoneinfo import ZoneInfo

    lisbon = NOW.astimezone(ZoneInfo("Pacific/Auckland"))  # already 27 November there
    assert resolve_when("yesterday", lisbon) == datetime(2026, 11, 26, tzinfo=lisbon.tzinfo)


def test_when_a_message_was_said() -> None:
    at = datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
    assert said_on(HumanMessage("hi", additional_kwargs={"timestamp": at.isoformat()})) == at
    assert said_on(AIMessage("hi", response_metadata={"created_at": at})) == at
    assert said_on({"role": "user", "content": "hi", "timestamp": at.timestamp()}) == at
    assert said_on({"role": "user", "content": "hi", "created_at": "2026-06-15T10:00:00Z"}) == at
    assert said_on({"role": "user", "content": "hi", "time": "2026-06-15T10:00:00"}) == at  # naive: UTC
    assert said_on({"role": "user", "content": "hi", "timestamp": "not a time"}) is None
    assert said_on(HumanMessage("hi")) is None and said_on("hi") is None
    [turn] = turns_from_messages([{"role": "user", "content": "hi", "timestamp": at.isoformat()}])
    assert turn.at == at and turn.id is not None


# --- extraction fills valid_from ---------------------------------------------------------------------


def test_moved_last_month_holds_from_a_month_before_the_conversation(memory: MemoryService, tenant) -> None:
    said = datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
    handle = memory.for_user(tenant.user, session_id=tenant.session)
    report = handle.extract([{"role": "user", "content": "I moved to Lisbon last month.",
                              "timestamp": said.isoformat()}], llm=None)
    [outcome] = report.added
    item = outcome.memory
    assert item.valid_from == datetime(2026, 5, 15, tzinfo=UTC)
    assert outcome.proposal.valid_from == item.valid_from
    # record time is when the memory learned it: now, not then
    assert item.recorded_at > datetime.now(UTC) - timedelta(minutes=5)
    assert item.known_to is None and item.valid_to is None


def test_without_a_message_time_relative_dates_resolve_against_now(memory: MemoryService, tenant) -> None:
    before = datetime.now(UTC)
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(
        ["I moved to Lisbon last month."], llm=None)
    [outcome] = report.added
    assert outcome.memory.valid_from in {_month_before(before), _month_before(datetime.now(UTC))}


def test_a_statement_without_a_date_holds_from_when_it_is_recorded(memory: MemoryService, tenant) -> None:
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(["I prefer dark mode."], llm=None)
    [outcome] = report.added
    item = outcome.memory
    assert item.valid_from == item.recorded_at == item.created_at


def test_a_message_time_in_the_future_is_read_as_now(memory: MemoryService, tenant) -> None:
    later = datetime.now(UTC) + timedelta(days=400)
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(
        [{"role": "user", "content": "I moved to Lisbon yesterday.", "timestamp": later.isoformat()}], llm=None)
    [outcome] = report.added
    assert outcome.memory.valid_from <= datetime.now(UTC)
    assert outcome.memory.valid_from >= _day((datetime.now(UTC) - timedelta(days=2)).date())


def _model(*memories: dict, decisions: list[dict] | None = None) -> ScriptedChatModel:
    structured = {"ExtractedMemories": [{"memories": list(memories)}]}
    if decisions is not None:
        structured["ConsolidationDecisions"] = [{"decisions": decisions}]
    return ScriptedChatModel(structured=structured)


def test_a_model_gives_valid_from_resolved_against_the_conversation(memory: MemoryService, tenant) -> None:
    said = datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
    llm = _model(
        {"content": "Adopted a cat named Miso.", "memory_type": "event", "scope": "user", "confidence": 0.95,
         "valid_from": "2026-06-01"},
        {"content": "Started learning the cello.", "memory_type": "skill", "scope": "user", "confidence": 0.9,
         "valid_from": "two weeks ago"},
        {"content": "Plays chess on Sundays.", "memory_type": "habit", "scope": "user", "confidence": 0.9,
         "valid_from": "2031-01-01"},  # after the conversation: not believed
        {"content": "Prefers tea over coffee.", "memory_type": "preference", "scope": "user", "confidence": 0.9},
    )
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(
        [{"role": "user", "content": "Some news about me.", "timestamp": said.isoformat()}], llm=llm)
    assert report.status == "done"
    got = {o.memory.content: o.memory for o in report.added}
    assert got["Adopted a cat named Miso."].valid_from == datetime(2026, 6, 1, tzinfo=UTC)
    assert got["Started learning the cello."].valid_from == datetime(2026, 6, 1, tzinfo=UTC)
    for recorded in ("Plays chess on Sundays.", "Prefers tea over coffee."):
        assert got[recorded].valid_from == got[recorded].recorded_at
    # the model was told when the conversation took place
    [(_, messages)] = [r for r in llm.structured_requests if r[0] == "ExtractedMemories"]
    assert "2026-06-15" in messages[-1].content


# --- both timelines ------------------------------------------------------------------------------


def _moved(memory: MemoryService, tenant) -> tuple[MemoryItem, MemoryItem, datetime]:
    """Lived in Porto since 2020 (recorded now); then, a moment later, the memory learns the user
    moved to Lisbon last month. Answers (Porto as it is now, Lisbon, a moment in between)."""
    porto = memory.for_user(tenant.user).add("Lives in Porto, Portugal.", valid_from="2020-01-01")
    assert porto.valid_from == datetime(2020, 1, 1, tzinfo=UTC)
    between = _tick(memory)
    llm = _model({"content": "Lives in Lisbon, Portugal.", "memory_type": "fact", "scope": "user",
                  "confidence": 0.95, "valid_from": "last month"},
                 decisions=[{"proposal": 1, "decision": "SUPERSEDE", "target": "M1", "reason": "moved"}])
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(
        ["I moved to Lisbon last month."], llm=llm)
    [outcome] = report.superseded
    assert outcome.replaced.id == porto.id
    return memory.for_user(tenant.user).get(porto.id), outcome.memory, between


def test_superseding_closes_both_lines(memory: MemoryService, tenant) -> None:
    porto, lisbon, between = _moved(memory, tenant)
    assert lisbon.valid_from == _month_before(datetime.now(UTC)) or lisbon.valid_from == _month_before(between)
    # event line: Porto held until Lisbon began; record line: the memory held Porto until now
    assert porto.status is Status.SUPERSEDED and porto.superseded_by == lisbon.id
    assert porto.valid_to == lisbon.valid_from
    assert porto.known_to == lisbon.recorded_at  # the same transaction
    assert porto.recorded_at < between < porto.known_to


def test_as_of_reads_the_world_and_known_at_reads_the_memory(memory: MemoryService, tenant) -> None:
    porto, lisbon, between = _moved(memory, tenant)
    me = memory.for_user(tenant.user)
    # at `between` the user already lived in Lisbon (they moved last month) ...
    assert _ids(me.list(as_of=between)) == [lisbon.id]
    assert _ids(me.search("where does the user live", as_of=between)) == [lisbon.id]
    # ... but the memory then still said Porto
    assert _ids(me.list(known_at=between)) == [porto.id]
    assert _ids(me.search("where does the user live", known_at=between)) == [porto.id]
    # a week ago, as known now: Lisbon; in 2021: Porto; before 2020: nowhere known
    week_ago = datetime.now(UTC) - timedelta(days=7)
    assert _ids(me.list(as_of=week_ago)) == [lisbon.id]
    assert _ids(me.list(as_of="2021-06-01")) == [porto.id]
    assert me.list(as_of="2019-06-01") == []
    # the memory knew nothing a week ago (both were recorded today)
    assert me.list(known_at=week_ago) == []
    # now: both lines agree
    now = _tick(memory)
    assert _ids(me.list(known_at=now)) == [lisbon.id] == _ids(me.list(as_of=now))
    # both at once: the world in 2021 as the memory knew it at `between` (Porto, still open then)
    assert _ids(me.list(as_of="2021-06-01", known_at=between)) == [porto.id]
    assert _ids(me.list(as_of=week_ago, known_at=between)) == [porto.id]
    assert _ids(me.list(as_of=week_ago, known_at=now)) == [lisbon.id]


def test_superseded_by_a_fact_older_than_it_the_old_one_never_held(memory: MemoryService, tenant) -> None:
    old = memory.for_user(tenant.user).add("Uses Vim as their editor.")
    between = _tick(memory)
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(
        ["I switched from Vim to VS Code in 2019."], llm=None)
    [outcome] = report.superseded
    new = outcome.memory
    old = memory.for_user(tenant.user).get(old.id)
    assert new.valid_from == datetime(2019, 1, 1, tzinfo=UTC)
    assert old.valid_to == old.valid_from  # never held, as known now
    assert old.known_to == new.recorded_at
    assert _ids(memory.for_user(tenant.user).list(as_of=between)) == [new.id]
    assert _ids(memory.for_user(tenant.user).list(known_at=between)) == [old.id]


def test_an_edit_keeps_both_lines(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Drinks espresso every morning.", valid_from="2024-01-01")
    for other in ("Owns a cat named Miso.", "Goes to the gym on Mondays.", "Plays the cello in an orchestra."):
        memory.for_user(tenant.user).add(other)
    before = _tick(memory)
    edited = memory.for_user(tenant.user).edit(item.id, content="Goes swimming every morning before work.")
    assert edited.valid_from == item.valid_from and edited.recorded_at == item.recorded_at
    assert edited.known_to is None
    me = memory.for_user(tenant.user)
    # the past is searched in its own wording, by both clocks
    for past in ({"as_of": before}, {"known_at": before}):
        [first, *_] = me.search("espresso coffee", k=4, **past)
        assert first.id == item.id and first.content == "Drinks espresso every morning.", past
        assert _ids(me.search("espresso coffee", min_relevance=0.3, **past)) == [item.id], past
    # before it was recorded, as_of 2025 reads the first wording it was recorded with
    [then] = [m for m in me.list(as_of="2025-01-01")]
    assert then.content == "Drinks espresso every morning."
    assert me.list(known_at="2025-01-01") == []
    # now the new wording is what is found
    assert _ids(me.search("swimming before work", k=1)) == [item.id]


def test_explicit_valid_from_on_add_and_put(memory: MemoryService, tenant) -> None:
    me = memory.for_user(tenant.user)
    item = me.add("Works at Acme as a data engineer.", valid_from=datetime(2022, 3, 1))  # naive: UTC
    assert item.valid_from == datetime(2022, 3, 1, tzinfo=UTC) and item.recorded_at > item.valid_from
    assert _ids(me.list(as_of="2023-01-01")) == [item.id]
    held = me.put("employer", "Works at Acme.", valid_from="2021-05-01T00:00:00+00:00")
    assert held.valid_from == datetime(2021, 5, 1, tzinfo=UTC)
    again = me.put("employer", "Works at Initech.", valid_from=date(2023, 7, 1))
    assert again.id == held.id and again.valid_from == datetime(2023, 7, 1, tzinfo=UTC)
    kept = me.put("employer", "Works at Initech as a lead.")
    assert kept.valid_from == again.valid_from  # not given: unchanged


def test_add_many_keeps_valid_from(memory: MemoryService, tenant) -> None:
    report = memory.for_user(tenant.user).add_many([
        {"content": "Speaks Portuguese fluently.", "valid_from": "2018-09-01"},
        {"content": "Plays padel on Fridays."},
    ])
    assert not report.rejected
    got = {m.content: m for m in memory.for_user(tenant.user).list()}
    assert got["Speaks Portuguese fluently."].valid_from == datetime(2018, 9, 1, tzinfo=UTC)
    padel = got["Plays padel on Fridays."]
    assert padel.valid_from == padel.recorded_at
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).add_many([{"content": "Flies to Mars.", "valid_from": "2999-01-01"}])
    assert err.value.field == "valid_from"


def test_an_update_that_says_the_fact_is_older_moves_its_start_back(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Lives in Lisbon, Portugal.")
    llm = _model({"content": "Lives in Lisbon, Portugal, near the river.", "memory_type": "fact", "scope": "user",
                  "confidence": 0.95, "valid_from": "2019-03-01"},
                 decisions=[{"proposal": 1, "decision": "UPDATE", "target": "M1", "reason": "more detail",
                             "content": "Lives in Lisbon, Portugal, near the river."}])
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(
        ["I have lived in Lisbon near the river since March 2019."], llm=llm)
    [outcome] = report.updated
    updated = outcome.memory
    assert updated.id == item.id and updated.version == 2
    assert updated.valid_from == datetime(2019, 3, 1, tzinfo=UTC)
    assert updated.recorded_at == item.recorded_at  # learned when it was first recorded
    assert [m.content for m in memory.for_user(tenant.user).list(as_of="2020-01-01")] == [
        "Lives in Lisbon, Portugal."]  # before the edit was recorded it read so


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-45", "", 1700000000, ["2024-01-01"],
                                 "2999-01-01T00:00:00+00:00"])
def test_bad_valid_from_and_known_at_are_refused(memory: MemoryService, tenant, bad) -> None:
    me = memory.for_user(tenant.user)
    with pytest.raises(InvalidInputError) as err:
        me.add("Keeps bees in the garden.", valid_from=bad)
    assert err.value.field == "valid_from"
    with pytest.raises(InvalidInputError) as err:
        me.put("bees", "Keeps bees in the garden.", valid_from=bad)
    assert err.value.field == "valid_from"
    if bad != "2999-01-01T00:00:00+00:00":  # a future known_at is a fine question (the answer is now's)
        with pytest.raises(InvalidInputError) as err:
            me.search("bees", known_at=bad)
        assert err.value.field == "known_at"
        with pytest.raises(InvalidInputError) as err:
            me.list(known_at=bad)
        assert err.value.field == "known_at"
    assert me.list() == []


def test_the_future_is_refused_with_a_clear_message(memory: MemoryService, tenant) -> None:
    with pytest.raises(InvalidInputError, match="valid_from.*is in the future"):
        memory.for_user(tenant.user).add("Lives on the moon.", valid_from=datetime.now(UTC) + timedelta(days=2))


def test_past_reads_never_show_another_users_rows(memory: MemoryService, tenant) -> None:
    theirs = memory.for_user(tenant.other_user).add("Lives in Porto near the river.", valid_from="2020-01-01")
    memory.for_user(tenant.other_user).edit(theirs.id, content="Lives in Porto near the old town.")
    memory.for_user(tenant.other_user, project_id=tenant.project).add(
        "Private: lives in Porto, moving soon.", scope="project", visibility="owner_only", valid_from="2020-01-01")
    mine = memory.for_user(tenant.user).add("Lives in Braga near the cathedral.", valid_from="2020-01-01")
    now = _tick(memory)
    every = ["active", "superseded", "archived"]
    me = memory.for_user(tenant.user, project_id=tenant.project, session_id=tenant.session)
    for past in ({"as_of": now}, {"known_at": now}, {"as_of": "2021-01-01"}, {"as_of": "2021-01-01", "known_at": now}):
        found = me.search("lives in Porto near the river", k=10, status=every, **past)
        assert all(r.id == mine.id for r in found), past
        assert _ids(me.list(status=every, **past)) in ([mine.id], []), past
        assert "Porto" not in " ".join(m.content for m in me.list(status=every, **past))


async def test_async_known_at(amemory, memory: MemoryService, tenant) -> None:
    item = await amemory.for_user(tenant.user).add("Commutes by train to work.", valid_from="2023-02-01")
    before = _tick(memory)
    await amemory.for_user(tenant.user).edit(item.id, content="Commutes by bicycle to work.")
    then = await amemory.for_user(tenant.user).search("how does the user commute", known_at=before)
    assert [r.content for r in then] == ["Commutes by train to work."]
    listed = await amemory.for_user(tenant.user).list(known_at=before.isoformat(), as_of="2024-01-01")
    assert [m.content for m in listed] == ["Commutes by train to work."]
    with pytest.raises(InvalidInputError):
        await amemory.for_user(tenant.user).add("Commutes by boat.", valid_from="next week")


# --- the stored wording stays true after the day it was said ----------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("Moved to Lisbon last month.", "Moved to Lisbon in October 2026."),
    ("Adopted a cat yesterday.", "Adopted a cat on 25 November 2026."),
    ("Joined Acme two weeks ago.", "Joined Acme in the week of 12 November 2026."),
    ("Started running today.", "Started running on 26 November 2026."),
    ("Started at Acme in March.", "Started at Acme in March 2026."),
    ("Since March works remotely.", "Since March 2026 works remotely."),
    ("Went to Rome in Sept. with Ann.", "Went to Rome in September 2026 with Ann."),
    ("Got married 3 years ago.", "Got married in 2023."),
    ("Met Bob on Tuesday.", "Met Bob on 24 November 2026."),
    ("Started a new job this year.", "Started a new job in 2026."),
    # already absolute, in the future, or no date: kept as said
    ("Moved on 3 May 2024.", "Moved on 3 May 2024."),
    ("Born on May 3rd.", "Born on May 3rd."),
    ("Moves to Berlin next month.", "Moves to Berlin next month."),
    ("Lives in Porto since 2019.", "Lives in Porto since 2019."),
    ("May I ask about March on the river?", "May I ask about March on the river?"),
])
def test_relative_dates_in_a_memory_are_written_as_the_date_they_name(text: str, expected: str) -> None:
    from agent_memory.extraction.when import anchor_when

    assert anchor_when(text, NOW) == expected


def test_extracted_memories_carry_the_date_not_last_month(memory: MemoryService, tenant) -> None:
    said = datetime(2026, 6, 15, 10, 0, tzinfo=UTC)
    handle = memory.for_user(tenant.user, session_id=tenant.session)
    report = handle.extract([{"role": "user", "content": "I moved to Lisbon last month.",
                              "timestamp": said.isoformat()}], llm=None)
    [outcome] = report.added
    assert "May 2026" in outcome.memory.content and "last month" not in outcome.memory.content
    llm = _model({"content": "Adopted a cat yesterday.", "memory_type": "fact", "scope": "user", "confidence": 0.9})
    report = memory.for_user(tenant.user, session_id=tenant.session + "-2").extract(
        [{"role": "user", "content": "We adopted a cat yesterday!", "timestamp": said.isoformat()}], llm=llm)
    [outcome] = report.added
    assert outcome.memory.content == "Adopted a cat on 14 June 2026."
    assert outcome.memory.valid_from == datetime(2026, 6, 14, tzinfo=UTC)
