"""How a memory changes without losing what it was: edits, supersession, memory_history and as_of."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from uuid import UUID

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
    old, new = history
    # each version says how IT came to be: the first was added, the second is the edit and its reason
    assert (old.change, old.decided_by, old.reason, old.changed_by) == ("add", DecisionMethod.USER, None, tenant.user)
    assert (new.change, new.decided_by, new.reason, new.changed_by) == (
        "edit", DecisionMethod.USER, "gave up coffee", tenant.user)
    assert isinstance(new.decided_by, DecisionMethod)
    assert old.recorded_until is not None and history[1].recorded_until is None

    # the embedding follows the new wording: a search on it finds the memory, first
    [hit, *_] = memory.for_user(tenant.user).search("green tea", k=1)
    assert hit.id == item.id and hit.content == "Drinks green tea every morning."
    assert hit.similarity > 0.5


def test_history_says_who_made_each_version_and_how(memory: MemoryService, tenant) -> None:
    """A member's project memory edited by the project's owner: the first version is the member's
    add, the second the owner's edit; a superseded item's successor says it superseded."""
    member = memory.for_user(tenant.other_user, project_id=tenant.project)
    owner = memory.for_user(tenant.user, project_id=tenant.project)
    item = member.add("The project deploys on Fridays.", scope="project", memory_type="habit")
    owner.edit(item.id, content="The project deploys on Thursdays.", reason="release day moved")
    first, second = owner.history(item.id)
    assert (first.version, first.change, first.decided_by, first.changed_by) == (
        1, "add", DecisionMethod.USER, tenant.other_user)
    assert (second.version, second.change, second.decided_by, second.changed_by, second.reason) == (
        2, "edit", DecisionMethod.USER, tenant.user, "release day moved")

    old, new, _ = _superseded_editor(memory, tenant.user, tenant.session)
    chain = memory.for_user(tenant.user).history(new.id)
    assert [(v.memory_id, v.change, v.decided_by, v.changed_by) for v in chain] == [
        (old.id, "add", DecisionMethod.USER, tenant.user),
        (new.id, "supersede", DecisionMethod.SIMILARITY, tenant.user)]
    assert chain[1].reason  # why the thresholds decided it


def test_a_change_the_reader_could_not_see_is_not_labelled(memory: MemoryService, tenant) -> None:
    """The change that made a version is kept with the version before; a reader who could not read
    that one gets no label (its reason may quote the wording they could not read)."""
    item, _ = _widened(memory, tenant.user, tenant.project, narrow="owner_only", wide="members")
    [seen] = memory.for_user(tenant.other_user, project_id=tenant.project).history(item.id)
    assert seen.version == 2 and (seen.change, seen.decided_by, seen.reason, seen.changed_by) == (None,) * 4
    owned = memory.for_user(tenant.user, project_id=tenant.project).history(item.id)
    assert [(v.version, v.change, v.changed_by) for v in owned] == [(1, "add", tenant.user),
                                                                     (2, "edit", tenant.user)]


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


# --- the past, read under the rules of then ---------------------------------------------------


def _widened(memory: MemoryService, owner: str, project: str, *, narrow: str, wide: str,
             same_words: bool = False) -> tuple[MemoryItem, datetime]:
    """A project memory put by key with ``narrow`` visibility, then put again with ``wide``;
    answers the memory and a moment between the two puts."""
    me = memory.for_user(owner, project_id=project)
    first = me.put("plan", "Plan: quietly sell the Lisbon office to Acme.", scope="project", visibility=narrow)
    between = _tick(memory)
    later = first.content if same_words else "Plan: keep the Lisbon office and hire two engineers."
    item = me.put("plan", later, scope="project", visibility=wide)
    assert item.id == first.id and item.visibility.value == wide
    _tick(memory)
    return item, between


_SECRET_PLAN = "quietly sell"
_READS = ("history", "search known_at", "search as_of", "search both", "list known_at", "list as_of", "list both")


def _past_read(who, item: MemoryItem, then: datetime, read: str) -> list[str]:
    """What ``who`` reads of ``item`` at ``then`` through one past read (one of :data:`_READS`)."""
    if read == "history":
        return [v.content for v in who.history(item.id)]
    kind, when = read.split()
    past = {"both": {"as_of": then, "known_at": then}}.get(when, {when: then})
    every = ["active", "superseded"]
    if kind == "search":
        return [r.content for r in who.search("plan for the Lisbon office", k=10, status=every, **past)
                if r.id == item.id]
    return [m.content for m in who.list(status=every, **past) if m.id == item.id]


@pytest.mark.parametrize("read", _READS)
def test_a_widened_memory_keeps_its_narrower_past_from_its_new_readers(memory: MemoryService, tenant,
                                                                       read: str) -> None:
    item, then = _widened(memory, tenant.user, tenant.project, narrow="owner_only", wide="members")
    editor = memory.for_user(tenant.other_user, project_id=tenant.project)
    owner = memory.for_user(tenant.user, project_id=tenant.project)
    old = "Plan: quietly sell the Lisbon office to Acme."
    if read == "history":  # the editor reads the memory now, never as it was while only its owner could
        assert _past_read(editor, item, then, read) == [item.content]
        assert _past_read(owner, item, then, read) == [old, item.content]
    else:
        assert _past_read(editor, item, then, read) == []
        assert _past_read(owner, item, then, read) == [old]
    # after the widening, the editor reads it: the version of then is one they could read
    now = _tick(memory)
    assert [m.content for m in editor.list(known_at=now) if m.id == item.id] == [item.content]


def test_widening_alone_is_a_version_of_its_own(memory: MemoryService, tenant) -> None:
    """A put that changes only the visibility keeps the narrower past too (the wording stays)."""
    item, then = _widened(memory, tenant.user, tenant.project, narrow="owner_only", wide="members",
                          same_words=True)
    assert item.version == 2
    editor = memory.for_user(tenant.other_user, project_id=tenant.project)
    owner = memory.for_user(tenant.user, project_id=tenant.project)
    for read in _READS[1:]:
        assert _past_read(editor, item, then, read) == [], read
        assert _past_read(owner, item, then, read) == [item.content], read
    assert [(v.version, v.visibility) for v in owner.history(item.id)] == [(1, "owner_only"), (2, "members")]
    assert [(v.version, v.visibility) for v in editor.history(item.id)] == [(2, "members")]


def test_a_memory_made_public_keeps_its_members_past_from_those_it_is_shared_with(memory: MemoryService,
                                                                                   tenant) -> None:
    guest = f"guest-{tenant.user}"
    memory.share_project(tenant.project, with_user=guest, user_id=tenant.user)
    item, then = _widened(memory, tenant.user, tenant.project, narrow="members", wide="public")
    shared = memory.for_user(guest, project_id=tenant.project)
    assert [m.id for m in shared.list()] == [item.id]  # public now: the guest reads it
    editor = memory.for_user(tenant.other_user, project_id=tenant.project)
    for read in _READS:
        assert _past_read(shared, item, then, read) == ([item.content] if read == "history" else []), read
        # a member reads the members-only version of then
        assert _past_read(editor, item, then, read)[0] == "Plan: quietly sell the Lisbon office to Acme.", read


def test_an_export_carries_only_the_versions_its_user_could_read_then(memory: MemoryService, tenant) -> None:
    item, _ = _widened(memory, tenant.user, tenant.project, narrow="owner_only", wide="members")
    editor = memory.export_data(user_id=tenant.other_user)
    assert item.id in {UUID(m["id"]) for m in editor["memories"]}
    assert _SECRET_PLAN not in str(editor)
    assert [h for h in editor["history"] if h["memory_id"] == str(item.id)] == []
    owner = memory.export_data(user_id=tenant.user)
    [kept] = [h for h in owner["history"] if h["memory_id"] == str(item.id)]
    assert _SECRET_PLAN in kept["content"] and kept["visibility"] == "owner_only"


def test_versions_keep_their_visibility_through_an_export_and_import(memory: MemoryService, tenant, fresh_dsn,
                                                                      config, embeddings) -> None:
    item, then = _widened(memory, tenant.user, tenant.project, narrow="owner_only", wide="members")
    data = json.loads(json.dumps(memory.export_data(user_id=tenant.user, what="owned")))
    older = json.loads(json.dumps(data))  # as an export made before versions kept their visibility
    for h in older["history"]:
        del h["visibility"]
    for exported, kept in ((data, "owner_only"), (older, "members")):
        with MemoryService(fresh_dsn(), config=config, embeddings=embeddings) as new:
            new.import_data(exported, as_operator=True)
            new.add_member("project", tenant.project, tenant.other_user, "editor", user_id=tenant.user)
            owner = new.for_user(tenant.user, project_id=tenant.project)
            assert [v.visibility for v in owner.history(item.id)] == [kept, "members"]
            editor = new.for_user(tenant.other_user, project_id=tenant.project)
            # an older export knows no better than the memory's own visibility: its versions take it
            assert len(editor.history(item.id)) == (1 if kept == "owner_only" else 2)
            assert [m.id for m in editor.list(known_at=then)] == ([] if kept == "owner_only" else [item.id])


def test_a_narrowed_memory_is_gone_from_its_former_readers_past(memory: MemoryService, tenant) -> None:
    item, then = _widened(memory, tenant.user, tenant.project, narrow="members", wide="owner_only")
    editor = memory.for_user(tenant.other_user, project_id=tenant.project)
    with pytest.raises(MemoryNotFoundError):
        editor.history(item.id)
    for past in ({"known_at": then}, {"as_of": then}):
        assert item.id not in {r.id for r in editor.search("Lisbon office", k=10, **past)}
        assert item.id not in {m.id for m in editor.list(**past)}


async def test_async_past_reads_keep_the_rules_of_then(amemory, memory: MemoryService, tenant) -> None:
    item, then = _widened(memory, tenant.user, tenant.project, narrow="owner_only", wide="members")
    editor = amemory.for_user(tenant.other_user, project_id=tenant.project)
    assert [v.content for v in await editor.history(item.id)] == [item.content]
    assert [r.id for r in await editor.search("Lisbon office", known_at=then)] == []
    assert [m.id for m in await editor.list(as_of=then)] == []


def test_the_chain_followed_step_by_step_is_the_recursive_chain(memory: MemoryService, tenant) -> None:
    """A Citus cluster follows a supersession chain one step a statement (no recursive statement
    over many shards): the same versions as the recursive statement, from either end."""
    from agent_memory import history as history_ops
    from agent_memory.db.requests import run
    from agent_memory.models import Identity

    old, new, _ = _superseded_editor(memory, tenant.user, tenant.session)
    me = Identity(user_id=tenant.user)
    for start in (old.id, new.id):
        recursive = run(history_ops.chain(me, start), memory.conn, memory.embeddings)
        stepwise = run(history_ops.chain(me, start, distributed=True), memory.conn, memory.embeddings)
        assert [(v.memory_id, v.version) for v in stepwise] == [(v.memory_id, v.version) for v in recursive]
        assert {v.memory_id for v in recursive} == {old.id, new.id}
