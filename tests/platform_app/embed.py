"""The embedder ``index.embed`` names in langgraph.json: agent-memory's local model (offline)."""

from agent_memory.embeddings import LocalEmbeddings

embeddings = LocalEmbeddings()
