"""Documents that teach: cut into passages, searchable by passage, learned from into memories
that point back at their passage; re-added by ``external_id``; kept to who may read them."""

from __future__ import annotations

import itertools

import psycopg
import pytest

from agent_memory import DocumentReport, MemoryService, PassageHit, Source, Status
from agent_memory.documents import chunk_document
from agent_memory.documents.learn import prose
from agent_memory.errors import InvalidInputError, PermissionDeniedError
from agent_memory.testing import ScriptedChatModel

#: a fake key, built by concatenation so secret scanners don't flag this file
SECRET = "sk-" + "Q7xR2mK9vL4pZ8nB3wT6yH1cF5gJ0dS" + "abcd"

GUIDE = """# Payments service

The payments service settles card transactions every night.

## Storage

We use PostgreSQL 16 for the ledger. Every table has a created_at column.

## Deploys

We decided to deploy on Tuesdays because traffic is lowest then.

```bash
make deploy ENV=prod
```

## Testing

We always run the contract tests before a release.
"""


def contents(items) -> list[str]:
    return sorted(i.content for i in items)


def document_memories(memory: MemoryService, resource_id, *, status=Status.ACTIVE, **ids):
    return [m for m in memory.for_user(**ids).list(status=status, limit=500) if m.source_id == str(resource_id)]


# --- the chunker (pure) -----------------------------------------------------------------------


def test_passages_carry_their_place_and_section():
    passages = chunk_document(GUIDE)
    assert [p.index for p in passages] == list(range(len(passages)))
    assert all(GUIDE[p.start:p.end] == p.text for p in passages)
    by_heading = {p.headings: p.text for p in passages}
    assert by_heading[("Payments service", "Storage")].startswith("## Storage")
    assert "PostgreSQL 16" in by_heading[("Payments service", "Storage")]
    deploys = by_heading[("Payments service", "Deploys")]
    assert "```bash\nmake deploy ENV=prod\n```" in deploys  # the code block stays whole, in its section
    assert passages[0].headings == ("Payments service",)


def test_plain_text_and_a_long_document_are_cut_within_bounds():
    assert [p.text for p in chunk_document("One short note.")] == ["One short note."]
    paragraph = "The ledger keeps every settlement for seven years. " * 20
    text = "\n\n".join(f"Section {i}. {paragraph}" for i in range(400))  # ~ 420 KB
    assert len(text) > 200_000
    passages = chunk_document(text, max_chars=1000, overlap=100)
    assert all(text[p.start:p.end] == p.text for p in passages)
    assert max(len(p.text) for p in passages) <= 1100  # the bound, plus the overlap
    assert passages[-1].end == len(text.rstrip())
    # consecutive passages overlap a little, and nothing of the text is skipped
    assert all(b.start <= a.end for a, b in itertools.pairwise(passages))
    assert any(b.start < a.end for a, b in itertools.pairwise(passages))


def test_a_huge_code_block_is_cut_at_line_ends_and_hashes_follow_text_and_headings():
    code = "```python\n" + "".join(f"x{i} = {i}\n" for i in range(600)) + "```\n"
    text = "# Code\n\n" + code
    passages = chunk_document(text, max_chars=500, overlap=0)
    assert len(passages) > 5 and all(p.headings == ("Code",) for p in passages)
    assert passages[0].text.startswith("# Code\n\n```python\nx0 = 0\n")  # the heading goes with what follows
    assert all(text[p.end] == "\n" for p in passages)  # cut at line ends
    assert all(len(p.text) <= 500 for p in passages[1:])
    a, b = chunk_document("# A\n\nSame words."), chunk_document("# B\n\nSame words.")
    assert a[0].text != b[0].text and chunk_document("# A\n\nSame words.")[0].hash == a[0].hash


def heading_file(n: int = 10_000) -> str:
    """A markdown file of ``n`` one-line sections (about 104 KB at 10,000), one of which says
    something worth finding."""
    sections = [f"# {i}\nx{i % 100:02d}\n" for i in range(n)]
    sections[n // 2] = "# Streams\nKafka settles events.\n"
    return "".join(sections)


def test_tiny_sections_share_passages_and_nothing_is_lost():
    """10,000 headings each with a line under them were 10,000 passages (each embedded, stored and
    read: minutes); consecutive tiny sections now share passages up to the size bound."""
    text = heading_file()
    assert 100_000 < len(text) < 110_000 and text.count("\n# ") == 9_999
    passages = chunk_document(text)
    assert len(passages) < 100
    assert all(text[p.start:p.end] == p.text and len(p.text) <= 1500 for p in passages)
    assert all(a.end < b.start for a, b in itertools.pairwise(passages))  # whole sections: no overlap needed
    covered = "".join(p.text for p in passages)
    assert covered.replace("\n", "") == text.replace("\n", "")  # every section, once, in order
    assert all(p.headings == () for p in passages)  # the headings they share: none, at the top level
    assert [p.text for p in passages if "Kafka" in p.text][0].count("# ") > 10
    # under a common heading the shared passages keep it; a section's own passage keeps its path
    glossary = "# Glossary\n\n" + "".join(f"## Term {i}\n\nShort {i}.\n\n" for i in range(300))
    assert {p.headings for p in chunk_document(glossary)} == {("Glossary",)}
    # sections with something to say stay passages of their own, whatever their neighbours
    assert [p.headings for p in chunk_document(GUIDE)] == [
        ("Payments service",), ("Payments service", "Storage"), ("Payments service", "Deploys"),
        ("Payments service", "Testing")]
    body = "We deploy on Tuesdays because traffic is lowest then, and never on Fridays. " * 3
    mixed = f"# Ops\n\n## Deploys\n\n{body}\n\n## Stack\n\nWe use Redis.\n\n## Reviews\n\n{body}"
    assert [(p.headings, p.text.split("\n")[0]) for p in chunk_document(mixed)] == [
        (("Ops", "Deploys"), "# Ops"),          # a heading with nothing under it goes with what follows
        (("Ops", "Stack"), "## Stack"),         # a tiny section between large ones is its own passage
        (("Ops", "Reviews"), "## Reviews")]
    assert len(chunk_document(text, min_section_chars=0)) == 10_000  # 0: every section on its own, as before
    with pytest.raises(ValueError, match="min_section_chars"):
        chunk_document(text, min_section_chars=2000)


def test_bad_chunk_sizes_are_refused():
    with pytest.raises(ValueError, match="max_chars"):
        chunk_document("text", max_chars=10)
    with pytest.raises(ValueError, match="overlap"):
        chunk_document("text", max_chars=200, overlap=150)


def test_the_rules_read_prose_without_markdown():
    text = prose("## Notes\n\n- We use **Redis** for caching.\n> We always review code.\n```\nwe use nothing\n```")
    assert "##" not in text and "**" not in text and "nothing" not in text
    assert "We use Redis for caching." in text and "We always review code." in text


def test_search_documents_is_an_op_that_embeds_then_reads_through_the_resource_filter():
    from agent_memory import MemoryConfig
    from agent_memory.db.requests import Embed, Sql
    from agent_memory.documents import search_documents
    from agent_memory.models import Identity

    op = search_documents(MemoryConfig.defaults(), Identity("ann", project_id="p1"), "  ledger  ", k=2)
    embed = next(op)
    assert isinstance(embed, Embed) and embed.texts == ("ledger",) and embed.query
    read = op.send([[0.0] * 8])
    assert isinstance(read, Sql)
    assert read.params["rv_user"] == "ann" and read.params["rv_project"] == "p1" and read.params["q_k"] == 2
    with pytest.raises(StopIteration) as done:
        op.send([])
    assert done.value.value == []


# --- memories out, by the rules ---------------------------------------------------------------


def test_a_project_document_teaches_the_project_by_rules(memory: MemoryService, tenant):
    me = memory.for_user(tenant.user, project_id=tenant.project)
    report = me.add_document(GUIDE, title="Payments guide", external_id="docs/payments.md", scope="project",
                             llm=None)
    assert isinstance(report, DocumentReport) and report.status == "done" and report.extractor == "rules"
    assert report.passages_added == len(chunk_document(GUIDE)) and report.passages_kept == 0
    assert report.resource.content == GUIDE and report.resource.external_id == "docs/payments.md"
    learned = {o.memory.content: o.memory for o in report.added}
    assert set(learned) == {"The team uses PostgreSQL 16 for the ledger.",
                            "The team decided to deploy on Tuesdays because traffic is lowest then.",
                            "The team always runs the contract tests before a release."}, learned
    storage = learned["The team uses PostgreSQL 16 for the ledger."]
    assert storage.source is Source.KNOWLEDGE_BASE and storage.source_id == str(report.resource.id)
    assert storage.scope.value == "project" and storage.scope_id == tenant.project
    place = storage.metadata["passage"]
    assert place["headings"] == ["Payments service", "Storage"]
    assert "PostgreSQL 16" in GUIDE[place["start"]:place["end"]]
    assert me.source(storage.id).id == report.resource.id
    # the other member of the project learns it too; the report says so in a line
    other = memory.for_user(tenant.other_user, project_id=tenant.project)
    assert "The team uses PostgreSQL 16 for the ledger." in [r.content for r in other.search("ledger database")]
    assert report.summary() == (f"document 'Payments guide': passages added {report.passages_added}; "
                                "memories added 3")
    assert report.to_dict()["resource"]["id"] == str(report.resource.id)


def test_adding_the_same_external_id_keeps_reads_and_supersedes(memory: MemoryService, tenant):
    me = memory.for_user(tenant.user, project_id=tenant.project)
    first = me.add_document(GUIDE, external_id="docs/guide.md", scope="project", llm=None)
    again = me.add_document(GUIDE, external_id="docs/guide.md", scope="project", llm=None)
    assert again.resource.id == first.resource.id
    assert (again.passages_added, again.passages_kept, again.passages_removed) == (0, first.passages_added, 0)
    assert again.passages_read == 0 and again.outcomes == () and again.retired == ()
    before = {m.content: m.id for m in document_memories(memory, first.resource.id, **tenant.ids())}

    # the Testing section goes, the Storage section changes, a new section comes, and text is
    # added before them all (every kept passage moves)
    edited = ("Read this first.\n\n" + GUIDE.replace("## Testing\n\nWe always run the contract tests before a "
                                                     "release.\n", "")
              .replace("PostgreSQL 16", "PostgreSQL 17") + "\n## On call\n\nWe use PagerDuty for alerts.\n")
    third = me.add_document(edited, external_id="docs/guide.md", scope="project", llm=None)
    assert third.passages_removed == 2 and third.passages_added == 3 and third.passages_kept == 2, third
    now = {m.content: m for m in document_memories(memory, first.resource.id, **tenant.ids())}
    assert "The team uses PagerDuty for alerts." in now
    assert "The team always runs the contract tests before a release." not in now
    # the deploy decision was kept, with the same id, and points at its passage's new place
    deploy = now["The team decided to deploy on Tuesdays because traffic is lowest then."]
    assert deploy.id == before[deploy.content]
    place = deploy.metadata["passage"]
    assert edited[place["start"]:place["end"]].startswith("## Deploys")
    # what vanished is superseded, with why and when
    gone = me.get(before["The team always runs the contract tests before a release."])
    assert gone.status is Status.SUPERSEDED and gone.metadata["retired"]["reason"]
    assert gone.id in third.retired
    # what a passage now says in other words is revised in place, its old wording in its history
    storage = me.get(before["The team uses PostgreSQL 16 for the ledger."])
    assert storage.status is Status.ACTIVE and storage.content == "The team uses PostgreSQL 17 for the ledger."
    assert [v.content for v in me.history(storage.id)] == ["The team uses PostgreSQL 16 for the ledger.",
                                                           "The team uses PostgreSQL 17 for the ledger."]
    assert "PostgreSQL 17" in edited[storage.metadata["passage"]["start"]:storage.metadata["passage"]["end"]]
    assert [o.memory.id for o in third.updated] == [storage.id]
    assert "superseded 1" in third.summary() and "updated 1" in third.summary()


# --- memories out, by a model -----------------------------------------------------------------


def test_a_model_reads_the_passages_and_its_memories_point_at_theirs(memory: MemoryService, tenant):
    reply = {"memories": [
        {"content": "The payments ledger is stored in PostgreSQL 16.", "memory_type": "fact", "scope": "project",
         "confidence": 0.95},
        {"content": "Deploys happen on Tuesdays when traffic is lowest.", "memory_type": "decision",
         "scope": "project", "confidence": 0.9},
        {"content": "The API key is " + SECRET, "memory_type": "fact", "scope": "user", "confidence": 0.9},
    ]}
    llm = ScriptedChatModel(structured={"ExtractedMemories": [reply], "ConsolidationDecisions": [{"decisions": []}],
                                        "UserProfileUpdate": [{}], "ProjectProfileUpdate": [{}]})
    me = memory.for_user(tenant.user)
    report = me.add_document(GUIDE, title="Guide", llm=llm)
    assert report.extractor.startswith("llm:") and report.status == "done"
    [name, messages] = llm.structured_requests[0]
    assert name == "ExtractedMemories" and "PostgreSQL 16" in messages[-1].content
    added = {o.memory.content: o.memory for o in report.added}
    assert set(added) == {"The payments ledger is stored in PostgreSQL 16.",
                          "Deploys happen on Tuesdays when traffic is lowest."}
    # filed where the document is (the user's), and pointing at the passage that says it
    ledger = added["The payments ledger is stored in PostgreSQL 16."]
    assert ledger.scope.value == "user" and ledger.source_id == str(report.resource.id)
    assert ledger.metadata["passage"]["headings"] == ["Payments service", "Storage"]
    assert added["Deploys happen on Tuesdays when traffic is lowest."].metadata["passage"]["headings"] == [
        "Payments service", "Deploys"]
    # the secret the model copied was refused by the gate
    assert [o.rejection.reason.value for o in report.rejected] == ["sensitive"]


def test_a_model_failure_keeps_the_passages_for_the_next_add(memory: MemoryService, tenant):
    def boom(messages):
        raise RuntimeError("provider down")

    me = memory.for_user(tenant.user)
    failed = me.add_document(GUIDE, external_id="flaky.md", llm=ScriptedChatModel(
        structured={"ExtractedMemories": boom}))
    assert failed.status == "failed" and "provider down" in failed.error and failed.outcomes == ()
    assert me.search_documents("ledger PostgreSQL")[0].resource_id == failed.resource.id  # searchable already
    retried = me.add_document(GUIDE, external_id="flaky.md", llm=None)
    assert retried.passages_kept == failed.passages_added and retried.passages_read == failed.passages_added
    assert len(retried.added) == 3


# --- secrets ----------------------------------------------------------------------------------


def test_a_secret_in_a_document_reaches_neither_passages_nor_memories(memory: MemoryService, tenant, dsn):
    text = GUIDE + f"\n## Access\n\nWe use the key {SECRET} for the sandbox.\n\n## Key {SECRET}\n\nRotate it.\n"
    report = memory.for_user(tenant.user).add_document(text, llm=None)
    assert SECRET not in report.resource.content and "[withheld:" in report.resource.content
    with psycopg.connect(dsn) as conn:
        stored = [r[0] + " ".join(r[1]) for r in conn.execute(
            "SELECT content, headings FROM memory_passages WHERE resource_id = %s", (report.resource.id,))]
    assert stored and not any(SECRET in s or SECRET[:20] in s for s in stored)  # nor in a heading
    learned = document_memories(memory, report.resource.id, status=None, user_id=tenant.user)
    assert learned and not any(SECRET[:20] in m.content or SECRET[:20] in str(m.metadata) for m in learned)
    hits = memory.for_user(tenant.user).search_documents("sandbox key", k=10)
    assert hits and not any(SECRET[:20] in h.content for h in hits)
    with pytest.raises(InvalidInputError, match="external_id"):
        memory.for_user(tenant.user).add_document("A note.", external_id=SECRET, llm=None)


# --- searching documents ----------------------------------------------------------------------


def test_search_documents_ranks_the_passage_that_answers(memory: MemoryService, tenant):
    me = memory.for_user(tenant.user)
    guide = me.add_document(GUIDE, title="Payments guide", llm=None)
    me.add_document("# Cooking\n\nSimmer the tomato sauce for forty minutes.\n\n## Bread\n\nKnead the dough well.",
                    title="Recipes", llm=None)
    hits = me.search_documents("which database holds the ledger", k=3)
    assert all(isinstance(h, PassageHit) for h in hits) and len(hits) == 3
    best = hits[0]
    assert best.resource_id == guide.resource.id and best.title == "Payments guide"
    assert best.headings == ("Payments service", "Storage") and "PostgreSQL" in best.content
    assert GUIDE[best.start:best.end] == best.content
    assert hits == sorted(hits, key=lambda h: -h.score)
    assert me.search_documents("knead dough", k=1)[0].title == "Recipes"
    assert me.search_documents("ledger", kind="project_resource") == []


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"query": ""}, "query"),
    ({"query": 42}, "query"),
    ({"query": "x", "k": 0}, "k"),
    ({"query": "x", "k": 101}, "k"),
    ({"query": "x", "kind": "conversation"}, "kind"),
    ({"query": "x", "kind": "spreadsheet"}, "kind"),
])
def test_bad_search_input_says_what_is_wrong(memory: MemoryService, tenant, kwargs, field):
    with pytest.raises(InvalidInputError) as raised:
        memory.for_user(tenant.user).search_documents(**kwargs)
    assert raised.value.field == field


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"content": ""}, "content"),
    ({"content": None}, "content"),
    ({"content": "x" * 1_000_001}, "content"),
    ({"content": "A transcript.", "kind": "conversation"}, "kind"),
    ({"content": "A note.", "scope": "project"}, "scope"),  # no project_id on the handle
    ({"content": "A note.", "scope": "org"}, "scope"),
    ({"content": "A note.", "metadata": {"token": SECRET}}, "metadata"),
])
def test_bad_document_input_says_what_is_wrong(memory: MemoryService, tenant, kwargs, field):
    with pytest.raises(InvalidInputError) as raised:
        memory.for_user(tenant.user).add_document(llm=None, **kwargs)
    assert raised.value.field == field


@pytest.mark.slow  # ~100 passages through the local embedder (10,000 before)
def test_a_file_of_ten_thousand_headings_is_learned_and_its_tiny_section_found(memory: MemoryService, tenant):
    text = heading_file()
    me = memory.for_user(tenant.user)
    report = me.add_document(text, title="Notes", external_id="notes.md", llm=None)
    assert report.status == "done" and report.passages_added == len(chunk_document(text)) < 100
    [hit] = me.search_documents("Kafka settles events", k=1)
    assert "# Streams\nKafka settles events." in hit.content and text[hit.start:hit.end] == hit.content


class CountingEmbeddings:
    """The real embedder, counting the texts it is asked for."""

    def __init__(self, inner) -> None:
        self.inner, self.texts = inner, 0

    def embed_documents(self, texts):
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        self.texts += 1
        return self.inner.embed_query(text)


def test_a_document_over_the_passage_limit_is_refused_before_anything_is_embedded(memory: MemoryService, tenant,
                                                                                   dsn, config):
    from agent_memory import documents
    from agent_memory.db.requests import run
    from agent_memory.validation import check_identity

    def stored(user: str) -> tuple[int, int]:
        with psycopg.connect(dsn) as conn:
            return (conn.execute("SELECT count(*) FROM memory_resources WHERE user_id = %s", (user,)).fetchone()[0],
                    conn.execute("SELECT count(*) FROM memory_passages WHERE user_id = %s", (user,)).fetchone()[0])

    big = "".join(f"## Entry {i}\n\nEntry {i} is filed in the archive room.\n\n" for i in range(2_100))
    assert len(chunk_document(big)) == 2_100 and config.max_document_passages == 2_000
    with pytest.raises(InvalidInputError) as refused:
        memory.for_user(tenant.user).add_document(big, external_id="big.md", llm=None)
    assert refused.value.field == "content"
    assert "2100 passages" in str(refused.value) and "at most 2000 (max_document_passages)" in str(refused.value)
    assert "split it" in str(refused.value) and "MEMORY_MAX_DOCUMENT_PASSAGES" in str(refused.value)
    assert stored(tenant.user) == (0, 0)  # the resource written first was rolled back
    # the limit is a setting; a new version over it leaves the last one as it was, and nothing is embedded
    first = memory.for_user(tenant.user).add_document(GUIDE, external_id="guide.md", llm=None)
    counting = CountingEmbeddings(memory.embeddings)
    op = documents.add_document(config.replace(max_document_passages=3), check_identity(tenant.user),
                                GUIDE + "\n## Extra\n\nOne section too many for this limit.\n",
                                external_id="guide.md")
    with pytest.raises(InvalidInputError, match=r"at most 3 \(max_document_passages\)"):
        run(op, memory.conn, counting)
    assert counting.texts == 0
    assert stored(tenant.user) == (1, first.passages_added)
    assert memory.for_user(tenant.user).get_resource(first.resource.id).content == GUIDE


# --- tenancy ----------------------------------------------------------------------------------


def test_nobody_else_reads_a_users_document_or_what_it_taught(memory: MemoryService, tenant):
    mine = memory.for_user(tenant.user).add_document(GUIDE, title="Private guide", llm=None)
    assert mine.added
    for outsider in (memory.for_user(tenant.other_user), memory.for_user(tenant.other_user, project_id=tenant.project)):
        assert outsider.search_documents("PostgreSQL ledger", k=10) == []
        assert not any(m.source_id == str(mine.resource.id) for m in outsider.list(status=None, limit=500))
        assert not any("PostgreSQL" in r.content for r in outsider.search("PostgreSQL ledger", k=10))


def test_a_project_document_stays_in_its_project(memory: MemoryService, tenant):
    owner = memory.for_user(tenant.user, project_id=tenant.project)
    report = owner.add_document(GUIDE, scope="project", title="Project guide", llm=None)
    member = memory.for_user(tenant.other_user, project_id=tenant.project)
    assert member.search_documents("PostgreSQL ledger")[0].resource_id == report.resource.id
    # another project, or no project, or a stranger in the project's name: nothing
    memory.create_project(tenant.other_project, user_id=tenant.other_user)
    stranger = "stranger-" + tenant.user
    for reader in (memory.for_user(tenant.user, project_id=tenant.other_project),
                   memory.for_user(tenant.other_user, project_id=tenant.other_project),
                   memory.for_user(tenant.user), memory.for_user(stranger, project_id=tenant.project)):
        assert reader.search_documents("PostgreSQL ledger", k=10) == []
    assert not any(m.source_id == str(report.resource.id)
                   for m in memory.for_user(stranger, project_id=tenant.project).list(status=None, limit=500))
    # a viewer may read but not add documents
    memory.add_member("project", tenant.project, stranger, "viewer", user_id=tenant.user)
    viewer = memory.for_user(stranger, project_id=tenant.project)
    assert viewer.search_documents("PostgreSQL ledger")[0].resource_id == report.resource.id
    with pytest.raises(PermissionDeniedError):
        viewer.add_document("We use Redis.", scope="project", llm=None)


async def test_async_handles_learn_search_and_keep_tenants_apart(amemory, tenant):
    me = amemory.for_user(tenant.user, project_id=tenant.project)
    report = await me.add_document(GUIDE, scope="project", external_id="async.md", llm=None)
    assert report.status == "done" and len(report.added) == 3
    hits = await me.search_documents("deploy day")
    assert hits[0].headings == ("Payments service", "Deploys")
    assert await amemory.for_user(tenant.user).search_documents("deploy day") == []
    assert await amemory.for_user("nobody-" + tenant.user, project_id=tenant.project).search_documents(
        "deploy day") == []


# --- erasure ----------------------------------------------------------------------------------


def test_forget_user_and_delete_scope_remove_passages(memory: MemoryService, tenant, dsn):
    def passages(**where) -> int:
        column, value = next(iter(where.items()))
        with psycopg.connect(dsn) as conn:
            return conn.execute(f"SELECT count(*) FROM memory_passages WHERE {column} = %s", (value,)).fetchone()[0]

    memory.for_user(tenant.user).add_document(GUIDE, llm=None)
    memory.for_user(tenant.user, project_id=tenant.project).add_document(GUIDE, scope="project", llm=None)
    memory.for_user(tenant.other_user, project_id=tenant.project).add_document(GUIDE, scope="project", llm=None)
    mine = passages(user_id=tenant.user)
    assert mine > 0 and passages(scope_id=tenant.project) > mine / 2
    report = memory.forget_user(user_id=tenant.user)
    assert report.removed["passages"] == mine and passages(user_id=tenant.user) == 0
    assert passages(scope_id=tenant.project) == mine / 2  # the other member's project document stays
    memory.create_project(tenant.other_project, user_id=tenant.other_user)
    theirs = memory.for_user(tenant.other_user, project_id=tenant.other_project)
    theirs.add_document(GUIDE, scope="project", llm=None)
    gone = memory.delete_scope("project", tenant.other_project, user_id=tenant.other_user)
    assert gone.removed["passages"] == mine / 2 and passages(scope_id=tenant.other_project) == 0
    assert theirs.search_documents("ledger") == []


@pytest.mark.slow  # ~200 passages through the local embedder
def test_a_long_document_is_stored_whole_and_its_needle_found(memory: MemoryService, tenant):
    filler = "The archive keeps quarterly reports of the regional offices in folders by year. "
    sections = [f"## Chapter {i}\n\n" + filler * 13 for i in range(200)]
    sections[137] = "## Chapter 137\n\nWe use Kafka for the settlement event stream.\n\n" + filler * 10
    text = "# Handbook\n\n" + "\n\n".join(sections)
    assert len(text) > 200_000
    me = memory.for_user(tenant.user, session_id=tenant.session)
    report = me.add_document(text, kind="project_resource", scope="session", external_id="handbook.md", llm=None)
    assert report.passages_added == len(chunk_document(text)) > 150 and report.status == "done"
    [kafka] = [o.memory for o in report.added]
    assert kafka.content == "The team uses Kafka for the settlement event stream."
    assert kafka.source is Source.PROJECT_RESOURCE and kafka.scope.value == "session"
    assert kafka.metadata["passage"]["headings"] == ["Handbook", "Chapter 137"]
    [hit] = me.search_documents("Kafka settlement events", k=1)
    assert hit.headings == ("Handbook", "Chapter 137") and text[hit.start:hit.end] == hit.content
    # the session's documents are the user's to read in their other sessions too (as resources are)
    assert memory.for_user(tenant.user, session_id=tenant.other_session).search_documents("Kafka", k=1)
    again = me.add_document(text, kind="project_resource", scope="session", external_id="handbook.md", llm=None)
    assert again.passages_kept == report.passages_added and again.passages_read == 0


# --- documents move with an export -------------------------------------------------------------


def test_documents_move_with_an_export(memory: MemoryService, tenant, fresh_dsn, config, embeddings) -> None:
    import json

    alice = memory.for_user(tenant.user, project_id=tenant.project)
    runbook = "# Runbook\n\n## Deploys\n\nWe deploy on Tuesdays after the review.\n\n## Stack\n\nWe use PostgreSQL 16."
    report = alice.add_document(runbook, title="Runbook", external_id="runbook", scope="project", llm=None)
    memory.for_user(f"{tenant.user}-other").add_document("Someone else's notes: deploys on Fridays.", llm=None)
    data = json.loads(json.dumps(memory.export_data(user_id=tenant.user)))
    assert {p["resource_id"] for p in data["passages"]} == {str(report.resource.id)}  # never another user's
    assert len(data["passages"]) == report.passages_added and all("embedding" not in p for p in data["passages"])
    with MemoryService(fresh_dsn(), config=config, embeddings=embeddings) as new:
        imported = new.import_data(data, as_operator=True)  # a move of the database: the project's members too
        assert imported.inserted["passages"] == report.passages_added
        moved = new.for_user(tenant.user, project_id=tenant.project)
        before = [(h.content, h.headings, round(h.score, 6)) for h in alice.search_documents("when do we deploy?")]
        after = [(h.content, h.headings, round(h.score, 6)) for h in moved.search_documents("when do we deploy?")]
        assert after == before and before[0][1] == ("Runbook", "Deploys")
        again = new.import_data(data, as_operator=True)
        assert again.inserted["passages"] == 0 and again.skipped["passages"] == report.passages_added
        # a new version of the document after the move: kept passages are recognised, not read again
        update = moved.add_document(runbook.replace("16", "17"), title="Runbook", external_id="runbook",
                                    scope="project", llm=None)
        assert update.passages_kept == report.passages_added - 1 and update.passages_added == 1
    orphan = dict(data, resources=[r for r in data["resources"] if r["id"] != str(report.resource.id)])
    with pytest.raises(InvalidInputError, match=r"passages\[0\]\.resource_id"):
        memory.import_data(orphan)
