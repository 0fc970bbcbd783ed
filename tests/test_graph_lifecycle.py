"""The lifecycle memories and the knowledge graph share (issue 32): spaced recall promotes
candidate -> active -> core, core is never faded, retention keep / ephemeral / decay with the
design's precedence; ``maintain()`` archives faded and ephemeral nodes and describes changed
nodes again; storylines (5+ memories over 3+ days) and macros (2+ storylines over 30+ days),
returned by ``explore`` in the design's shape and private to their owner; and the issue's
done-check: three sessions about a sister, a friend and a job offer.

Tests that move time forward in ``maintain(at=...)`` use a database of their own: maintenance
runs over every graph."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from agent_memory import MemoryConfig, MemoryService
from agent_memory.lifecycle import CORE_RECALLS, faded_salience, retention_precedence, state_for
from agent_memory.scripted import ScriptedChatModel

NOW = datetime.now(UTC)


def _user() -> str:
    return f"lc-{uuid.uuid4().hex[:10]}"


def _days_ago(n: float) -> datetime:
    return NOW - timedelta(days=n)


@pytest.fixture
def service(fresh_dsn, embeddings):
    """A service on a database of its own, with forgetting by salience on (as an operator would)."""
    dsn = fresh_dsn()
    config = MemoryConfig.defaults(knowledge_graph=True, archive_below=0.3, archive_idle_days=30)
    with MemoryService(dsn, config=config, embeddings=embeddings) as memory:
        yield memory, dsn


def _sql(dsn: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def _node(dsn: str, user: str, name: str) -> dict[str, Any]:
    cols = ("id", "state", "retention", "recall_count", "access_count", "decay_gradient", "description", "is_dirty")
    rows = _sql(dsn, f"SELECT {', '.join(cols)} FROM graph_nodes WHERE scope = 'user' AND scope_id = %s"
                     " AND name = %s", user, name)
    assert len(rows) == 1, (name, rows)
    return dict(zip(cols, rows[0], strict=True))


# --- the rules, pure --------------------------------------------------------------------------


def test_the_lifecycle_rules():
    assert state_for(0, 0) == "candidate"
    assert state_for(1, 0) == "active" and state_for(25, 1) == "active"  # many recalls, one sitting
    assert state_for(12, CORE_RECALLS) == "core"
    assert retention_precedence(["decay", "ephemeral"]) == "ephemeral"
    assert retention_precedence(["ephemeral", "keep", "decay"]) == "keep"
    assert retention_precedence([]) == "decay"
    with pytest.raises(ValueError):
        retention_precedence(["forever"])
    assert faded_salience(0.1, 3650, state="core") == 0.1  # core never fades
    assert faded_salience(0.1, 30) == pytest.approx(0.05)  # one half-life
    assert faded_salience(0.1, 30, decay_gradient=2) == pytest.approx(0.1 * 0.5 ** 0.5)  # spaced: slower
    # a doubtful candidate fades before a confident one
    assert faded_salience(0.1, 30, state="candidate", confidence=0.4) < faded_salience(0.1, 30, state="candidate",
                                                                                       confidence=0.9)


# --- memories ---------------------------------------------------------------------------------


def test_a_memory_recalled_ten_times_over_days_is_core_and_never_faded(service):
    memory, dsn = service
    me = memory.for_user(_user())
    never = me.add("Has a grey umbrella with a wooden handle")
    rapid = me.add("Keeps the spare house key under the blue flowerpot")
    spaced = me.add("Takes the 7:42 train to Utrecht on weekdays")
    for _ in range(CORE_RECALLS):
        assert me.search("spare house key under the blue flowerpot", k=1)[0].item.id == rapid.id
        assert me.search("7:42 train to Utrecht", k=1)[0].item.id == spaced.id
        # a day passes between two recalls of the spaced one (and of it only)
        _sql(dsn, "UPDATE memory_items SET last_used_at = last_used_at - interval '1 day' WHERE id = %s", spaced.id)
    counts = dict(_sql(dsn, "SELECT id, recall_count FROM memory_items WHERE id = ANY(%s)",
                       [never.id, rapid.id, spaced.id]))
    assert (counts[never.id], counts[rapid.id], counts[spaced.id]) == (0, 1, CORE_RECALLS)
    states = {r.memory_id: r.state for r in (*me.stats().most_recalled, *me.stats().least_recalled)}
    assert (states[never.id], states[rapid.id], states[spaced.id]) == ("candidate", "active", "core")
    report = memory.maintain(at=NOW + timedelta(days=200))
    status = dict(_sql(dsn, "SELECT id, status FROM memory_items WHERE id = ANY(%s)",
                       [never.id, rapid.id, spaced.id]))
    # ten recalls in one sitting protect no more than none; ten over days make it core
    assert status[never.id] == "archived" and status[rapid.id] == "archived"
    assert status[spaced.id] == "active" and report.faded == 2


def test_an_ephemeral_memory_goes_even_when_recalled_often(service):
    memory, dsn = service
    me = memory.for_user(_user())
    item = me.add("Is waiting for a parcel from the bakery", retention="ephemeral")
    _sql(dsn, "UPDATE memory_items SET recall_count = %s WHERE id = %s", CORE_RECALLS, item.id)
    memory.maintain(at=NOW + timedelta(days=60))
    assert _sql(dsn, "SELECT status FROM memory_items WHERE id = %s", item.id) == [("archived",)]


# --- nodes ------------------------------------------------------------------------------------


def test_spaced_recalls_promote_a_node_to_core_and_slow_its_fading(service):
    memory, dsn = service
    user = _user()
    me = memory.for_user(user)
    me.add("My sister Sarah lives in Boston.")
    me.add("Had lunch with my friend Tom.")
    assert _node(dsn, user, "Sarah")["state"] == "candidate"
    for _ in range(CORE_RECALLS + 2):
        me.explore(text_matches=["Tom"])  # one sitting
    tom = _node(dsn, user, "Tom")
    assert tom["state"] == "active" and tom["recall_count"] == 1 and tom["access_count"] == CORE_RECALLS + 2
    for i in range(CORE_RECALLS):
        me.explore(text_matches=["Sarah"])
        assert _node(dsn, user, "Sarah")["state"] == ("core" if i + 1 >= CORE_RECALLS else "active")
        # two hours pass before the next recall
        _sql(dsn, "UPDATE graph_nodes SET last_accessed_at = last_accessed_at - interval '2 hours'"
                  " WHERE scope = 'user' AND scope_id = %s AND name = 'Sarah'", user)
    before = _node(dsn, user, "Tom")["decay_gradient"]
    _sql(dsn, "UPDATE graph_nodes SET last_accessed_at = last_accessed_at - interval '60 days'"
              " WHERE scope = 'user' AND scope_id = %s AND name = 'Tom'", user)
    me.explore(text_matches=["Tom"])  # recalled after two months: forgets slower from now on
    assert _node(dsn, user, "Tom")["decay_gradient"] == pytest.approx(before * 2, rel=1e-3)


def test_maintain_archives_faded_and_ephemeral_nodes_by_retention(service):
    memory, dsn = service
    user = _user()
    me = memory.for_user(user)
    me.add("Met Zoltan at the climbing gym.")  # a candidate, never recalled
    me.add("Read the book Yolanda recommended about bridges.")  # recalled once below
    me.add("Had lunch with Quentin, my godfather.", retention="keep")  # kept
    me.add("Got a postcard from Quentin in Crete.")  # ... and named by a decay memory: keep wins
    me.add("My cousin Ursula is staying in the guest room this week.", retention="ephemeral")
    me.add("Worked with Vikram for years.")  # made core below
    me.explore(text_matches=["Yolanda"])
    me.explore(text_matches=["Ursula"])  # recalled, still ephemeral: a hard expiry
    _sql(dsn, "UPDATE graph_nodes SET state = 'core', recall_count = %s WHERE scope = 'user' AND scope_id = %s"
              " AND name = 'Vikram'", CORE_RECALLS, user)
    assert _node(dsn, user, "Quentin")["retention"] == "keep"
    assert _node(dsn, user, "Ursula")["retention"] == "ephemeral"

    memory.maintain(at=NOW + timedelta(days=20))
    assert {n: _node(dsn, user, n)["state"] for n in ("Zoltan", "Ursula")} == {"Zoltan": "candidate",
                                                                             "Ursula": "active"}
    report = memory.maintain(at=NOW + timedelta(days=100))
    states = {n: _node(dsn, user, n)["state"] for n in ("Zoltan", "Yolanda", "Quentin", "Ursula", "Vikram")}
    assert states == {"Zoltan": "archived", "Yolanda": "active", "Quentin": "candidate", "Ursula": "archived",
                      "Vikram": "core"}
    assert report.nodes_faded >= 1 and report.nodes_ephemeral >= 1
    memory.maintain(at=NOW + timedelta(days=3650))
    states = {n: _node(dsn, user, n)["state"] for n in ("Yolanda", "Quentin", "Vikram")}
    assert states == {"Yolanda": "archived", "Quentin": "candidate", "Vikram": "core"}
    assert "Zoltan" not in {p.node.name for p in me.explore(text_matches=["Zoltan"]).people}
    me.add("Zoltan invited me to climb on Sunday.")  # named again: back, as a candidate
    assert _node(dsn, user, "Zoltan")["state"] == "candidate"


def test_maintain_describes_changed_nodes_again_offline_and_with_a_model(service):
    memory, dsn = service
    user = _user()
    me = memory.for_user(user)
    me.add("Had coffee with Priya near the station.")
    me.add("The weather was grey all day. Priya starts a new job at Siemens in May.")
    assert _node(dsn, user, "Priya")["is_dirty"]
    report = memory.maintain(llm=None)
    priya = _node(dsn, user, "Priya")
    assert not priya["is_dirty"] and report.descriptions >= 1
    # extractive: the newest sentences that name her, nothing else
    assert priya["description"] == "Priya starts a new job at Siemens in May. Had coffee with Priya near the station."
    model = ScriptedChatModel(structured={"Summary": [{"text": "A friend of the user; starts at Siemens in May."}]})
    me.add("Priya moved to Munich for the Siemens job.")
    memory.maintain(llm=model)
    assert _node(dsn, user, "Priya")["description"] == "A friend of the user; starts at Siemens in May."
    asked = [m for name, messages in model.structured_requests if name == "Summary" for m in messages]
    assert any("<item>Priya moved to Munich for the Siemens job.</item>" in str(m.content) for m in asked)


# --- storylines and macros --------------------------------------------------------------------


def _dated(me: Any, texts_by_day: dict[float, list[str]]) -> None:
    for days, texts in texts_by_day.items():
        for text in texts:
            me.add(text, valid_from=_days_ago(days), dedupe=False)


def test_a_storyline_needs_five_memories_over_three_days_and_stays_current(memory, dsn):
    # each user's storyline is built from their own graph only, so the shared database is fine here
    full, two_days, four = _user(), _user(), _user()
    _dated(memory.for_user(full), {9: ["Had a call with Priya about the flat in Leiden.", "Priya sent the lease."],
                                   5: ["Signed the lease Priya found."],
                                   1: ["Priya handed over the keys.", "Painted the kitchen with Priya."]})
    _dated(memory.for_user(two_days), {9: ["Had a call with Priya about the flat.", "Priya sent the lease.",
                                           "Priya found a mover."],
                                       1: ["Priya handed over the keys.", "Painted the kitchen with Priya."]})
    _dated(memory.for_user(four), {9: ["Had a call with Priya about the flat."], 6: ["Priya sent the lease."],
                                   3: ["Priya found a mover."], 1: ["Priya handed over the keys."]})
    report = memory.maintain(llm=None)
    assert report.storylines >= 1
    explored = memory.for_user(full).explore(["the flat in Leiden"], text_matches=["Priya"], granularity=2)
    [story] = explored.storylines
    assert (story.level, story.name, story.anchor_name, story.source_count, story.full) == \
        ("storyline", "Priya", "Priya", 5, True)
    # extractive, in order: how it began and where it stands
    assert story.description.startswith("Had a call with Priya about the flat in Leiden.")
    assert story.description.endswith("Painted the kitchen with Priya.")
    assert {c for _, c, _ in story.previews} <= {"Priya handed over the keys.", "Painted the kitchen with Priya.",
                                                 "Signed the lease Priya found.", "Priya sent the lease.",
                                                 "Had a call with Priya about the flat in Leiden."}
    shape = explored.to_dict()["episodic"]["storylines"][0]
    assert shape["storyline_id"] == str(story.id) and shape["anchor"]["name"] == "Priya"
    assert len(shape["preview_sources"]) == 3
    for other in (two_days, four):  # too few days, too few memories
        assert memory.for_user(other).explore(text_matches=["Priya"], granularity=2).storylines == ()
    # at granularity 1 it is named only, beside the memories
    minimal = memory.for_user(full).explore(text_matches=["Priya"]).to_dict()["episodic"]["storylines"]
    assert minimal == [{"storyline_id": str(story.id), "name": "Priya"}]
    # kept current: a new memory joins it and it is summarised again
    _dated(memory.for_user(full), {0: ["Priya threw a housewarming party."]})
    memory.maintain(llm=None)
    [again] = memory.for_user(full).explore(text_matches=["Priya"], granularity=2).storylines
    assert again.id == story.id and again.source_count == 6
    assert again.description.endswith("Priya threw a housewarming party.")


def test_storylines_over_thirty_days_that_belong_to_one_node_make_a_macro(memory):
    user = _user()
    me = memory.for_user(user)
    # Sarah's storyline: five memories over three days, three of them about Google
    _dated(me, {45: ["My sister Sarah thinks Google would suit me.", "Sarah visited on Saturday."],
                44: ["Sarah asked about the Google interview.", "Sarah baked bread."],
                43: ["Sarah helped me prepare questions for Google."]})
    # Google's own: those three and five more, a month later
    _dated(me, {15: ["Google scheduled the final interview.", "Google sent the offer letter."],
                12: ["Google raised the offer."], 10: ["Accepted the offer from Google."],
                9: ["Google shipped my laptop."]})
    memory.maintain(llm=None)
    explored = me.explore(["the Google job"], text_matches=["Google"], granularity=3)
    [macro] = explored.macros
    assert (macro.level, macro.name, macro.storyline_count, macro.full) == ("macro", "Google", 2, True)
    assert {c.name for c in macro.children} == {"Sarah", "Google"}
    assert macro.description.startswith("Google, over time: ")
    shape = explored.to_dict()["episodic"]["macros"][0]
    assert shape["macro_id"] == str(macro.id) and {s["name"] for s in shape["storylines"]} == {"Sarah", "Google"}
    assert explored.memories == ()  # granularity 3: no memories
    # Sarah's storyline is not Google's macro's only member, and no macro is rooted in Sarah
    assert [m.name for m in me.explore(text_matches=["Sarah"], granularity=3).macros] in ([], ["Google"])


def test_storylines_and_macros_are_private_and_go_with_their_owner(memory, dsn):
    alice, bob = _user(), _user()
    _dated(memory.for_user(alice), {9: ["Had a call with Priya about the flat.", "Priya sent the lease."],
                                    5: ["Signed the lease Priya found."],
                                    1: ["Priya handed over the keys.", "Painted the kitchen with Priya."]})
    memory.for_user(bob).add("Priya is my neighbour.")
    memory.maintain(llm=None)
    assert len(memory.for_user(alice).explore(text_matches=["Priya"], granularity=2).storylines) == 1
    for gran in (1, 2, 3):  # bob's explore reads bob's graph only
        seen = memory.for_user(bob).explore(["the flat"], text_matches=["Priya"], granularity=gran)
        assert seen.storylines == () and seen.macros == ()
    memory.forget_user(user_id=alice)
    left = _sql(dsn, "SELECT count(*) FROM graph_storylines WHERE scope_id = %s", alice)
    members = _sql(dsn, "SELECT count(*) FROM graph_storyline_members WHERE scope_id = %s", alice)
    assert left == [(0,)] and members == [(0,)]


# --- the done-check -------------------------------------------------------------------

#: three sessions, days apart, about a sister, a friend and a job offer
SESSIONS = {
    20: ("My sister Sarah is visiting next month.", "Sarah is worried about my job offer from Google.",
         "I work at Acme as a data engineer."),
    10: ("Had dinner with my friend Tom; Tom thinks I should take the Google offer.",
         "Sarah and I talked about moving to Lisbon.", "Google wants an answer by Friday."),
    1: ("Got a job offer from Google for a staff role, deadline Friday.", "Tom said the Google team seems kind.",
        "Sarah is happy I might join Google."),
}


def test_three_sessions_about_a_sister_a_friend_and_a_job_offer_come_back_from_explore(memory):
    user = _user()
    for days, turns in SESSIONS.items():
        session = memory.for_user(user, session_id=f"s{days}-{user}")
        for text in turns:
            session.add(text, valid_from=_days_ago(days), dedupe=False)
    me = memory.for_user(user)
    result = me.explore(["the Google job offer"], text_matches=["Sarah", "Tom"])
    assert {"Sarah", "Tom"} <= {h.node.name for h in result.people}
    assert "Google" in {h.node.name for h in result.entities}
    relations = {(r.from_name, r.rel_type, r.to_name) for r in result.relationships}
    assert {(user, "sister", "Sarah"), (user, "friend", "Tom")} <= relations
    assert any("Google" in h.memory.content for h in result.memories)
    assert result.storylines == ()  # no storyline before maintenance has run
    memory.maintain(llm=None)  # the nightly consolidation: the days of the three sessions count
    later = me.explore(["the Google job offer"], text_matches=["Sarah", "Tom"], granularity=2)
    story = {s.name: s for s in later.storylines}["Google"]
    assert story.source_count == 6 and "Google" in story.description
    assert story.started_at.date() == _days_ago(20).date() and story.last_source_at.date() == _days_ago(1).date()
    shape = later.to_dict()
    assert {p["name"] for p in shape["semantic"]["people"]} >= {"Sarah", "Tom"}
    assert shape["episodic"]["storylines"][0]["anchor"]["name"] in {"Google", "Sarah", "Tom"}


def test_a_storyline_shows_only_the_memories_its_owner_may_still_read(memory):
    """A storyline of one's own graph can hold project memories; previews are read through the
    same rule as search, so after leaving the project they are no longer shown."""
    owner, alice = _user(), _user()
    project = f"p-{uuid.uuid4().hex[:8]}"
    memory.create_project(project, user_id=owner)
    memory.add_member("project", project, alice, "editor", user_id=owner)
    in_project = memory.for_user(alice, project_id=project)
    for days, text in ((9, "Had a call with Priya about the release."), (9, "Priya cut the release branch."),
                       (5, "Priya fixed the migration bug.")):
        in_project.add(text, scope="project", valid_from=_days_ago(days), dedupe=False)
    _dated(memory.for_user(alice), {1: ["Priya handed over the keys.", "Painted the kitchen with Priya."]})
    memory.maintain(llm=None)
    [story] = memory.for_user(alice, project_id=project).explore(text_matches=["Priya"], granularity=2).storylines
    assert story.source_count == 5 and "Priya fixed the migration bug." in {c for _, c, _ in story.previews}
    memory.remove_member("project", project, alice, user_id=owner)
    [after] = memory.for_user(alice, project_id=project).explore(text_matches=["Priya"], granularity=2).storylines
    assert {c for _, c, _ in after.previews} == {"Priya handed over the keys.", "Painted the kitchen with Priya."}


# --- the walk's bounds --------------------------------------------------------------------------


def test_a_walk_from_a_hub_reads_a_bounded_neighbourhood(memory):
    """traverse: a node in many memories (an organisation with 40 people) brings at most its 15
    most co-mentioned nodes per hop, so its cost does not grow with its mentions; the walk still
    ranks what it reached and the result is in the caller's graph."""
    from agent_memory.graph import ops as graph_ops

    user = _user()
    me = memory.for_user(user)
    first = "Ana Ben Cleo Dara Eli Farah Gus Hana Ivo Jada".split()
    last = "Abbott Baker Cruz Diaz".split()
    people = [f"{f} {l}" for l in last for f in first]
    me.add_many([f"Had lunch with {p} from Google." for p in people])
    walk = me.traverse(seed_nodes=["Google"], top_k=200)
    reached = [h.node.name for h in walk.nodes]
    assert reached[0] == "Google" and len(reached) == 1 + graph_ops._WALK_PER_NODE
    assert set(reached[1:]) <= set(people)


def test_person_cues_are_checked_as_the_documented_pattern_says():
    """The rules check a name's cues ("with Tom", "Tom said", "Tom's birthday") without compiling
    a pattern per name (that cost a save ~2 ms for every new name); on generated texts the answer
    is the documented pattern's (``_PERSON_CUES`` with the name in it)."""
    import importlib
    import random
    import re

    extract = importlib.import_module("agent_memory.graph.extract")
    words = ["Ana", "Ana Abbott", "Tom", "Sarah", "Google", "Bruno Costa"]
    before = "with and told asked met called texted visited helped thanked hugged invited like".split()
    after = [" said", " says", " thinks", " is coming", " and I", " and me", "'s birthday", "\u2019s wedding",
             "'s kids", ".", " went", "  said"]
    rng = random.Random(32)
    for _ in range(3000):
        word = rng.choice(words)
        text = (rng.choice(["", "Yesterday ", "x"]) + rng.choice(["", rng.choice(before) + " "])
                + rng.choice([word, word + "x", "x" + word, word + "_1"]) + rng.choice(["", *after])
                + rng.choice(["", " and " + word + " said", " with " + word]))
        expected = re.search(extract._PERSON_CUES.pattern.format(n=re.escape(word)), text) is not None
        assert extract._cued(word, text) == expected, (word, text)
