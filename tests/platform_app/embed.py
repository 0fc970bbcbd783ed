"""The embedder ``index.embed`` names in langgraph.json: agent-memory's local model (offline),
as a subclass of its own so the test can see that this one, not the default, was used."""

from agent_memory.embeddings import LocalEmbeddings


class AppEmbeddings(LocalEmbeddings):
    """The local model, under the name langgraph.json gave it."""


embeddings = AppEmbeddings()
