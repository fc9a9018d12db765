"""Log-prob verdicts from an OpenAI-compatible endpoint (llama.cpp's server, vLLM, Ollama, OpenAI).

Each prompt is one request for one token (``max_tokens=1``, ``temperature=0``) with the log-probs
of that position's top tokens (``top_logprobs``, default 20); the verdict words' log-probs are read
from that list (the chat shape ``logprobs.content[0].top_logprobs`` and the completions shape
``logprobs.top_logprobs[0]`` alike). The request takes one of two forms:

* **raw**, for a served copy of a GGUF this machine has too (``reads_as``: the packaged reader, or
  a ``.gguf`` file): the verdict prompt is rendered here through that GGUF's own chat template,
  exactly as the in-process read renders it (:mod:`~scopeguard.detection.read.llama_prompt`), and
  sent as the ``prompt`` of a ``/completions`` request. The server reads that text and applies no
  template of its own, so it reads the tokens the in-process head was fitted on; passages are cut
  with the GGUF's tokenizer too. The scorer takes the in-process reader's name, so the head and
  the calibration profiles fitted in process apply to the served copy
  (``benchmarks/served_reader.py`` measures how closely the two reads agree).
* **chat**, for any other model (an API model, a model without a GGUF here): the messages go to
  ``/chat/completions`` and the server applies its own template. A head fitted in process does
  not carry over; ``scopeguard calibrate`` fits thresholds for this reader.

Nothing is locked around a request: one scorer serves any number of threads or tasks at once,
and how many of their requests run together is the engine's affair.

A reply without log-probs means the endpoint does not support them:
:class:`~scopeguard.errors.ConfigurationError` names the alternative. When neither Yes nor No is
among the top tokens, :class:`~scopeguard.errors.LLMResponseError`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scopeguard._progress import progress_bar
from scopeguard.detection.read.base import VerdictScore, score_from_top_logprobs
from scopeguard.detection.read.llama_prompt import chat_formatter, render_prompt, wanted_bos
from scopeguard.errors import ConfigurationError, LLMResponseError, MissingDependencyError, ModelError
from scopeguard.llm.base import ChatMessage

__all__ = ["OpenAIVerdicts", "PromptForm", "top_logprobs_of"]

logger = logging.getLogger(__name__)

#: how a served reader sends its prompt: ``raw`` (rendered here, ``/completions``), ``chat``
#: (``/chat/completions``, the server's template) or ``auto`` (raw where a GGUF is at hand)
PromptForm = Literal["auto", "raw", "chat"]
_FORMS = ("auto", "raw", "chat")


def _as_dict(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    return dump() if callable(dump) else obj


def top_logprobs_of(response: Any) -> dict[str, float] | None:
    """token -> log-prob of the first generated token, from a chat completion or a completion
    (``None``: absent)."""
    raw = _as_dict(response)
    try:
        logprobs = raw["choices"][0].get("logprobs")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list) and content:
        first = content[0] or {}
        top = first.get("top_logprobs") or []
        out = {str(t["token"]): float(t["logprob"]) for t in top if isinstance(t, dict) and "token" in t}
        if "token" in first and "logprob" in first:
            out.setdefault(str(first["token"]), float(first["logprob"]))
        return out or None
    legacy = logprobs.get("top_logprobs")
    if isinstance(legacy, list) and legacy and isinstance(legacy[0], dict):
        return {str(k): float(v) for k, v in legacy[0].items()}
    return None


def _prompt_tokens(response: Any) -> int:
    raw = _as_dict(response)
    usage = raw.get("usage") if isinstance(raw, dict) else None
    count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return int(count) if isinstance(count, int) else 0


@dataclass(frozen=True)
class _GgufPrompt:
    """A GGUF's vocabulary and chat template (no weights): the in-process read's prompt text."""

    llm: Any  # a vocab-only llama_cpp.Llama
    formatter: Any
    bos_text: str | None  # the BOS token's text, where the model wants one before every prompt

    @classmethod
    def open(cls, path: Path) -> _GgufPrompt:
        import llama_cpp

        llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
        bos = wanted_bos(llm)
        bos_text = None if bos is None else llm.detokenize([bos], special=True).decode("utf-8", "replace")
        return cls(llm, chat_formatter(llm), bos_text or None)

    def render(self, messages: Sequence[ChatMessage]) -> str:
        text = render_prompt(self.formatter, messages)
        # the server puts the BOS token the model wants before the prompt itself: not twice
        if self.bos_text is not None and text.startswith(self.bos_text):
            text = text[len(self.bos_text) :]
        return text

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def _packaged_names() -> list[str]:
    from scopeguard.models import available_ggufs

    return list(available_ggufs())


class OpenAIVerdicts:
    """Verdict log-probs through an :class:`~scopeguard.llm.openai_compat.OpenAIChatModel`
    (see the module docstring).

    Args:
        chat_model: the endpoint (its ``model`` is the name the server serves the model under).
        top_logprobs: how many of the next token's most likely tokens to ask for (1..20).
        reads_as: the GGUF the endpoint serves: a packaged name (``"qwen2.5-coder-1.5b"``) or a
            ``.gguf`` path. Default: the served model's name when it is a packaged model's (serve
            the packaged reader under the name ``qwen2.5-coder-1.5b`` and nothing needs setting).
            The scorer then carries that model's in-process name.
        prompt: ``"raw"`` renders each prompt with ``reads_as``'s chat template and sends it to
            ``/completions``; ``"chat"`` sends the messages to ``/chat/completions``; ``"auto"``
            (default) is raw where ``reads_as`` is known and its GGUF is on this machine (with
            llama-cpp-python to read its template), else chat (logged as a warning).
        layers: refused unless empty (an endpoint returns no hidden states; the ``default``
            detector's head needs them, the ``logprob`` detector's does not).
    """

    def __init__(
        self,
        chat_model: Any,
        *,
        top_logprobs: int = 20,
        reads_as: str | Path | None = None,
        prompt: PromptForm = "auto",
        layers: Sequence[int] = (),
    ) -> None:
        if layers:
            raise ConfigurationError(
                f"an OpenAI-compatible endpoint returns log-probs, not the hidden states of layers "
                f"{list(layers)}: read them in process, or use the 'logprob' detector with a served reader"
            )
        if not 1 <= top_logprobs <= 20:
            raise ConfigurationError(f"top_logprobs must be in 1..20, got {top_logprobs}")
        if not hasattr(chat_model, "chat_completion"):
            raise ConfigurationError(
                f"{type(chat_model).__name__} cannot return log-probs; use an OpenAIChatModel"
            )
        if prompt not in _FORMS:
            raise ConfigurationError(f"unknown prompt form {prompt!r}; valid: {', '.join(_FORMS)}")
        self.chat_model = chat_model
        self.top_logprobs = top_logprobs
        self.prompt_form: PromptForm = prompt
        served = str(chat_model.model)
        if reads_as is None and served in _packaged_names():
            reads_as = served
        if reads_as is None and prompt == "raw":
            raise ConfigurationError(
                f"prompt='raw' needs the GGUF that {served!r} is served from: pass reads_as= "
                "(a packaged name or a .gguf path)"
            )
        self.reads_as = reads_as
        if reads_as is None:
            self._name = served
        else:
            self._name = str(reads_as) if str(reads_as) in _packaged_names() else Path(reads_as).stem
        self._gguf: _GgufPrompt | None = None
        self._resolved = prompt == "chat" or reads_as is None
        self._resolving = threading.Lock()  # taken once, to open the GGUF's vocabulary; never per request

    @property
    def name(self) -> str:
        """The in-process reader's name for ``reads_as`` (``qwen2.5-coder-1.5b``, a file's stem),
        else the served model's name."""
        return self._name

    def __repr__(self) -> str:
        model, form = self.chat_model.model, self.prompt_form
        return f"OpenAIVerdicts(model={model!r}, name={self.name!r}, prompt={form!r})"

    @property
    def form(self) -> Literal["raw", "chat"]:
        """How the prompts are sent (``auto`` resolved: this opens the GGUF's vocabulary)."""
        return "chat" if self._prompt() is None else "raw"

    def load(self) -> None:
        """Open the GGUF's vocabulary and template now (otherwise on the first prompt)."""
        self._prompt()

    def _prompt(self) -> _GgufPrompt | None:
        if self._resolved:
            return self._gguf
        with self._resolving:
            if not self._resolved:
                self._gguf = self._open(self.reads_as)
                self._resolved = True
        return self._gguf

    def _open(self, reads_as: str | Path | None) -> _GgufPrompt | None:
        from scopeguard._optional import require
        from scopeguard.models import local_gguf

        if reads_as is None:
            return None
        try:
            require(
                "llama_cpp", extra="local", feature="a served reader's prompt", package="llama-cpp-python"
            )
            path = local_gguf(str(reads_as))
            return _GgufPrompt.open(path)
        except (MissingDependencyError, ModelError) as exc:
            if self.prompt_form == "raw":
                raise
            logger.warning(
                "%s: %s; the prompts go to /chat/completions and the server's chat template",
                self.name,
                exc,
            )
            return None

    def count_tokens(self, text: str) -> int:
        gguf = self._prompt()
        if gguf is not None:
            return gguf.count_tokens(text)
        return len(text) // 4 + 1  # no tokenizer at hand: a conservative estimate for chunking

    def render(self, messages: Sequence[ChatMessage]) -> str | None:
        """The prompt text a raw request sends (``None``: prompts go as chat messages)."""
        gguf = self._prompt()
        return None if gguf is None else gguf.render(messages)

    def prime(self, messages: Sequence[ChatMessage], *, upto: str, create: bool = True) -> int:
        """Have the engine read the start of ``messages``' prompt, up to the text ``upto`` (where
        the first document or the question goes), so that its prefix cache holds the instruction
        (or the instruction and a document) before a question comes; returns the prompt tokens the
        engine reports (0: nothing was sent, for chat-form prompts, ``create=False`` or an ``upto``
        the prompt lacks). Whether the engine keeps it for later requests is the engine's affair:
        vLLM's prefix cache and llama-server's slots keep many prompts, llama-cpp-python's server
        only the last one. This is how :meth:`Reader.preread` warms a served reader."""
        text = self.render(messages) if create else None
        if text is None or upto not in text:
            return 0
        params = {"model": self.chat_model.model, "prompt": text.split(upto, 1)[0], "max_tokens": 1}
        return _prompt_tokens(self.chat_model.text_completion({**params, "temperature": 0.0})) or 1

    def _params(self, messages: Sequence[ChatMessage]) -> tuple[bool, dict[str, Any]]:
        """Whether the request is raw, and its parameters."""
        asked = {"model": self.chat_model.model, "temperature": 0.0, "max_tokens": 1}
        text = self.render(messages)
        if text is not None:
            return True, {**asked, "prompt": text, "logprobs": self.top_logprobs}
        messages_ = [m.model_dump() for m in messages]
        return False, {**asked, "messages": messages_, "logprobs": True, "top_logprobs": self.top_logprobs}

    def _read(self, response: Any) -> VerdictScore:
        top = top_logprobs_of(response)
        where = getattr(self.chat_model, "base_url", "the endpoint")
        if top is None:
            raise ConfigurationError(
                f"{where} returned no log-probs for model {self.chat_model.model!r}: this endpoint does "
                "not support logprobs/top_logprobs. Use the free-text self-consistency detector instead "
                "(detector='judge'), or a server that returns log-probs (llama.cpp's server, vLLM, OpenAI)."
            )
        score = score_from_top_logprobs(top, n_tokens=_prompt_tokens(response))
        if score is None:
            raise LLMResponseError(
                f"neither Yes nor No is among the top {len(top)} next tokens of "
                f"{self.chat_model.model!r} at {where}",
                reply=", ".join(sorted(top)[:10]),
            )
        return score

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        raw, params = self._params(messages)
        send = self.chat_model.text_completion if raw else self.chat_model.chat_completion
        return self._read(send(params))

    async def ascore(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        raw, params = self._params(messages)
        send = self.chat_model.atext_completion if raw else self.chat_model.achat_completion
        return self._read(await send(params))

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]:
        return [self.score(p) for p in progress_bar(prompts, desc="verdicts", enabled=progress)]
