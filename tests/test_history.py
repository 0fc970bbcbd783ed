"""How a memory changes without losing what it was: edits, supersession, memory_history and as_of."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agent_memory import MemoryService
from agent_memory.embeddings import LocalEmbeddings
from agent_memory.errors import (
    InvalidInputError,
    MemoryNotFoundError,
    PermissionDeniedError,
)
from agent_memory.models import (
    DecisionMethod,
    MemoryItem,
    Rejection,
    RejectionReason,
    Status,
)
from agent_memory.validation import check_as_of


def _tick(memory: MemoryService) -> datetime:
    """A moment strictly between two writes, read from the database's clock (which stamps them)."""
    time.sleep(0.01)
    with memory.conn.connection() as conn:
        [moment] = conn.execute("SELECT clock_timestamp()").fetchone()
    time.sleep(0.01)
    return moment


def _contents(results) -> list[str]:
    return [r.content for r in results]


def _superseded_editor(memory: MemoryService, user: str, session: str) -> tuple[MemoryItem, MemoryItem, datetime]:
    """'Uses Vim as their editor.' superseded by 'Switched from Vim to VS Code.' (offline rules);
    answers (old, new, a moment between them)."""
    old = memory.for_user(user).add("Uses Vim as their editor.")
    between = _tick(memory)
    report = memory.for_user(user, session_id=session).extract(["I switched from Vim to VS Code."], llm=None)
    [outcome] = report.superseded
    assert outcome.replaced.id == old.id
    return memory.for_user(user).get(old.id), outcome.memory, between


def test_edit_keeps_the_old_wording_and_re_embeds(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Drinks espresso every morning.", memory_type="habit")
    assert item.version == 1
    edited = memory.for_user(tenant.user).edit(item.id, content="Drinks green tea every morning.", reason="gave up coffee")
    assert isinstance(edited, MemoryItem)
    assert edited.id == item.id and edited.version == 2 and edited.content == "Drinks green tea every morning."
    assert edited.memory_type is item.memory_type and edited.status is Status.ACTIVE
    assert edited.updated_at > item.updated_at

    history = memory.for_user(tenant.user).history(item.id)
    assert [(v.content, v.version, v.current) for v in history] == [
        ("Drinks espresso every morning.", 1, False), ("Drinks green tea every morning.", 2, True)]
    old = history[0]
    assert old.change == "edit" and old.decided_by == DecisionMethod.USER.value and old.reason == "gave up coffee"
    assert old.recorded_until is not None and history[1].recorded_until is None

    # the embedding follows the new wording: a search on it finds the memory, first
    [hit, *_] = memory.for_user(tenant.user).search("green tea", k=1)
    assert hit.id == item.id and hit.content == "Drinks green tea every morning."
    assert hit.similarity > 0.5


def test_edit_type_and_confidence_without_content(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Plays chess on Sundays.", confidence=0.8)
    edited = memory.for_user(tenant.user).edit(item.id, memory_type="habit", confidence=0.95)
    assert edited.content == item.content and edited.version == 2
    assert edited.memory_type.value == "habit" and edited.confidence == pytest.approx(0.95)
    [old, new] = memory.for_user(tenant.user).history(item.id)
    assert old.memory_type.value == "fact" and new.memory_type.value == "habit"


def test_edit_arguments_are_checked(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Collects vinyl records.")
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).edit(item.id)
    assert err.value.field == "content"
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).edit(item.id, memory_type="opinion")
    assert err.value.field == "memory_type"
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).edit(item.id, confidence=1.5)
    assert err.value.field == "confidence"
    with pytest.raises(MemoryNotFoundError):
        memory.for_user(tenant.user).edit("00000000-0000-0000-0000-000000000000", confidence=0.9)
    assert memory.for_user(tenant.user).get(item.id).version == 1


def test_edit_refused_for_another_users_memory(memory: MemoryService, tenant) -> None:
    # the tenant's user owns the project; the other user is an editor, who edits only their own
    shared = memory.for_user(tenant.user, project_id=tenant.project).add("The project uses trunk-based development.", scope="project", memory_type="habit")
    with pytest.raises(PermissionDeniedError, match="needs the role owner or admin; you are an editor"):
        memory.for_user(tenant.other_user, project_id=tenant.project).edit(shared.id, content="The project uses GitFlow.")
    private = memory.for_user(tenant.user).add("Is training for a marathon.")
    with pytest.raises(MemoryNotFoundError):  # not even visible
        memory.for_user(tenant.other_user).edit(private.id, content="Is training for a triathlon.")
    for item in (shared, private):
        now = memory.for_user(tenant.user, project_id=tenant.project).get(item.id)
        assert now.content == item.content and now.version == 1
        assert len(memory.for_user(tenant.user, project_id=tenant.project).history(item.id)) == 1

def test_edit_refused_for_archived_and_superseded_memories(memory: MemoryService, tenant) -> None:
    archived = memory.for_user(tenant.user).add("Owns a red bicycle.")
    memory.for_user(tenant.user).delete(archived.id)
    with pytest.raises(InvalidInputError, match="archived"):
        memory.for_user(tenant.user).edit(archived.id, content="Owns a blue bicycle.")
    old, _new, _ = _superseded_editor(memory, tenant.user, tenant.session)
    assert old.status is Status.SUPERSEDED
    with pytest.raises(InvalidInputError, match="superseded"):
        memory.for_user(tenant.user).edit(old.id, content="Uses Emacs as their editor.")
    assert memory.for_user(tenant.user).get(archived.id).content == "Owns a red bicycle."
    assert memory.for_user(tenant.user).get(old.id).version == 1


@pytest.mark.parametrize(("content", "reason"), [
    ("My password is hunter2", RejectionReason.SENSITIVE),
    ("ok", RejectionReason.TOO_SHORT),
    ("   ", RejectionReason.EMPTY),
])
def test_a_gate_rejection_on_edit_changes_nothing(memory: MemoryService, tenant, content, reason) -> None:
    item = memory.for_user(tenant.user).add("Keeps a sourdough starter.")
    result = memory.for_user(tenant.user).edit(item.id, content=content)
    assert isinstance(result, Rejection) and result.reason is reason
    assert "hunter2" not in result.message
    now = memory.for_user(tenant.user).get(item.id)
    assert now.content == item.content and now.version == 1 and now.updated_at == item.updated_at
    assert [v.content for v in memory.for_user(tenant.user).history(item.id)] == [item.content]


class _EmbeddingsWithHook(LocalEmbeddings):
    """The session's embedder, running ``hook`` before each batch of documents is embedded."""

    def __init__(self, inner: LocalEmbeddings, hook) -> None:
        super().__init__()
        self._inner, self._hook = inner, hook

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self._hook()
        return self._inner.embed_documents(texts)


def test_an_item_archived_while_its_edit_is_embedded_is_not_revised(dsn, config, embeddings, tenant) -> None:
    with MemoryService(dsn, config=config, embeddings=embeddings) as plain:
        item = plain.for_user(tenant.user).add("Cycles to work in summer.")

    def archive_meanwhile() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE memory_items SET status = 'archived' WHERE id = %s", (item.id,))

    with MemoryService(dsn, config=config, embeddings=_EmbeddingsWithHook(embeddings, archive_meanwhile)) as racy:
        try:
            result = racy.for_user(tenant.user).edit(item.id, content="Cycles to work all year round.")
        except InvalidInputError:
            result = None  # refused: what should happen
        now = racy.for_user(tenant.user).get(item.id)
    assert now.status is Status.ARCHIVED
    assert result is None or isinstance(result, Rejection)
    assert now.content == "Cycles to work in summer." and now.version == 1


def test_as_of_search_matches_the_wording_of_that_time(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Drinks espresso every morning.")
    for other in ("Owns a cat named Miso.", "Goes to the gym on Mondays.", "Plays the cello in an orchestra."):
        memory.for_user(tenant.user).add(other)
    before = _tick(memory)
    memory.for_user(tenant.user).edit(item.id, content="Goes swimming every morning before work.")
    [first, *_] = memory.for_user(tenant.user).search("espresso coffee", as_of=before, k=4)
    assert first.id == item.id and first.content == "Drinks espresso every morning."
    strict = memory.for_user(tenant.user).search("espresso coffee", as_of=before, min_relevance=0.3)
    assert [r.id for r in strict] == [item.id]


def test_as_of_before_an_item_existed_leaves_it_out(memory: MemoryService, tenant) -> None:
    before = _tick(memory)
    item = memory.for_user(tenant.user).add("Grows tomatoes on the balcony.")
    after = _tick(memory)
    assert memory.for_user(tenant.user).search("tomatoes", as_of=before) == []
    assert memory.for_user(tenant.user).list(as_of=before) == []
    assert [r.id for r in memory.for_user(tenant.user).search("tomatoes", as_of=after)] == [item.id]
    assert [m.id for m in memory.for_user(tenant.user).list(as_of=after)] == [item.id]


def test_as_of_before_an_edit_reads_the_old_wording(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Lives in Lisbon near the river.")
    before_first = _tick(memory)
    memory.for_user(tenant.user).edit(item.id, content="Lives in Porto near the river.")
    before_second = _tick(memory)
    memory.for_user(tenant.user).edit(item.id, content="Lives in Porto near the old town.")
    now = _tick(memory)

    def wording(as_of) -> tuple[list[str], list[str]]:
        found = _contents(memory.for_user(tenant.user).search("where does the user live", as_of=as_of))
        listed = [m.content for m in memory.for_user(tenant.user).list(as_of=as_of)]
        return found, listed

    assert wording(before_first) == (["Lives in Lisbon near the river."], ["Lives in Lisbon near the river."])
    assert wording(before_second) == (["Lives in Porto near the river."], ["Lives in Porto near the river."])
    assert wording(now) == (["Lives in Porto near the old town."], ["Lives in Porto near the old town."])
    assert _contents(memory.for_user(tenant.user).search("where does the user live")) == [
        "Lives in Porto near the old town."]
    history = memory.for_user(tenant.user).history(item.id)
    assert [v.version for v in history] == [1, 2, 3]
    # each wording was replaced after the previous one: recorded_until increases
    assert history[0].recorded_until < history[1].recorded_until


def test_as_of_search_does_not_count_as_use(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Speaks Portuguese at home.")
    now = _tick(memory)
    assert memory.for_user(tenant.user).search("Portuguese", as_of=now)
    assert memory.for_user(tenant.user).get(item.id).access_count == item.access_count


def test_superseded_items_need_asking_for(memory: MemoryService, tenant) -> None:
    old, new, between = _superseded_editor(memory, tenant.user, tenant.session)
    assert old.status is Status.SUPERSEDED and old.superseded_by == new.id
    assert old.valid_to == new.valid_from
    assert _contents(memory.for_user(tenant.user).search("code editor")) == ["Switched from Vim to VS Code."]
    assert [m.id for m in memory.for_user(tenant.user).list()] == [new.id]
    both = memory.for_user(tenant.user).search("code editor", status=["active", "superseded"])
    assert {r.id for r in both} == {old.id, new.id}
    assert {m.id for m in memory.for_user(tenant.user).list(status=["active", "superseded"])} == {
        old.id, new.id}
    # as_of reads what held then: the old fact before the switch, the new one after it
    assert [r.id for r in memory.for_user(tenant.user).search("code editor", as_of=between)] == [old.id]
    assert [m.id for m in memory.for_user(tenant.user).list(as_of=between)] == [old.id]
    assert [r.id for r in memory.for_user(tenant.user).search("code editor", as_of=_tick(memory))] == [new.id]
    # the chain reads the same from either end
    chain = [v.content for v in memory.for_user(tenant.user).history(old.id)]
    assert chain == ["Uses Vim as their editor.", "Switched from Vim to VS Code."]
    assert [v.content for v in memory.for_user(tenant.user).history(new.id)] == chain


def test_archived_items_are_gone_from_the_past_too(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Volunteers at the food bank.")
    while_active = _tick(memory)
    memory.for_user(tenant.user).delete(item.id)
    assert memory.for_user(tenant.user).search("food bank", as_of=while_active) == []
    assert memory.for_user(tenant.user).list(as_of=while_active) == []
    memory.for_user(tenant.user).restore(item.id)
    assert [r.id for r in memory.for_user(tenant.user).search("food bank", as_of=while_active)] == [item.id]


def test_as_of_accepts_strings_and_naive_times(memory: MemoryService, tenant) -> None:
    before = _tick(memory)
    item = memory.for_user(tenant.user).add("Runs a book club every month.")
    after = _tick(memory)
    for as_of, expected in ((after.isoformat(), [item.id]), (before.isoformat(), []),
                            (after.astimezone(UTC).replace(tzinfo=None), [item.id]),
                            (before.astimezone(UTC).replace(tzinfo=None), []),
                            (after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f"), [item.id]),
                            # the same instant written in another zone
                            (after.astimezone(datetime.now().astimezone().tzinfo).isoformat(), [item.id])):
        assert [r.id for r in memory.for_user(tenant.user).search("book club", as_of=as_of)] == expected, as_of
        assert [m.id for m in memory.for_user(tenant.user).list(as_of=as_of)] == expected, as_of
    # a naive time is read as UTC
    naive = datetime(2030, 1, 2, 3, 4, 5)
    assert check_as_of(naive) == naive.replace(tzinfo=UTC)
    assert check_as_of("2030-01-02T03:04:05+02:00") == datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-45", "", 1700000000, ["2024-01-01"]])
def test_as_of_validation(memory: MemoryService, tenant, bad) -> None:
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).search("anything", as_of=bad)
    assert err.value.field == "as_of"
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).list(as_of=bad)
    assert err.value.field == "as_of"


def test_history_and_the_past_stay_private(memory: MemoryService, tenant) -> None:
    theirs = memory.for_user(tenant.other_user).add("Is saving up for a sailboat.")
    memory.for_user(tenant.other_user).edit(theirs.id, content="Is saving up for a small sailboat.")
    mine = memory.for_user(tenant.user).add("Is saving up for a camper van.")
    now = _tick(memory)
    with pytest.raises(MemoryNotFoundError):
        memory.for_user(tenant.user).history(theirs.id)
    with pytest.raises(MemoryNotFoundError):
        memory.for_user(tenant.user, project_id=tenant.project, session_id=tenant.session).history(theirs.id)
    found = memory.for_user(tenant.user).search("saving up for a sailboat", as_of=now, k=10, status=["active", "superseded", "archived"])
    assert [r.id for r in found] == [mine.id]
    assert [m.id for m in memory.for_user(tenant.user).list(as_of=now, status=["active", "superseded", "archived"])] == [mine.id]
    # an owner_only project memory of another member stays out of the past as well
    memory.for_user(tenant.other_user, project_id=tenant.project).add("Private: negotiating the sailboat price.", scope="project", visibility="owner_only")
    later = _tick(memory)
    assert "sailboat price" not in " ".join(_contents(memory.for_user(tenant.user, project_id=tenant.project).search("sailboat price", as_of=later, k=10)))


async def test_async_as_of_search_and_history(amemory, memory: MemoryService, tenant) -> None:
    item = await amemory.for_user(tenant.user).add("Commutes by train to work.")
    before = _tick(memory)
    edited = await amemory.for_user(tenant.user).edit(item.id, content="Commutes by bicycle to work.")
    assert edited.version == 2
    then = await amemory.for_user(tenant.user).search("how does the user commute", as_of=before)
    assert _contents(then) == ["Commutes by train to work."]
    listed = await amemory.for_user(tenant.user).list(as_of=before.isoformat())
    assert [m.content for m in listed] == ["Commutes by train to work."]
    history = await amemory.for_user(tenant.user).history(item.id)
    assert [v.content for v in history] == ["Commutes by train to work.", "Commutes by bicycle to work."]
    with pytest.raises(MemoryNotFoundError):
        await amemory.for_user(tenant.other_user).history(item.id)
    with pytest.raises(InvalidInputError):
        await amemory.for_user(tenant.user).search("commute", as_of="last tuesday")
    assert await amemory.for_user(tenant.user).search("commute", as_of=before - timedelta(hours=1)) == []
