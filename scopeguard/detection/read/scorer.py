"""``verdict_scorer``: a :class:`VerdictScorer` by LLM spec (re-exported by
:mod:`scopeguard.detection.read`; see its docs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scopeguard.detection.read.base import VerdictScorer
from scopeguard.errors import ConfigurationError

__all__ = ["DEFAULT_VERDICT_MODEL", "verdict_scorer"]

DEFAULT_VERDICT_MODEL = "qwen2.5-coder-1.5b"


def verdict_scorer(spec: Any = None, **kwargs: Any) -> VerdictScorer:
    """A :class:`VerdictScorer` for ``spec`` (see the module docstring); ``None`` = the packaged 1.5B."""
    if spec is None:
        spec = f"local:{DEFAULT_VERDICT_MODEL}"
    if isinstance(spec, VerdictScorer) and not isinstance(spec, str):
        return spec
    if isinstance(spec, Path):
        spec = f"local:{spec}"
    if isinstance(spec, str):
        prefix, _, arg = spec.strip().partition(":")
        if prefix == "local":
            from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

            return LlamaCppVerdicts(arg.strip() or DEFAULT_VERDICT_MODEL, **kwargs)
        if prefix in ("transformers", "hf"):
            from scopeguard.detection.read.transformers import TransformersVerdicts

            if not arg.strip():
                raise ConfigurationError(f"{spec!r} needs a model name or folder, e.g. 'transformers:gpt2'")
            return TransformersVerdicts(arg.strip(), **kwargs)
        if prefix == "openai":
            from scopeguard.detection.read.openai import OpenAIVerdicts
            from scopeguard.llm.registry import from_spec

            return OpenAIVerdicts(from_spec(spec), **kwargs)
        raise ConfigurationError(
            f"no log-prob verdict backend for {spec!r}; valid prefixes: local, transformers (hf), openai"
        )
    from scopeguard.llm.local import LlamaCppChatModel
    from scopeguard.llm.openai_compat import OpenAIChatModel

    if isinstance(spec, LlamaCppChatModel):
        from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

        return LlamaCppVerdicts(spec.path, n_threads=spec.n_threads, **kwargs)
    if isinstance(spec, OpenAIChatModel):
        from scopeguard.detection.read.openai import OpenAIVerdicts

        return OpenAIVerdicts(spec, **kwargs)
    raise ConfigurationError(
        f"cannot read log-prob verdicts from {type(spec).__name__}: pass an LLM spec ('local:...', "
        "'transformers:...', 'openai:...'), a LlamaCppChatModel or an OpenAIChatModel; for any other "
        "chat model use the free-text 'judge' detector"
    )
