"""Key-addressed memories (put / get_by_key) and expiry: what a key names, who may replace it,
and that an expired memory is gone from every read the moment it expires, until a sweep deletes it.

Time is controlled by moving a memory's ``expires_at`` into the past in the database (what the
passing of time does to it), so nothing here sleeps."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from search_reference import exhaustive

from agent_memory import (
    InvalidInputError,
    MaintenanceReport,
    MemoryConfig,
    MemoryItem,
    MemoryNotFoundError,
    MemoryService,
    PermissionDeniedError,
    Rejection,
)


def expire(dsn: str, *ids: Any) -> None:
    """What time does to a memory with an expiry: it is now in the past."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE memory_items SET expires_at = now() - interval '1 second' WHERE id = ANY(%s)",
                     (list(ids),))


def row_count(dsn: str, table: str, column: str, value: Any) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", (value,)).fetchone()[0]


# --- keys ------------------------------------------------------------------------------------------


def test_put_writes_then_revises_the_memory_its_key_names(memory, tenant):
    me = memory.for_user(tenant.user)
    first = me.put("editor", "Uses Vim for every project")
    assert isinstance(first, MemoryItem) and first.key == "editor" and first.version == 1
    assert me.get_by_key("editor").id == first.id
    second = me.put("editor", "Switched to VS Code for every project", metadata={"source": "settings"})
    assert second.id == first.id and second.version == 2 and second.content.startswith("Switched")
    assert second.metadata == {"source": "settings"}
    assert [v.content for v in me.history(first.id)][:2] == ["Uses Vim for every project",
                                                              "Switched to VS Code for every project"]
    # the same words again change nothing but what put replaces (metadata), no new version
    third = me.put("editor", "Switched to VS Code for every project")
    assert third.version == 2 and third.metadata == {}
    # a put is never deduplicated into another memory: the key says which one it is
    other = me.put("editor-at-home", "Switched to VS Code for every project")
    assert other.id != first.id and me.get_by_key("editor-at-home").id == other.id
    assert len(me.list()) == 2


def test_a_put_brings_an_archived_memory_back(memory, tenant):
    me = memory.for_user(tenant.user)
    item = me.put("coffee", "Drinks oat milk flat whites")
    me.delete(item.id)
    with pytest.raises(MemoryNotFoundError, match="key 'coffee'"):
        me.get_by_key("coffee")
    again = me.put("coffee", "Drinks oat milk flat whites")
    assert again.id == item.id and again.status.value == "active"


def test_keys_are_per_user_and_per_session_and_shared_in_a_project(memory, tenant):
    mine, theirs = memory.for_user(tenant.user), memory.for_user(tenant.other_user)
    a = mine.put("theme", "Prefers dark mode")
    b = theirs.put("theme", "Prefers light mode")
    assert a.id != b.id
    assert mine.get_by_key("theme").content == "Prefers dark mode"
    assert theirs.get_by_key("theme").content == "Prefers light mode"
    # two users in sessions with the same id: a session's keys are its user's
    s1 = memory.for_user(tenant.user, session_id="shared-session").put("topic", "Debugging the login page",
                                                                     scope="session")
    s2 = memory.for_user(tenant.other_user, session_id="shared-session").put("topic", "Writing release notes",
                                                                           scope="session")
    assert s1.id != s2.id
    # a project's key names one memory for all its members; an editor may not replace another's
    owner = memory.for_user(tenant.user, project_id=tenant.project)
    editor = memory.for_user(tenant.other_user, project_id=tenant.project)
    rule = owner.put("db", "The project uses PostgreSQL 16", scope="project")
    assert editor.get_by_key("db", scope="project").id == rule.id
    with pytest.raises(PermissionDeniedError):
        editor.put("db", "The project uses MySQL", scope="project")
    assert owner.get_by_key("db", scope="project").content == "The project uses PostgreSQL 16"
    # the owner (a project admin) may replace any member's
    theirs_rule = editor.put("ci", "CI runs on every push", scope="project")
    assert owner.put("ci", "CI runs on every pull request", scope="project").id == theirs_rule.id


def test_a_key_held_by_a_memory_the_caller_cannot_see_is_refused_without_showing_it(memory, tenant):
    owner = memory.for_user(tenant.user, project_id=tenant.project)
    editor = memory.for_user(tenant.other_user, project_id=tenant.project)
    owner.put("draft", "A private draft about the reorganisation", scope="project", visibility="owner_only")
    with pytest.raises(MemoryNotFoundError):
        editor.get_by_key("draft", scope="project")
    with pytest.raises(PermissionDeniedError) as refused:
        editor.put("draft", "The editor's own draft", scope="project")
    assert "reorganisation" not in str(refused.value)


def test_get_by_key_never_crosses_tenants(memory, tenant):
    memory.for_user(tenant.user, project_id=tenant.project).put("plan", "Ship the beta in May", scope="project")
    memory.for_user(tenant.user).put("plan", "Learn the cello this year")
    outsider = f"outsider-{uuid.uuid4().hex[:8]}"
    with pytest.raises(MemoryNotFoundError):
        memory.for_user(outsider).get_by_key("plan")
    with pytest.raises((MemoryNotFoundError, PermissionDeniedError)):
        memory.for_user(outsider, project_id=tenant.project).get_by_key("plan", scope="project")
    # the project's key and the user's key are different memories
    me = memory.for_user(tenant.user, project_id=tenant.project)
    assert me.get_by_key("plan").content != me.get_by_key("plan", scope="project").content


def test_put_passes_the_gate_and_checks_its_key(memory, tenant):
    me = memory.for_user(tenant.user)
    refused = me.put("creds", "my password is hunter2!")
    assert isinstance(refused, Rejection) and refused.reason.value == "sensitive"
    assert isinstance(me.put("AKIAIOSFODNN7EXAMPLE", "Uses the staging account"), Rejection)
    for bad in ("", " padded", "a" * 1025, 42, "tab\there"):
        with pytest.raises(InvalidInputError, match="key"):
            me.put(bad, "Prefers short answers")
    with pytest.raises(InvalidInputError, match="key"):
        me.add_many([{"content": "Prefers short answers", "key": "k"}])
    assert me.list() == []


# --- expiry ----------------------------------------------------------------------------------------


def test_ttl_and_expires_at_are_checked(memory, tenant):
    me = memory.for_user(tenant.user)
    soon = me.add("The office is closed this week", ttl=3600)
    assert soon.expires_at is not None
    assert timedelta(minutes=59) < soon.expires_at - datetime.now(UTC) <= timedelta(hours=1)
    at = datetime.now(UTC) + timedelta(days=2)
    assert me.add("The team offsite is on Thursday", expires_at=at.isoformat()).expires_at == at
    for kwargs, field in (({"ttl": 0}, "ttl"), ({"ttl": -5}, "ttl"), ({"ttl": "soon"}, "ttl"),
                          ({"ttl": 60, "expires_at": at}, "ttl"), ({"expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
                          ({"expires_at": "next week"}, "expires_at")):
        with pytest.raises(InvalidInputError) as info:
            me.add("The printer on floor two is broken", **kwargs)
        assert info.value.field == field


def test_an_expired_memory_is_gone_from_every_read(memory, dsn, tenant):
    me = memory.for_user(tenant.user, project_id=tenant.project)
    lasting = me.add("The office kitchen has an espresso machine")
    closed = me.add("The office is closed this week for renovation", ttl=3600)
    keyed = me.put("parking", "Parking is in the north garage this week", ttl=3600)
    shared = me.add("The project demo moved to Friday this week", scope="project", ttl=3600)
    expire(dsn, closed.id, keyed.id, shared.id)

    gone = {closed.id, keyed.id, shared.id}
    assert not gone & {r.item.id for r in me.search("office closed this week parking demo", k=20)}
    with exhaustive():
        assert not gone & {r.item.id for r in me.search("office closed this week parking demo", k=20)}
    assert not gone & {i.id for i in me.list(status=None, limit=100)}
    results, conflicts = me.search_with_conflicts("office this week", k=20)
    assert not gone & {r.item.id for r in results} | {m.id for c in conflicts for m in c.items}
    for item in (closed, keyed, shared):
        with pytest.raises(MemoryNotFoundError):
            me.get(item.id)
    with pytest.raises(MemoryNotFoundError):
        me.get_by_key("parking")
    assert me.find_duplicate("The office is closed this week for renovation") is None
    assert me.stats().total == 1
    assert lasting.id in {r.item.id for r in me.search("espresso", k=5)}
    # saying it again makes a new memory: the expired one is not a duplicate of anything
    again = me.add("The office is closed this week for renovation")
    assert isinstance(again, MemoryItem) and again.id != closed.id and not again.deduplicated
    # a put on an expired key starts over (the expired holder is deleted then and there)
    assert me.put("parking", "Parking is in the south garage").id != keyed.id
    assert row_count(dsn, "memory_items", "id", keyed.id) == 0

    # the sweep deletes what expired (and only that), history included
    assert row_count(dsn, "memory_items", "id", closed.id) == 1
    swept = memory.purge_expired()
    assert swept >= 2
    for item in (closed, keyed, shared):
        assert row_count(dsn, "memory_items", "id", item.id) == 0
    assert row_count(dsn, "memory_items", "id", lasting.id) == 1
    assert memory.purge_expired() == 0


def test_indexed_search_equals_the_exhaustive_scan_with_expired_rows_present(memory, dsn, tenant):
    """Expired rows hold words and vectors the keyword statistics would count: both paths
    leave them out alike, so the indexed search stays exact."""
    me = memory.for_user(tenant.user, project_id=tenant.project)
    words = ["release", "deadline", "kubernetes", "budget", "coffee", "weekend", "parser", "deploy"]
    expiring = []
    for i in range(24):
        text = f"Note {i}: the {words[i % 8]} and the {words[(i * 3) % 8]} matter for {words[(i + 5) % 8]} work"
        item = me.add(text, scope="project" if i % 2 else "user", ttl=3600 if i % 3 == 0 else None, dedupe=False)
        if i % 3 == 0:
            expiring.append(item.id)
    expire(dsn, *expiring)
    for query in ("release deadline", "coffee on the weekend", "deploy the parser", "budget"):
        for k in (1, 5, 20):
            got = [(r.item.id, round(r.score, 9)) for r in me.search(query, k=k)]
            with exhaustive():
                want = [(r.item.id, round(r.score, 9)) for r in me.search(query, k=k)]
            assert got == want, (query, k)
            assert not set(expiring) & {i for i, _ in got}


def test_configured_lifetimes_by_level_and_type(dsn, embeddings, tenant):
    config = MemoryConfig.defaults().replace(ttl_days={"session": 7, "event": 2})
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        me = memory.for_user(tenant.user, session_id=tenant.session)
        now = datetime.now(UTC)

        def lifetime(item: Any) -> timedelta:
            return item.expires_at - now

        assert me.add("Prefers answers with code examples").expires_at is None
        session = me.add("In this chat we are fixing the login page", scope="session")
        assert timedelta(days=6.99) < lifetime(session) <= timedelta(days=7, minutes=1)
        event = me.add("Gave a talk at the Lisbon meetup", memory_type="event")
        assert timedelta(days=1.99) < lifetime(event) <= timedelta(days=2, minutes=1)
        both = me.add("In this chat the demo happened", scope="session", memory_type="event")
        assert lifetime(both) <= timedelta(days=2, minutes=1)  # the shorter of the two
        told = me.add("In this chat we pair on the parser", scope="session", ttl=60)
        assert lifetime(told) <= timedelta(minutes=2)  # what a save says wins
        bulk = me.add_many([{"content": "In this chat we review the schema", "scope": "session"},
                            {"content": "Moved to Porto last spring", "memory_type": "event", "ttl": 30}])
        items = {i.content: i for i in me.list(scope=["session", "user"], limit=50)}
        assert len(bulk.inserted) == 2
        assert timedelta(days=6.99) < lifetime(items["In this chat we review the schema"])
        assert lifetime(items["Moved to Porto last spring"]) <= timedelta(minutes=1)


def test_a_profile_forgets_what_expired(memory, dsn, tenant):
    me = memory.for_user(tenant.user)
    me.add("Prefers concise answers", memory_type="preference")
    brief = me.add("Prefers answers in German this week", memory_type="preference", ttl=3600)
    assert "German" in me.profiles().user_text
    expire(dsn, brief.id)
    assert "German" not in me.profiles().user_text
    assert "concise" in me.profiles().user_text


async def test_the_async_handle_puts_and_gets_by_key(amemory, tenant):
    me = amemory.for_user(tenant.user)
    item = await me.put("hobby", "Plays the cello on Sundays", ttl=timedelta(days=1))
    assert (await me.get_by_key("hobby")).id == item.id
    assert await amemory.purge_expired() >= 0


def test_the_maintain_command_deletes_what_expired(dsn, monkeypatch, capsys, memory, tenant):
    from agent_memory.cli import main

    item = memory.for_user(tenant.user).add("The printer on floor two is broken today", ttl=3600)
    expire(dsn, item.id)
    monkeypatch.setenv("DATABASE_URL", dsn)
    assert main(["maintain", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["expired"] >= 1
    assert row_count(dsn, "memory_items", "id", item.id) == 0


# --- salience, retention and maintenance -----------------------------------------------------------


def stored(dsn: str, memory_id: Any) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT salience, stability, salience_at, status, retention FROM memory_items"
                           " WHERE id = %s", (memory_id,)).fetchone()
    return dict(zip(("salience", "stability", "salience_at", "status", "retention"), row, strict=True))


def set_row(dsn: str, memory_id: Any, assignments: str, *params: Any) -> None:
    """Move a memory back in time (what days passing would have done)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE memory_items SET {assignments} WHERE id = %s", (*params, memory_id))


def test_a_recall_raises_salience_and_a_late_one_slows_the_fading(memory, dsn, tenant):
    me = memory.for_user(tenant.user)
    item = me.add("Keeps a sourdough starter named Clint in the fridge")
    assert stored(dsn, item.id)["salience"] == pytest.approx(1.0)
    set_row(dsn, item.id, "salience = 0.2, stability = 7, salience_at = now() - interval '10 days'")
    assert item.id in {r.item.id for r in me.search("sourdough starter", k=3)}
    faded = 0.2 * 0.5 ** (10 / 7)
    after = stored(dsn, item.id)
    assert after["salience"] == pytest.approx(faded + 0.5 * (1 - faded), rel=1e-3)
    assert after["stability"] == pytest.approx(14, rel=1e-3)  # recalled after more than a half-life: doubled
    assert datetime.now(UTC) - after["salience_at"] < timedelta(minutes=1)
    # recalled again at once: nearly full, and the half-life hardly grows
    me.search("sourdough starter", k=3)
    again = stored(dsn, item.id)
    assert again["salience"] > after["salience"] and again["stability"] == pytest.approx(14, rel=1e-3)
    # what is not returned is not recalled
    me.search("tax return deadline", k=1, min_relevance=0.99)
    assert stored(dsn, item.id)["salience_at"] == again["salience_at"]


def test_maintain_archives_what_faded_or_was_ephemeral_and_keeps_the_rest(fresh_dsn, embeddings):
    dsn = fresh_dsn()
    config = MemoryConfig.defaults().replace(archive_below=0.3, archive_idle_days=30, ephemeral_days=1)
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        me = memory.for_user("maintained-user")
        faded = me.add("Used to play squash on Tuesdays")
        sturdy = me.add("Is allergic to penicillin")
        kept = me.add("Was born in Porto", retention="keep")
        fleeting = me.add("Is waiting for a parcel today", retention="ephemeral")
        recent = me.add("Is reading a book about bridges", retention="ephemeral")
        expired = me.add("The lift is out of order", ttl=3600)
        set_row(dsn, sturdy.id, "stability = 3650")  # recalled at growing intervals for years: fades slowly
        set_row(dsn, recent.id, "last_used_at = now() + interval '59 days 12 hours'")  # used half a day before
        set_row(dsn, expired.id, "expires_at = now() - interval '1 second'")

        assert memory.maintain() == MaintenanceReport(expired=1)  # today only the expired one is due
        assert memory.maintain() == MaintenanceReport()
        for item in (faded, sturdy, kept, fleeting, recent):
            assert stored(dsn, item.id)["status"] == "active"

        report = memory.maintain(at=datetime.now(UTC) + timedelta(days=60))
        assert (report.faded, report.ephemeral) == (1, 1)
        assert stored(dsn, faded.id)["status"] == "archived"  # 1 * 0.5 ** (60 / 7) < 0.3, unused 60 days
        assert stored(dsn, fleeting.id)["status"] == "archived"
        for item in (sturdy, kept, recent):
            assert stored(dsn, item.id)["status"] == "active"
        assert {i.content for i in me.list()} == {sturdy.content, kept.content, recent.content}
        assert me.restore(faded.id).status.value == "active"  # archived, not lost


def test_maintain_archives_nothing_by_salience_unless_asked(fresh_dsn, embeddings):
    dsn = fresh_dsn()
    with MemoryService(dsn, config=MemoryConfig.defaults(), embeddings=embeddings) as memory:
        item = memory.for_user("patient-user").add("Used to live in Leeds")
        report = memory.maintain(at=datetime.now(UTC) + timedelta(days=3650))
        assert report.faded == 0 and stored(dsn, item.id)["status"] == "active"


def test_overlapping_maintenance_runs_archive_each_memory_once(fresh_dsn, embeddings):
    from concurrent.futures import ThreadPoolExecutor

    dsn = fresh_dsn()
    config = MemoryConfig.defaults().replace(ephemeral_days=1)
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        me = memory.for_user("busy-user")
        me.add_many([{"content": f"Reminder number {i}: water the plants", "retention": "ephemeral"}
                     for i in range(40)])
        later = datetime.now(UTC) + timedelta(days=2)
        with ThreadPoolExecutor(max_workers=3) as pool:
            reports = list(pool.map(lambda _: memory.maintain(at=later), range(3)))
        assert sum(r.ephemeral for r in reports) == 40
        assert me.list() == []


def test_retention_is_checked(memory, tenant):
    with pytest.raises(InvalidInputError) as info:
        memory.for_user(tenant.user).add("Prefers tea to coffee", retention="forever")
    assert info.value.field == "retention"


def test_a_salience_weight_prefers_what_is_recalled_and_the_search_stays_exact(dsn, embeddings, tenant):
    """With ``weight_salience`` the indexed search still equals the exhaustive scan (its band is
    widened by the weight), and of two equally good memories the one recalled lately ranks first."""
    config = MemoryConfig.defaults().replace(weight_salience=0.3)
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        me = memory.for_user(tenant.user, project_id=tenant.project)
        faded = me.add("The standup meeting is at nine in room Lisbon", dedupe=False)
        fresh = me.add("The standup meeting is at nine in room Porto", dedupe=False)
        fillers = [me.add(f"Note {i}: the {w} needs a look before the {v}", scope="project" if i % 2 else "user",
                          dedupe=False)
                   for i, (w, v) in enumerate((w, v) for w in ("budget", "parser", "release", "garden", "standup")
                                              for v in ("review", "launch", "audit"))]
        saliences = {faded.id: 0.05, fresh.id: 1.0, **{f.id: 0.2 + 0.05 * i for i, f in enumerate(fillers)}}

        def freeze() -> None:
            """Put every salience back (a search is a recall) and stop the clock for them:
            a ``salience_at`` in the future means no fading yet."""
            with psycopg.connect(dsn, autocommit=True) as conn:
                for memory_id, value in saliences.items():
                    conn.execute("UPDATE memory_items SET salience = %s, salience_at = now() + interval '1 day'"
                                 " WHERE id = %s", (value, memory_id))

        freeze()
        hits = me.search("when is the standup meeting", k=2)
        assert hits[0].item.id == fresh.id
        freeze()
        faded_score = next(h.score for h in me.search("standup meeting room", k=40) if h.item.id == faded.id)
        freeze()
        assert me.search("standup meeting room", k=1)[0].score - faded_score > 0.25  # 0.3 * (1 - 0.05), less wording
        for query in ("standup meeting room", "budget release", "garden audit", "parser"):
            for k in (1, 3, 10):
                freeze()
                got = [(r.item.id, round(r.score, 9)) for r in me.search(query, k=k)]
                freeze()
                with exhaustive():
                    want = [(r.item.id, round(r.score, 9)) for r in me.search(query, k=k)]
                assert got == want, (query, k)
