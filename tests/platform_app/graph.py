"""A graph that saves and recalls notes through the platform's store.

It never names a user: the store acts for the run's authenticated user
(``configurable["langgraph_auth_user"]``), and ``("memories", user_id)`` is read from it.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from agent_memory.identity import identity_from


class State(TypedDict, total=False):
    remember: str  # a note to save
    query: str  # what to look for
    owner: str  # look in this user's memories instead of the caller's (refused for anyone else)
    user: str  # who the run acted for (output)
    embedder: str  # the class of the store's embedder (output: langgraph.json's index.embed chose it)
    found: list[str]  # the notes found (output)


async def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    user = identity_from(config).user_id
    if state.get("remember"):
        await store.aput(("memories", user, "notes"), str(abs(hash(state["remember"]))), {"text": state["remember"]})
    return {"user": user, "embedder": type(getattr(store, "memory").embeddings).__name__}


def recall(state: State, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
    """A blocking node (the platform runs it in a thread): the store serves it too."""
    if not state.get("query"):
        return {}
    owner = state.get("owner") or identity_from(config).user_id
    hits = store.search(("memories", owner), query=state["query"], limit=5)
    return {"found": [hit.value["text"] for hit in hits]}


graph = (
    StateGraph(State)
    .add_node(remember)
    .add_node(recall)
    .add_edge(START, "remember")
    .add_edge("remember", "recall")
    .add_edge("recall", END)
    .compile()
)
