"""The platform's authenticated user, and langmem's ``langgraph_user_id``, as identity sources.

LangGraph Platform puts the user its auth handler authenticated in
``configurable["langgraph_auth_user"]``; the one resolver (``agent_memory.identity``) reads it
above the run's own ``configurable`` and context, which a client sends and so may not override
it. These tests run the resolver alone, then every reader (checkpointer, middleware, tools, a
graph's store, a langmem tool invoked outside a graph) over the real database.
``tests/test_platform.py`` runs the same under ``langgraph dev``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore

from agent_memory import IdentityConflictError, InvalidInputError, MissingIdentityError, PermissionDeniedError
from agent_memory.identity import AUTH_USER_KEY, authenticated_fields, identity_from, read_identity_fields, \
    thread_and_user
from agent_memory.middleware import MemoryMiddleware, memory_tools
from agent_memory.models import Identity
from agent_memory.store import AgentMemoryStore
from agent_memory.testing import ScriptedChatModel, tool_call


def conf(**configurable: Any) -> dict[str, Any]:
    return {"configurable": configurable}


def authed(user: Any, **configurable: Any) -> dict[str, Any]:
    return conf(**{AUTH_USER_KEY: user}, **configurable)


@dataclass
class Ctx:
    user_id: str | None = None
    project_id: str | None = None


class PlatformUser:
    """Shaped like the platform's user proxy: ``identity`` as a property, custom fields as
    attributes, ``[]`` over a dict that lacks them, and a ``BaseUser`` property that raises."""

    def __init__(self, identity: str, **fields: Any) -> None:
        self._identity, self._fields = identity, fields

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def display_name(self) -> str:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return {"identity": self._identity}[key]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(name) from None


# --- the resolver (pure) -----------------------------------------------------------------------


def test_the_authenticated_user_is_the_user_and_its_claims_are_its_ids() -> None:
    fields = read_identity_fields(authed({"identity": "alice", "project_id": "apollo", "permissions": []},
                                         thread_id="t1"))
    assert fields == {"user_id": "alice", "project_id": "apollo", "session_id": "t1", "team_id": None,
                      "org_id": None}
    # an object (the platform's user proxy), with custom fields as attributes
    user = PlatformUser("bob", team_id="blue", org_id="acme")
    assert identity_from(authed(user)) == Identity("bob", team_id="blue", org_id="acme")
    assert authenticated_fields(authed(user)) == {"user_id": "bob", "project_id": None, "team_id": "blue",
                                                  "org_id": "acme"}
    # the platform's plain-text copy of the identity, when the object is absent
    assert identity_from(conf(langgraph_auth_user_id="carol")) == Identity("carol")
    assert authenticated_fields(conf(user_id="alice")) is None
    assert authenticated_fields(authed(None)) is None


def test_what_the_user_does_not_claim_comes_from_the_run() -> None:
    config = authed({"identity": "alice"}, project_id="apollo", thread_id="t9")
    assert identity_from(config) == Identity("alice", project_id="apollo", session_id="t9")
    assert identity_from(authed({"identity": "alice"}), Ctx(project_id="apollo")).project_id == "apollo"
    # repeating the authenticated values is fine
    assert identity_from(authed({"identity": "alice", "project_id": "apollo"}, user_id="alice"),
                         Ctx("alice", "apollo")) == Identity("alice", project_id="apollo")


@pytest.mark.parametrize("where", ["configurable", "context"])
@pytest.mark.parametrize("field", ["user_id", "project_id", "team_id", "org_id"])
def test_a_run_cannot_override_what_the_platform_authenticated(where: str, field: str) -> None:
    user = {"identity": "alice", "project_id": "apollo", "team_id": "blue", "org_id": "acme"}
    claimed = "alice" if field == "user_id" else user[field]
    config = authed(user, **({field: "eve"} if where == "configurable" else {}))
    context = {field: "eve"} if where == "context" else None
    with pytest.raises(IdentityConflictError) as caught:
        identity_from(config, context)
    err = caught.value
    assert (err.field, err.context_value, err.config_value) == (field, claimed, "eve")
    message = str(err)
    assert "authenticated user (config['configurable']['langgraph_auth_user'])" in message
    assert f"an authenticated user's {field} cannot be chosen by the run" in message
    assert "nothing was read or written" in message
    # the checkpointer reads the same rule
    if field == "user_id":
        with pytest.raises(IdentityConflictError):
            thread_and_user({"configurable": {**config["configurable"], "thread_id": "t"}} if context is None
                            else authed(user, thread_id="t", user_id="eve"))


def test_an_authenticated_user_without_a_usable_identity_is_refused() -> None:
    for identity in ("", 42, ["alice"]):
        with pytest.raises(InvalidInputError, match="authenticated user has identity .* auth handler"):
            identity_from(authed({"identity": identity}))
    # a malformed one is refused like any id, never trimmed
    with pytest.raises(InvalidInputError, match="user_id: has whitespace"):
        identity_from(authed({"identity": "alice "}))


def test_the_checkpointer_reads_the_authenticated_user() -> None:
    assert thread_and_user(authed({"identity": "alice"}, thread_id=7)) == ("7", "alice")


def test_langmems_langgraph_user_id_is_a_spelling_of_user_id() -> None:
    assert identity_from(conf(langgraph_user_id="alice")) == Identity("alice")
    assert identity_from(conf(langgraph_user_id="alice", user_id="alice")) == Identity("alice")
    with pytest.raises(IdentityConflictError, match="'alice' in config\\['configurable'\\]\\['langgraph_user_id'\\]"):
        identity_from(conf(langgraph_user_id="alice", user_id="eve"))
    with pytest.raises(IdentityConflictError):  # the context must agree with it as with user_id
        identity_from(conf(langgraph_user_id="alice"), Ctx("eve"))
    with pytest.raises(IdentityConflictError):  # and it cannot override the authenticated user either
        identity_from(authed({"identity": "alice"}, langgraph_user_id="eve"))
    with pytest.raises(MissingIdentityError):
        identity_from(conf(langgraph_user_idx="alice"))


# --- every reader, over the database ------------------------------------------------------------


def says(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_the_middleware_injects_the_authenticated_users_memory(memory, tenant) -> None:
    memory.for_user(tenant.user).add("Lives in Lisbon")
    memory.for_user(tenant.other_user).add("Lives in Oslo")
    model = ScriptedChatModel(script=["ok"])
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory)])
    agent.invoke(says("where do I live?"), authed({"identity": tenant.user}))
    prompt = str(model.requests[0])
    assert "Lisbon" in prompt and "Oslo" not in prompt
    # a client naming the other user is refused before the model is asked
    model = ScriptedChatModel(script=["ok"])
    agent = create_agent(model, [], middleware=[MemoryMiddleware(memory)])
    with pytest.raises(IdentityConflictError):
        agent.invoke(says("where do I live?"), authed({"identity": tenant.user}, user_id=tenant.other_user))
    assert model.requests == []


def test_the_memory_tools_save_for_the_authenticated_user(memory, tenant) -> None:
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[tool_call(
        "memory_save", "c1", content="Prefers green tea", memory_type="preference", scope="user")]), "done"])
    agent = create_agent(model, memory_tools(memory))
    agent.invoke(says("remember I like green tea"), authed({"identity": tenant.user}))
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["Prefers green tea"]
    assert memory.for_user(tenant.other_user).list() == []


def test_a_graphs_store_acts_for_the_authenticated_user(memory, tenant) -> None:
    def node(state: dict[str, Any], *, store: BaseStore) -> dict[str, Any]:
        store.put(("memories", state["owner"]), "k1", {"text": "Walks to work"})
        return {}

    graph = StateGraph(dict).add_node("save", node).add_edge(START, "save").compile(store=AgentMemoryStore(memory))
    graph.invoke({"owner": tenant.user}, authed({"identity": tenant.user}))
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["Walks to work"]
    # the other user's namespace is refused to the authenticated user, whatever the input says
    with pytest.raises(PermissionDeniedError):
        graph.invoke({"owner": tenant.other_user}, authed({"identity": tenant.user}))
    assert memory.for_user(tenant.other_user).list() == []


async def test_a_langmem_tool_invoked_directly_with_config_acts_for_its_user(memory, amemory, tenant) -> None:
    """Outside any graph: langmem fills ``{langgraph_user_id}`` from the config passed to the tool,
    and the store reads the same key as the user, so the namespace is the caller's own."""
    from langmem import create_manage_memory_tool, create_search_memory_tool

    namespace = ("memories", "{langgraph_user_id}")
    config = conf(langgraph_user_id=tenant.user)
    for service in (memory, amemory):
        store = AgentMemoryStore(service)
        manage = create_manage_memory_tool(namespace, store=store)
        search = create_search_memory_tool(namespace, store=store)
        if service is memory:
            manage.invoke({"content": "Rides a red bicycle", "action": "create"}, config=config)
            found = search.invoke({"query": "bicycle"}, config=config)
        else:
            await manage.ainvoke({"content": "Owns a grey cat", "action": "create"}, config=config)
            found = await search.ainvoke({"query": "cat"}, config=config)
        assert tenant.user in str(found)
    assert sorted(m.content for m in memory.for_user(tenant.user).list()) == ["Owns a grey cat",
                                                                             "Rides a red bicycle"]
    # the other user's config reaches only the other user's namespace: nothing of the first's
    other = conf(langgraph_user_id=tenant.other_user)
    assert "bicycle" not in str(create_search_memory_tool(namespace, store=AgentMemoryStore(memory)).invoke(
        {"query": "bicycle"}, config=other))


def test_a_langmem_tool_on_the_platform_uses_the_authenticated_id(memory, tenant) -> None:
    """The platform sets ``langgraph_auth_user_id`` next to the user; langmem's template
    ``{langgraph_auth_user_id}`` and the store's reading of the user agree."""
    from langmem import create_manage_memory_tool

    config = authed({"identity": tenant.user}, langgraph_auth_user_id=tenant.user)
    tool = create_manage_memory_tool(("memories", "{langgraph_auth_user_id}"), store=AgentMemoryStore(memory))
    tool.invoke({"content": "Speaks Portuguese", "action": "create"}, config=config)
    assert [m.content for m in memory.for_user(tenant.user).list()] == ["Speaks Portuguese"]
    # a client's user_id next to it is refused, not obeyed
    with pytest.raises(IdentityConflictError):
        tool.invoke({"content": "Speaks Danish", "action": "create"},
                    config=authed({"identity": tenant.user}, langgraph_auth_user_id=tenant.user,
                                  user_id=tenant.other_user))
    assert memory.for_user(tenant.other_user).list() == []
