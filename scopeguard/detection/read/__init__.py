"""The read: what a model makes of (question, document), one backend per engine.

Verdicts: a Yes/No question to any LLM, answered by one forward pass (with the hidden states of
chosen layers from the same pass where the engine has them). A :class:`Reader` asks it about
each passage of the documents, once, keeping the document state for the next question.

``verdict_scorer(spec)`` builds a :class:`VerdictScorer` from an LLM spec or model object:

- ``"local"`` / ``"local:NAME_OR_PATH"`` or a :class:`~scopeguard.llm.local.LlamaCppChatModel`:
  llama.cpp in-process (default model: the packaged Qwen2.5-Coder-1.5B), with a prefix cache;
- ``"transformers:NAME_OR_PATH"`` (alias ``"hf:"``): any Hugging Face causal LM, CPU or CUDA,
  batched (``pip install 'scopeguard[probe]'``);
- ``"openai:MODEL"`` or an :class:`~scopeguard.llm.openai_compat.OpenAIChatModel`: an
  OpenAI-compatible endpoint that returns ``top_logprobs`` (OpenAI, vLLM, llama.cpp server). A
  server of a packaged model (``reads_as=``, or served under the packaged name) is sent the prompt
  rendered here with that GGUF's own template (raw, to ``/completions``), so it reads as in process
  and the packaged head, threshold and profiles apply.

A tuned reader's folder (``scopeguard train-reader``; :mod:`scopeguard.detection.read.adapter`)
names a reading model too: ``"local:FOLDER"`` reads with its GGUF adapter, ``"transformers:FOLDER"``
with its PEFT adapter.

An endpoint without log-probs raises :class:`~scopeguard.errors.ConfigurationError` naming the
alternative (the free-text ``judge`` detector).

The paper baselines' feature extractors (``nli``: sentence embeddings; ``probe``: the hidden
state of an appended token) sit behind :class:`FeatureExtractor` and are rebuilt from a trained
head's identity by :func:`extractor_from_identity`; reads are cached on disk by
:class:`FeatureCache` (``$SCOPEGUARD_CACHE/features``), one file per item, written atomically,
so a killed extraction loses no finished work.
"""

from __future__ import annotations

from scopeguard.detection.read.adapter import TunedReader, tuned_reader
from scopeguard.detection.read.base import (
    NO_WORDS,
    YES_WORDS,
    VerdictScore,
    VerdictScorer,
    score_from_top_logprobs,
)
from scopeguard.detection.read.features import (
    FeatureCache,
    FeatureExtractor,
    extractor_from_identity,
    get_extractor,
    stable_hash,
)
from scopeguard.detection.read.reader import TEMPLATE, Reader, verdict_messages
from scopeguard.detection.read.scorer import DEFAULT_VERDICT_MODEL, verdict_scorer

__all__ = [
    "DEFAULT_VERDICT_MODEL",
    "NO_WORDS",
    "TEMPLATE",
    "YES_WORDS",
    "FeatureCache",
    "FeatureExtractor",
    "Reader",
    "TunedReader",
    "VerdictScore",
    "VerdictScorer",
    "extractor_from_identity",
    "get_extractor",
    "score_from_top_logprobs",
    "stable_hash",
    "tuned_reader",
    "verdict_messages",
    "verdict_scorer",
]
