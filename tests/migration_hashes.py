"""The sha256 of every migration's text (``Migration.sql``, the template before ``{dimensions}`` is
filled in), pinned: ``tests/test_migration_hashes.py`` fails when an applied migration's text
changes, since a database that already ran it never runs it again (it would silently differ from
a new one). A change to the schema is a new migration at the end of ``MIGRATIONS``.

A new migration is pinned with one line here, ``"00NN_name": "<sha256>",``, which the failing test
prints ready to paste (or: ``python tests/migration_hashes.py`` prints every line).
"""

from __future__ import annotations

import hashlib

MIGRATION_HASHES: dict[str, str] = {
    "0001_vector_extension": "8d2eedd3856d2a3a5094f8448f3ba641f7721f109d50bd712c5581c9a0d28196",
    "0002_memory_items": "f841f8770496cb10f14bc0d2c74d32401be2a8460da766a916673229d4727ae6",
    "0003_extraction_runs": "43790fb2a69fe22ade408dfdd85b388f35d9e43b74940419314c45156bc907fc",
    "0004_memory_items_fillfactor": "49609fb7f85ec3a57a0fed12306376fece3413e77f8d3bba6d0290621ad9246c",
    "0005_episodic": "e57cfc90695f6ba94f6396978d649b8c3be94f9e5b53df9b688137413d72a05c",
    "0006_thread_owners": "2846e3782721228f7349250b7bfdf75aa271b3e79589923bb1b4942736f0512d",
    "0007_resources_history_profiles": "a32992714bbe57c240cedd0bc862c430421c6ebb8f0b5888ef7b3fc5452337f1",
    "0008_access_control": "3d3eaf1d5a9bf5f250e81dab4d5b245c5e5c33b5efba726f7cd85f61c6752004",
    "0009_reembed_staging": "b51b93659a1ebc38b4aacf3c7f07fddc14d52a607c446a9a785bfa7b8c7f03ac",
    "0010_search_at_scale": "44e42f6251f02084fb4517320cfb94b2802f043018516205abccb5a562ba3c57",
    "0011_keys_and_expiry": "7bf1dfcf4b4286ca147c6050c9397877d6b4962dea1711feec34544efbf249e9",
    "0012_salience": "ab650208d4acdaeb0a57ce55b692d8798a8dbea241d75d29b9b5833c9593bbc3",
    "0013_document_passages": "159417deeb96d1232f05deed5aeb381f4ba8686b85c9a0f9be1154ad5e9de88e",
    "0014_bitemporal": "062e3ef7111476ffe10849da3ac8645aced27e3e4aba6da20e833c19c5e89c8b",
    "0015_metadata_filters": "6c7c91bad5b7e3b17acecba752a908b9fe95611da6f46a6c68ed5fb792fb587e",
    "0016_scope_vector_cache": "3162fc4a93c303da6dfec38276f2cd1b10fac1d466d328be4db2b99dba545afc",
    "0017_history_visibility": "8b7280fdcc4ec14c941c1075a2a563c826efb90507e74000a9e852ee14c723fa",
    "0018_memory_context": "a80fb9f1d82ee3df4cae6c5cb19c333b673faf3b9eddbe8d99381371a405ddfa",
    "0019_custom_memory_types": "25b6a5cbc59aac2bf2981679730fe164ab0460a8a6fed7f4def43fe240e72fb9",
    "0020_optional_embedding": "9cd4df041c4c95c59f71c2d6c9b18d58ffb25215749b3f7ce980c9c0be7d6aa2",
    "0021_knowledge_graph": "f64178b43b267b12e597da1fefbc8c5a3ae8de9d969e424a4415222ee4c61bb8",
    "0022_distributable": "0269107c01fb96215c1bc70ebecec8ecc5d4013dbebf90bc0da0772de5e65032",
    "0023_context_keywords": "c6ee4bad69c8e5e54356666022b3259718c91f0818b498709f31f1ba067e1eea",
    "0024_graph_lifecycle_storylines": "2fa533dc517286d0e2f0c8c03350d6833bca840af45d7a060f470bc7720acfef",
    "0025_store_vectors": "94324e6c4e3676c7ca5dbc17d0fcb7507041a791f8765c75d07541028b9470e2",
}


def text_hash(sql: str) -> str:
    """The pinned form of a migration's text."""
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


if __name__ == "__main__":
    from agent_memory.db.migrations import MIGRATIONS

    for migration in MIGRATIONS:
        print(f'    "{migration.name}": "{text_hash(migration.sql)}",')
