"""Hidden-state features for the probe (ELOQ section 4.2.1, appendix C).

The input is the instruction, question and document (template ``probe_input``), then an
unused token appended by id; the feature is that token's hidden state in a frozen causal LM, at
the last layer by default or at ``layer`` (negative counts from the top, -1 = last, as in
transformers' ``hidden_states[layer]``; 0 is the embeddings output). The unused token is picked
per tokenizer family: Llama 3 ``<|reserved_special_token_0|>``, Mistral ``[control_555]``, Gemma
``<unused0>``, Qwen2.5 the untrained padding id 151665; otherwise the EOS token, with a warning.
A BOS token is prepended when the tokenizer adds one by default.

Two backends compute the states: ``llama_cpp`` (GGUF files, any layer but 0, read by the
verdicts' own llama.cpp wrapper and layer tap: :class:`.llamacpp.LlamaCppHiddenStates`)
and ``transformers`` (hub names, local folders, and GGUF files converted once to safetensors in
the cache; any layer). A GGUF model goes to llama_cpp unless ``backend="transformers"``.
A document that does not fit ``max_tokens`` is truncated (never the question or the token) and
the verdict says so, or :class:`DocumentTooLongError` is raised when ``strict=True``. Features
are cached on disk by model, backend, layer, token, template and the content hash of
(document, question), so each layer has its own cache namespace.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from scopeguard import _progress
from scopeguard.detection.read._feature_cache import FeatureCache, stable_hash
from scopeguard.errors import ConfigurationError, DocumentTooLongError, ModelError
from scopeguard.prompts import fenced, render, render_documents
from scopeguard.types import Document

__all__ = ["BACKENDS", "DEFAULT_LLM", "HiddenStateBackend", "HiddenStateFeatures", "resolve_llm"]

logger = logging.getLogger(__name__)

DEFAULT_LLM = "qwen2.5-coder-0.5b"
BACKENDS: tuple[str, ...] = ("llama_cpp", "transformers")
GGUF_DEFAULT_BACKEND = "llama_cpp"
_NAMED_UNUSED = ("<|reserved_special_token_0|>", "[control_555]", "<unused0>")
_QWEN_UNUSED_ID = 151665
_SPLIT = "\x00SCOPEGUARD-DOCUMENT\x00"


class HiddenStateBackend(Protocol):
    """What the probe needs from a causal LM runtime."""

    name: str
    architecture: str
    vocab_size: int
    context_length: int
    bos_id: int | None  # only when the tokenizer adds BOS by default
    eos_id: int | None

    def tokenize(self, text: str) -> list[int]: ...

    def single_token_id(self, token: str) -> int | None: ...

    def last_hidden(self, ids: list[int], prefix_len: int = 0) -> np.ndarray:
        """The last token's state at the backend's layer; ``ids[:prefix_len]`` may come from a cache."""
        ...


def resolve_llm(spec: str) -> tuple[str, str]:
    """``(kind, location)``: ``("gguf", path)`` for GGUF files and packaged names, else ``("hf", spec)``.

    Packaged names are those of :func:`scopeguard.models.available_ggufs`; a folder or any other
    name goes to transformers (a hub name such as ``"Qwen/Qwen2.5-0.5B-Instruct"``).
    """
    from scopeguard.models import available_ggufs, local_gguf

    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError("llm must be a packaged model name, a .gguf path, a folder or a hub name")
    if spec.endswith(".gguf") or spec.strip().lower() in available_ggufs():
        return "gguf", str(local_gguf(spec))
    if Path(spec).expanduser().is_dir():
        return "hf", str(Path(spec).expanduser())
    return "hf", spec


def _make_backend(
    kind: str, location: str, backend: str, n_threads: int | None, max_tokens: int, layer: int
) -> Any:
    if backend not in BACKENDS:
        raise ConfigurationError(f"unknown hidden-state backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "llama_cpp":
        if kind != "gguf":
            raise ConfigurationError("the llama_cpp backend needs a GGUF model; use backend='transformers'")
        from scopeguard.detection.read.llamacpp_probe import LlamaCppHiddenStates

        return LlamaCppHiddenStates(location, n_ctx=max_tokens, n_threads=n_threads, layer=layer)
    from scopeguard.detection.read.transformers import TransformersHiddenStates

    return TransformersHiddenStates(location, gguf=kind == "gguf", n_threads=n_threads, layer=layer)


def _pick_backend(kind: str, backend: str | None, layer: int, llm: str) -> str:
    """The backend name: as given, else llama_cpp for GGUF (transformers for layer 0, the embeddings)."""
    if backend is not None:
        if backend not in BACKENDS:
            raise ConfigurationError(
                f"unknown hidden-state backend {backend!r}; valid: {', '.join(BACKENDS)}"
            )
        if backend == "llama_cpp" and layer == 0:
            raise ConfigurationError(
                "the llama_cpp backend reads the blocks' outputs, not layer 0 (the token embeddings); "
                "use backend='transformers' for it"
            )
        return backend
    if kind != "gguf":
        return "transformers"
    if layer == 0:
        logger.info("layer=0: reading %s with the transformers backend (llama.cpp has no layer 0)", llm)
        return "transformers"
    return GGUF_DEFAULT_BACKEND


class HiddenStateFeatures:
    """Hidden state of an appended unused token at one layer (default: the last) of a frozen causal LM."""

    def __init__(
        self,
        *,
        llm: str = DEFAULT_LLM,
        backend: str | None = None,
        token: str | int | None = None,
        template: str = "probe_input",
        max_tokens: int = 2048,
        strict: bool = False,
        n_threads: int | None = None,
        cache_root: str | None = None,
        layer: int = -1,
    ) -> None:
        if max_tokens < 64:
            raise ConfigurationError(f"max_tokens must be at least 64, got {max_tokens}")
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise ConfigurationError(f"layer must be an integer (-1 = last layer), got {layer!r}")
        self.llm = llm
        self.layer = layer
        self._kind, self._location = resolve_llm(llm)
        self.backend_name = _pick_backend(self._kind, backend, layer, llm)
        self.template = template
        self._prefix, self._suffix = self._split_template(template)
        self.max_tokens = max_tokens
        self.strict = strict
        self.n_threads = n_threads
        self._token_request = token
        self._cache_root = cache_root
        self._backend: Any = None
        self._token: tuple[str, int] | None = None
        self._token_name: str | None = None
        self._cache: FeatureCache | None = None

    @staticmethod
    def _split_template(template: str) -> tuple[str, str]:
        text = render(template, question="{question}", document=_SPLIT)
        if text.count(_SPLIT) != 1:
            raise ConfigurationError(f"prompt template {template!r} must use {{{{ document }}}} exactly once")
        prefix, suffix = text.split(_SPLIT)
        return prefix, suffix

    @classmethod
    def from_identity(cls, identity: dict[str, Any], **overrides: Any) -> HiddenStateFeatures:
        kwargs: dict[str, Any] = {
            "llm": identity["model"],
            "backend": identity["backend"],
            "token": identity["token_id"],
            "template": identity["template"],
            "max_tokens": identity["max_tokens"],
            "layer": identity.get("layer", -1),  # heads saved before layers were a choice: the last
        }
        kwargs.update(overrides)
        features = cls(**kwargs)
        if "token" not in overrides:
            features._token_name = str(identity["token"])
        return features

    # -- lazy model and token -------------------------------------------------------------
    @property
    def backend(self) -> HiddenStateBackend:
        if self._backend is None:
            self._backend = _make_backend(
                self._kind, self._location, self.backend_name, self.n_threads, self.max_tokens, self.layer
            )
        return self._backend  # type: ignore[no-any-return]

    @property
    def token(self) -> tuple[str, int]:
        """``(name, id)`` of the appended unused token."""
        if self._token is None:
            self._token = self._pick_token(self._token_request)
        return self._token

    def _pick_token(self, request: str | int | None) -> tuple[str, int]:
        b = self.backend
        if isinstance(request, int):
            if not 0 <= request < b.vocab_size:
                raise ConfigurationError(
                    f"token id {request} is outside the vocabulary (size {b.vocab_size})"
                )
            return self._token_name or f"<id {request}>", request
        if isinstance(request, str):
            tid = b.single_token_id(request)
            if tid is None:
                raise ConfigurationError(f"{request!r} is not a single token of {self.llm}")
            return request, tid
        for name in _NAMED_UNUSED:
            tid = b.single_token_id(name)
            if tid is not None:
                return name, tid
        if b.architecture.startswith("qwen2") and b.vocab_size > _QWEN_UNUSED_ID:
            return f"<id {_QWEN_UNUSED_ID}>", _QWEN_UNUSED_ID
        if b.eos_id is None:
            raise ModelError(f"{self.llm} has no known unused token and no EOS token; pass token=")
        logger.warning("%s has no known unused token; appending the EOS token (id %d)", self.llm, b.eos_id)
        return "<eos>", b.eos_id

    @property
    def identity(self) -> dict[str, Any]:
        b = self.backend
        return {
            "kind": "hidden_states",
            "model": self.llm,
            "backend": self.backend_name,
            "layer": self.layer,
            "token": self.token[0],
            "token_id": self.token[1],
            "bos": b.bos_id is not None,
            "template": self.template,
            "max_tokens": self.max_tokens,
        }

    @property
    def cache(self) -> FeatureCache:
        if self._cache is None:
            ident = dict(self.identity, model_file=self._model_fingerprint())
            if self.backend_name == "llama_cpp":
                ident["read"] = "layer_tap"  # not the embeddings API of versions before 2026-11-25
            self._cache = FeatureCache(ident, root=self._cache_root)
        return self._cache

    def _model_fingerprint(self) -> str:
        p = Path(self._location)
        return f"{p.name}:{p.stat().st_size}" if p.is_file() else self._location

    # -- inputs ---------------------------------------------------------------------------
    def build_input(self, question: str, document: str) -> tuple[list[int], int, tuple[str, ...]]:
        """Token ids (BOS, prompt with the document truncated to fit, unused token), the length of
        the part before the first token that depends on the question, and notes."""
        b = self.backend
        question, document = fenced(question), fenced(document)  # as the template's |fenced would
        head = b.tokenize(self._prefix.replace("{question}", question))
        tail = b.tokenize(self._suffix.replace("{question}", question))
        doc = b.tokenize(document)
        bos = [b.bos_id] if b.bos_id is not None else []
        window = min(self.max_tokens, b.context_length)
        room = window - len(bos) - len(head) - len(tail) - 1
        notes: tuple[str, ...] = ()
        if len(doc) > room:
            if self.strict or room < 1:
                raise DocumentTooLongError(
                    f"document has {len(doc)} tokens but only {max(room, 0)} fit in the probe's "
                    f"window of {window} tokens",
                    n_tokens=len(doc),
                    limit=max(room, 0),
                )
            notes = (f"document truncated from {len(doc)} to {room} tokens to fit the probe's window",)
            doc = doc[:room]
        q_free = len(bos) + len(head) + len(doc) if "{question}" not in self._prefix else 0
        return [*bos, *head, *doc, *tail, self.token[1]], q_free, notes

    def _features(self, question: str, document: str) -> tuple[np.ndarray, tuple[str, ...]]:
        key = stable_hash(document, question)
        ids, prefix_len, notes = self.build_input(question, document)
        cached = self.cache.get(key)
        if cached is not None:
            return cached, notes
        vec = np.asarray(self.backend.last_hidden(ids, prefix_len), dtype=np.float32)
        self.cache.put(key, vec)
        return vec, notes

    def pair_features(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        vec, notes = self._features(question, render_documents(documents))
        return vec[None, :], notes

    def batch_features(
        self, pairs: Sequence[tuple[str, Document]], *, progress: bool | None = None
    ) -> np.ndarray:
        from tqdm.auto import tqdm

        show = _progress.show_progress(progress)
        rows: list[np.ndarray | None] = [None] * len(pairs)
        # questions about one document run back to back, so its KV prefix is reused
        order = sorted(range(len(pairs)), key=lambda i: pairs[i][1].content_hash)
        for i in tqdm(order, desc=f"hidden states ({self.llm})", disable=not show):
            q, d = pairs[i]
            cached = self.cache.get(stable_hash(d.text, q))
            rows[i] = cached if cached is not None else self._features(q, d.text)[0]
        return np.stack([r for r in rows if r is not None])
