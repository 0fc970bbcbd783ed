"""Resources (layer 1): documents, project resources and conversations, and where a memory came from."""

from __future__ import annotations

import pytest

from agent_memory import MemoryService
from agent_memory.errors import InvalidInputError, MemoryNotFoundError
from agent_memory.models import ResourceKind, Scope, Source
from agent_memory.resources import MAX_RESOURCE_CHARS


def test_add_a_document_and_a_project_resource(memory: MemoryService, tenant) -> None:
    doc = memory.for_user(tenant.user).add_resource("Alice's notes on the billing service.", title="  notes  ", metadata={"path": "notes.md"})
    assert doc.kind is ResourceKind.DOCUMENT and doc.scope is Scope.USER and doc.scope_id == tenant.user
    assert doc.project_id is None and doc.session_id is None and doc.external_id is None
    assert doc.title == "notes" and doc.metadata == {"path": "notes.md"} and doc.cursor is None

    spec = memory.for_user(tenant.user, project_id=tenant.project).add_resource("The API spec: every endpoint is versioned.", kind="project_resource", scope="project", title="spec")
    assert spec.kind is ResourceKind.PROJECT_RESOURCE and spec.scope is Scope.PROJECT
    assert spec.scope_id == tenant.project and spec.project_id == tenant.project

    assert memory.for_user(tenant.user).get_resource(doc.id) == doc
    assert memory.for_user(tenant.user, project_id=tenant.project).get_resource(str(spec.id)) == spec
    both = memory.for_user(tenant.user, project_id=tenant.project).list_resources()
    assert {r.id for r in both} == {doc.id, spec.id}
    assert [r.id for r in memory.for_user(tenant.user, project_id=tenant.project).list_resources(kind="project_resource")] == [spec.id]
    # without the project in the identity only the user's own document shows
    assert [r.id for r in memory.for_user(tenant.user).list_resources()] == [doc.id]
    assert len(memory.for_user(tenant.user, project_id=tenant.project).list_resources(limit=1)) == 1
    assert len(memory.for_user(tenant.user, project_id=tenant.project).list_resources(limit=1, offset=1)) == 1


def test_upsert_by_external_id_replaces_the_content(memory: MemoryService, tenant) -> None:
    first = memory.for_user(tenant.user).add_resource("Version one of the runbook.", external_id="docs/runbook.md", title="Runbook", metadata={"rev": 1, "owner": "ops"})
    second = memory.for_user(tenant.user).add_resource("Version two of the runbook.", external_id="docs/runbook.md", metadata={"rev": 2})
    assert second.id == first.id
    assert second.content == "Version two of the runbook."
    assert second.title == "Runbook"  # no title given: the old one is kept
    assert second.metadata == {"rev": 2, "owner": "ops"}
    assert second.updated_at >= first.updated_at
    assert [r.content for r in memory.for_user(tenant.user).list_resources()] == ["Version two of the runbook."]
    # the same external id in another scope (or without one) is another resource
    other = memory.for_user(tenant.user, project_id=tenant.project).add_resource("Version one of the runbook.", scope="project", external_id="docs/runbook.md")
    plain = memory.for_user(tenant.user).add_resource("Version one of the runbook.")
    assert len({first.id, other.id, plain.id}) == 3


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"content": "A transcript.", "kind": "conversation"}, "kind"),
    ({"content": "A note.", "kind": "spreadsheet"}, "kind"),
    ({"content": ""}, "content"),
    ({"content": "   \n "}, "content"),
    ({"content": 42}, "content"),
    ({"content": "x" * (MAX_RESOURCE_CHARS + 1)}, "content"),
    ({"content": "A project note.", "scope": "project"}, "scope"),
    ({"content": "A session note.", "scope": "session"}, "scope"),
    ({"content": "A note.", "scope": "galaxy"}, "scope"),
    ({"content": "A note.", "title": "t" * 501}, "title"),
    ({"content": "A note.", "metadata": ["not", "a", "dict"]}, "metadata"),
])
def test_add_resource_rejects_bad_input(memory: MemoryService, tenant, kwargs, field) -> None:
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).add_resource(**kwargs)
    assert err.value.field == field
    assert memory.for_user(tenant.user, project_id=tenant.project).list_resources() == []


def test_a_resource_of_exactly_the_limit_is_accepted(memory: MemoryService, tenant) -> None:
    big = memory.for_user(tenant.user).add_resource("y" * MAX_RESOURCE_CHARS)
    assert len(memory.for_user(tenant.user).get_resource(big.id).content) == MAX_RESOURCE_CHARS


def test_bad_ids_and_paging_are_refused(memory: MemoryService, tenant) -> None:
    with pytest.raises(InvalidInputError) as err:
        memory.for_user(tenant.user).get_resource("not-a-uuid")
    assert err.value.field == "resource_id"
    with pytest.raises(InvalidInputError):
        memory.for_user(tenant.user).list_resources(offset=-1)
    with pytest.raises(InvalidInputError):
        memory.for_user(tenant.user).list_resources(limit=0)
    with pytest.raises(InvalidInputError):
        memory.for_user(tenant.user).list_resources(kind="spreadsheet")


def test_an_explicit_memory_said_in_a_session_points_to_its_conversation(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user, session_id=tenant.session).add("Prefers tabs over spaces in Makefiles.", memory_type="preference")
    source = memory.for_user(tenant.user).source(item.id)  # readable from outside the session too
    assert source is not None
    assert source.kind is ResourceKind.CONVERSATION and source.scope is Scope.SESSION
    assert source.session_id == tenant.session and source.user_id == tenant.user
    assert item.source is Source.USER and item.source_id == str(source.id)
    # one conversation per session: a second memory of the session points to the same resource
    again = memory.for_user(tenant.user, session_id=tenant.session).add("Works from Porto on Fridays.")
    assert again.source_id == str(source.id)
    [conversation] = memory.for_user(tenant.user).list_resources(kind="conversation")
    assert conversation.id == source.id


def test_a_memory_stated_without_a_session_has_no_source(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user).add("Keeps a paper notebook for ideas.")
    assert item.source_id is None
    assert memory.for_user(tenant.user).source(item.id) is None
    # a source id of the caller's own making is not one of ours
    own = memory.for_user(tenant.user).add("Read the design doc in the wiki.", source_id="wiki:page/42")
    assert memory.for_user(tenant.user).source(own.id) is None
    assert memory.for_user(tenant.user).list_resources() == []


def test_a_memory_citing_a_document_points_to_it(memory: MemoryService, tenant) -> None:
    doc = memory.for_user(tenant.user, project_id=tenant.project).add_resource("Style guide: all functions have docstrings.", kind="project_resource", scope="project")
    item = memory.for_user(tenant.user, project_id=tenant.project).add("Every function has a docstring.", scope="project", memory_type="constraint", source="project_resource", source_id=str(doc.id))
    assert memory.for_user(tenant.other_user, project_id=tenant.project).source(item.id) == doc


def test_an_extracted_memory_points_to_the_transcript_it_was_read_from(memory: MemoryService, tenant) -> None:
    messages = [
        {"role": "user", "content": "Hi! I prefer answers with small code examples.", "id": "m1"},
        {"role": "assistant", "content": "Noted, I will keep examples small.", "id": "m2"},
        {"role": "user", "content": "I live in Lisbon.", "id": "m3"},
    ]
    report = memory.for_user(tenant.user, session_id=tenant.session).extract(messages, llm=None)
    assert report.status == "done", report.summary()
    assert {o.memory.content for o in report.added} == {"Prefers answers with small code examples.",
                                                         "Lives in Lisbon."}
    item = report.added[0].memory
    assert item.source is Source.CONVERSATION
    source = memory.for_user(tenant.user, session_id=tenant.session).source(item.id)
    assert source is not None and source.id == report.resource_id
    assert source.kind is ResourceKind.CONVERSATION and source.session_id == tenant.session
    assert source.cursor == "m3"
    assert source.content == ("user: Hi! I prefer answers with small code examples.\n"
                              "assistant: Noted, I will keep examples small.\n"
                              "user: I live in Lisbon.")

    # the next run reads only what follows the cursor, and the transcript grows by it
    later = memory.for_user(tenant.user, session_id=tenant.session).extract([*messages, {"role": "user", "content": "I use Neovim.", "id": "m4"}], llm=None)
    assert [o.memory.content for o in later.added] == ["Uses Neovim."]
    grown = memory.for_user(tenant.user).get_resource(source.id)
    assert grown.cursor == "m4"
    assert grown.content.endswith("user: I live in Lisbon.\nuser: I use Neovim.")
    assert grown.content.count("I live in Lisbon.") == 1
    nothing = memory.for_user(tenant.user, session_id=tenant.session).extract([*messages, {"role": "user", "content": "I use Neovim.", "id": "m4"}], llm=None)
    assert nothing.status == "nothing_new"


def test_a_secret_said_in_the_conversation_is_withheld_from_the_transcript(memory: MemoryService, tenant) -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    report = memory.for_user(tenant.user, session_id=tenant.session).extract([{"role": "user", "content": "I use Docker for local development.", "id": "a"},
         {"role": "user", "content": f"My AWS key is {secret}.", "id": "b"}], llm=None)
    assert report.status == "done"
    assert [o.rejection.reason.value for o in report.rejected] == ["sensitive"]
    [conversation] = memory.for_user(tenant.user).list_resources(kind="conversation")
    assert secret not in conversation.content
    assert "user: I use Docker for local development." in conversation.content
    assert "user: My AWS key is [withheld: an AWS access key id]." in conversation.content  # the rest is kept
    assert all(secret not in m.content for m in memory.for_user(tenant.user).list())


def test_other_users_cannot_read_someones_resources_or_sources(memory: MemoryService, tenant) -> None:
    doc = memory.for_user(tenant.user).add_resource("Private journal entry about a job offer.")
    item = memory.for_user(tenant.user, session_id=tenant.session).add("Is considering a job offer in Berlin.")
    [conversation] = memory.for_user(tenant.user).list_resources(kind="conversation")

    for resource in (doc, conversation):
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(tenant.other_user).get_resource(resource.id)
        # even when the other user names the same session and project
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(tenant.other_user, session_id=tenant.session, project_id=tenant.project).get_resource(resource.id)
    assert memory.for_user(tenant.other_user, session_id=tenant.session, project_id=tenant.project).list_resources() == []
    with pytest.raises(MemoryNotFoundError):
        memory.for_user(tenant.other_user, session_id=tenant.session).source(item.id)
    # the owner still sees both
    assert {r.id for r in memory.for_user(tenant.user).list_resources()} == {doc.id, conversation.id}


def test_project_resources_are_shared_with_the_project_only(memory: MemoryService, tenant) -> None:
    spec = memory.for_user(tenant.user, project_id=tenant.project).add_resource("Deployment checklist for the project.", kind="project_resource", scope="project")
    member = memory.for_user(tenant.other_user, project_id=tenant.project).get_resource(spec.id)
    assert member == spec
    assert [r.id for r in memory.for_user(tenant.other_user, project_id=tenant.project).list_resources()] == [spec.id]
    for outsider in ({"project_id": tenant.other_project}, {}):
        with pytest.raises(MemoryNotFoundError):
            memory.for_user(tenant.other_user, **outsider).get_resource(spec.id)
        assert memory.for_user(tenant.other_user, **outsider).list_resources() == []


def test_a_project_memory_does_not_reveal_its_authors_conversation(memory: MemoryService, tenant) -> None:
    item = memory.for_user(tenant.user, project_id=tenant.project, session_id=tenant.session).add("The project deploys with Helm charts.", scope="project")
    assert memory.for_user(tenant.user, project_id=tenant.project).source(item.id) is not None
    # another member sees the memory, but the author's conversation stays private
    assert memory.for_user(tenant.other_user, project_id=tenant.project).get(item.id).id == item.id
    assert memory.for_user(tenant.other_user, project_id=tenant.project).source(item.id) is None
