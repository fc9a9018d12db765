"""The transformers read: log-prob verdicts (batched, CPU or CUDA) and the probe's hidden states.

``TransformersVerdicts("Qwen/Qwen2.5-1.5B-Instruct")`` (a hub name or a local folder; a
packaged GGUF name or a ``.gguf`` path is converted to safetensors once, see
:func:`scopeguard.models.converted_gguf_dir`). Prompts go through the
tokenizer's chat template; batches are left-padded so the last position is every prompt's own
next token. On CUDA the model runs in bfloat16, on the CPU in float32. ``layers=(...)`` returns
those layers' hidden states at the verdict position with each score (``hidden_states[layer]``,
from the same forward pass).

A tuned reader's folder (see :mod:`scopeguard.detection.read.adapter`) reads its base with the
PEFT adapter merged in (``peft``: ``pip install 'scopeguard[train]'``), named by the base and the
adapter's key (``qwen2.5-coder-0.5b+lora-1a2b3c4d5e6f``), as llama.cpp names it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard._optional import dtype_option, require
from scopeguard._progress import progress_bar
from scopeguard.detection.read._verdict_prompt import question_cut, split_tokens
from scopeguard.detection.read.adapter import file_sha256, tuned_reader
from scopeguard.detection.read.base import NO_WORDS, YES_WORDS, VerdictScore, variant_strings
from scopeguard.errors import ConfigurationError, DocumentTooLongError, ModelError
from scopeguard.llamacpp import resolve_layers
from scopeguard.llm.base import ChatMessage
from scopeguard.models import converted_gguf_dir

__all__ = [
    "TransformersHiddenStates",
    "TransformersVerdicts",
    "cache_argument",
    "cache_layers",
    "fresh_cache",
    "load_causal_lm",
    "model_location",
    "render_prompt",
    "verdict_token_ids",
]

logger = logging.getLogger(__name__)


def model_location(model: str) -> str:
    """Where transformers loads ``model`` from: a packaged GGUF name or a ``.gguf`` path converted to
    safetensors once (:func:`scopeguard.models.converted_gguf_dir`); a hub name or folder as is."""
    from scopeguard.models import available_ggufs, local_gguf

    if model in available_ggufs() or model.endswith(".gguf"):
        return str(converted_gguf_dir(local_gguf(model)))
    return model


def verdict_token_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """The ids of every single-token form of ``words`` (see :func:`variant_strings`)."""
    ids: list[int] = []
    for text in variant_strings(words):
        toks = tokenizer(text, add_special_tokens=False).input_ids
        if len(toks) == 1 and int(toks[0]) not in ids:
            ids.append(int(toks[0]))
    return ids


def render_prompt(tokenizer: Any, messages: Sequence[ChatMessage]) -> str:
    """The prompt text of ``messages``: the tokenizer's chat template with the generation prompt
    appended, or the contents joined where it has none."""
    payload = [m.model_dump() for m in messages]
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template(payload, tokenize=False, add_generation_prompt=True))
    return "\n\n".join(m["content"] for m in payload) + "\n"


def load_causal_lm(
    location: str,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    trust_remote_code: bool = False,
    adapter: str | Path | None = None,
    adapter_key: str | None = None,
    merge: bool = True,
) -> tuple[Any, Any]:
    """The tokenizer and ``AutoModelForCausalLM`` (eval mode, on ``device``) at ``location``: the
    one transformers loader of the read, so the verdicts and the probe's hidden states of one model
    on one device share its weights (the last two loaded are kept). ``adapter``: a PEFT adapter
    folder merged into the weights (``merge=False``: kept apart, a ``PeftModel`` whose adapter can
    be turned off); ``adapter_key`` (its content's identity, e.g.
    :attr:`~scopeguard.detection.read.adapter.TunedReader.key`) tells a retrained one apart."""
    folder = None if adapter is None else str(adapter)
    return _load(location, device, dtype, trust_remote_code, folder, adapter_key, merge)


@lru_cache(maxsize=2)
def _load(
    location: str,
    device: str,
    dtype: str,
    trust_remote_code: bool,
    adapter: str | None,
    adapter_key: str | None,
    merge: bool = True,
) -> tuple[Any, Any]:
    torch = require("torch", extra="probe", feature="reading with transformers")
    tf = require("transformers", extra="probe", feature="reading with transformers")
    try:
        tok = tf.AutoTokenizer.from_pretrained(location, trust_remote_code=trust_remote_code)
        model = tf.AutoModelForCausalLM.from_pretrained(
            location, **dtype_option(tf, getattr(torch, dtype)), trust_remote_code=trust_remote_code
        )
    except Exception as exc:
        raise ModelError(f"could not load causal LM {location!r} with transformers: {exc}") from None
    if adapter is not None:
        model = _with_peft(model, adapter, location, merge=merge)
    return tok, model.to(device).eval()


def _with_peft(model: Any, adapter: str, base: str, *, merge: bool) -> Any:
    """``model`` with the PEFT LoRA adapter in folder ``adapter`` (merged into its weights)."""
    peft = require("peft", extra="train", feature="reading a tuned reader with transformers")
    try:
        tuned = peft.PeftModel.from_pretrained(model, adapter)
        return tuned.merge_and_unload() if merge else tuned
    except Exception as exc:
        raise ModelError(
            f"could not apply the PEFT adapter {adapter} to {base} with transformers: {exc}. The adapter "
            "must be trained on this base model"
        ) from None


class TransformersVerdicts:
    """Verdict log-probs from ``AutoModelForCausalLM`` (see the module docstring).

    Args:
        model: a hub name, a local folder, a packaged GGUF name, a ``.gguf`` path, or a tuned
            reader's folder (its base with its PEFT adapter merged in).
        device: ``"cuda"``, ``"cpu"``, ``"cuda:1"``...; default: CUDA when available.
        batch_size: prompts per forward pass in :meth:`score_many`.
        max_tokens: the longest prompt accepted (default: the model's position limit).
        trust_remote_code: passed to transformers for models that need it.
        layers: hidden-state layers to return with each score (``VerdictScore.hidden``), numbered
            like ``hidden_states`` (``-1`` the final normed state); empty: log-probs only.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        device: str | None = None,
        batch_size: int = 8,
        max_tokens: int | None = None,
        trust_remote_code: bool = False,
        layers: Sequence[int] = (),
    ) -> None:
        self._torch = require("torch", extra="probe", feature="log-prob verdicts with transformers")
        require("transformers", extra="probe", feature="log-prob verdicts with transformers")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        torch = self._torch
        reader = tuned_reader(model) if Path(model).is_dir() else None
        self.model_name = str(model) if reader is None else reader.base
        self.adapter: Path | None = None if reader is None else reader.require_peft()
        self._key = None if reader is None else reader.key
        # a question-side adapter (see TunedReader.adapt): kept apart, off for instruction and documents
        self._question_side = reader is not None and reader.adapt == "question"
        self._template = "" if reader is None else reader.template
        weights = None if self.adapter is None else file_sha256(self.adapter / "adapter_model.safetensors")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size
        dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
        self.tokenizer: Any
        self.model: Any
        self.tokenizer, self.model = load_causal_lm(
            model_location(self.model_name),
            device=self.device,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            adapter=self.adapter,
            adapter_key=weights,
            merge=not self._question_side,
        )
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
        self.max_tokens = min(max_tokens or limit, limit)
        n_layer = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)
        self.layers = resolve_layers(layers, n_layer) if layers else ()
        self._prefix: tuple[tuple[int, ...], list[tuple[Any, Any]]] | None = None  # the last documents' state
        self._yes = verdict_token_ids(self.tokenizer, YES_WORDS)
        self._no = verdict_token_ids(self.tokenizer, NO_WORDS)
        if not self._yes or not self._no:
            raise ModelError(f"{self.model_name}: the tokenizer has no single token for Yes or No")

    @property
    def name(self) -> str:
        """The model's name (a ``.gguf`` file's stem), and ``+lora-...`` for a tuned reader."""
        base = Path(self.model_name).stem if self.model_name.endswith(".gguf") else self.model_name
        return base if self._key is None else f"{base}+{self._key}"

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return render_prompt(self.tokenizer, messages)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        return self.score_many([messages], progress=False)[0]

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]:
        torch = self._torch
        texts = [self.render(p) for p in prompts]
        encoded = [self.tokenizer(t, add_special_tokens=False).input_ids for t in texts]
        for ids in encoded:
            if len(ids) > self.max_tokens:
                raise DocumentTooLongError(
                    f"the verdict prompt ({len(ids)} tokens) does not fit {self.name} "
                    f"({self.max_tokens} tokens)",
                    n_tokens=len(ids),
                    limit=self.max_tokens,
                )
        if self._question_side:
            return [
                self._score_split(t, ids)
                for t, ids in progress_bar(
                    list(zip(texts, encoded, strict=True)), desc="verdicts", enabled=progress
                )
            ]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        out: list[VerdictScore | None] = [None] * len(texts)
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        yes = torch.tensor(self._yes)
        no = torch.tensor(self._no)
        for batch in progress_bar(batches, desc="verdicts", enabled=progress):
            enc = self.tokenizer(
                [texts[i] for i in batch], add_special_tokens=False, return_tensors="pt", padding=True
            )
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode():
                result = self.model(**enc, use_cache=False, output_hidden_states=bool(self.layers))
                logits = result.logits[:, -1, :].float()
                hidden = (
                    torch.stack([result.hidden_states[i][:, -1, :] for i in self.layers], 1).float().cpu()
                    if self.layers
                    else None
                )
            logp = torch.log_softmax(logits, dim=-1).cpu()
            lp_yes = torch.logsumexp(logp[:, yes], dim=-1)
            lp_no = torch.logsumexp(logp[:, no], dim=-1)
            for row, i in enumerate(batch):
                out[i] = VerdictScore(
                    float(lp_yes[row]),
                    float(lp_no[row]),
                    n_tokens=len(encoded[i]),
                    hidden=None if hidden is None else hidden[row].numpy(),
                )
        return [s for s in out if s is not None]

    def _score_split(self, text: str, ids: list[int]) -> VerdictScore:
        """One prompt read by a question-side adapter: instruction and documents by the bare base
        (their keys and values kept for the next prompt on them), the rest with the adapter."""
        torch = self._torch
        cut = question_cut(text, self._template)
        split = (
            len(ids) - 1
            if cut is None
            else split_tokens(self.tokenizer(text[:cut], add_special_tokens=False).input_ids, ids)
        )
        device = self.device
        with torch.inference_mode():
            key = tuple(ids[:split])
            if self._prefix is None or self._prefix[0] != key:
                self._prefix = None
                with self.model.disable_adapter():
                    out = self.model(
                        input_ids=torch.tensor([list(key)], device=device),
                        use_cache=True,
                        logits_to_keep=1,
                    )
                self._prefix = (key, cache_layers(out))
            cache = fresh_cache(self._prefix[1])
            kwargs = {cache_argument(self.model): cache}
            if cut is None:  # not the prompt it was trained on: the base model's read
                with self.model.disable_adapter():
                    result = self._suffix(ids, split, output_hidden=bool(self.layers), **kwargs)
            else:
                result = self._suffix(ids, split, output_hidden=bool(self.layers), **kwargs)
            logp = torch.log_softmax(result.logits[0, -1, :].float(), dim=-1).cpu()
            hidden = (
                torch.stack([result.hidden_states[i][0, -1, :] for i in self.layers], 0).float().cpu().numpy()
                if self.layers
                else None
            )
        return VerdictScore(
            float(torch.logsumexp(logp[self._yes], -1)),
            float(torch.logsumexp(logp[self._no], -1)),
            n_tokens=len(ids),
            hidden=hidden,
        )

    def _suffix(self, ids: list[int], split: int, *, output_hidden: bool, **kwargs: Any) -> Any:
        torch = self._torch
        return self.model(
            input_ids=torch.tensor([ids[split:]], device=self.device),
            position_ids=torch.arange(split, len(ids), device=self.device)[None],
            use_cache=True,
            output_hidden_states=output_hidden,
            logits_to_keep=1,
            **kwargs,
        )


def cache_argument(model: Any) -> str:
    """The forward argument a past cache goes in: ``cache`` (transformers 5) or ``past_key_values``
    (looked up once per model class: it is asked on every read)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cls: Any = type(base)
    return _cache_argument(cls)


@lru_cache(maxsize=16)
def _cache_argument(cls: Any) -> str:
    import inspect

    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def cache_layers(output: Any) -> list[tuple[Any, Any]]:
    """Each layer's (keys, values) of a forward pass's cache (old and new cache classes)."""
    cache = output["cache"] if "cache" in output else output["past_key_values"]
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


def fresh_cache(layers: Sequence[tuple[Any, Any]]) -> Any:
    """A new transformers cache holding ``layers`` (a forward appends to it; the tensors are kept)."""
    tf = require("transformers", extra="probe", feature="reading with transformers")
    cache = tf.DynamicCache()
    for index, (k, v) in enumerate(layers):
        cache.update(k, v, index)
    return cache


def _n_layers(config: Any) -> int | None:
    """Number of transformer blocks (text part of a multimodal config), or None if not stated."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    n = getattr(text, "num_hidden_layers", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def _check_layer(layer: int, n_layers: int, model: str) -> None:
    if not -(n_layers + 1) <= layer <= n_layers:
        raise ConfigurationError(
            f"layer {layer} is out of range for {model}, which has {n_layers} layers: valid layers are "
            f"{-(n_layers + 1)} to {n_layers} (-1 = last layer, 0 = embeddings output)"
        )


class TransformersHiddenStates:
    """The probe's input read by transformers: one layer's state of the last token
    (``output_hidden_states=True``; any layer, see :func:`_check_layer`)."""

    name = "transformers"

    def __init__(
        self, location: str, *, gguf: bool = False, n_threads: int | None = None, layer: int = -1
    ) -> None:
        torch = require("torch", extra="probe", feature="the probe's transformers backend")
        if n_threads:
            torch.set_num_threads(n_threads)
        self.location = str(converted_gguf_dir(location)) if gguf else location
        self.tokenizer, self.model = load_causal_lm(self.location)
        cfg = self.model.config
        self.n_layers = _n_layers(cfg)
        if self.n_layers is not None:
            _check_layer(layer, self.n_layers, self.location)
        self.layer = layer
        self.architecture = str(getattr(cfg, "model_type", "") or "")
        self.vocab_size = int(self.model.get_input_embeddings().weight.shape[0])
        self.context_length = int(getattr(cfg, "max_position_embeddings", 0) or 2048)
        tok = self.tokenizer
        adds_bos = tok.bos_token_id is not None and tok("x").input_ids[:1] == [tok.bos_token_id]
        self.bos_id: int | None = int(tok.bos_token_id) if adds_bos else None
        self.eos_id: int | None = int(tok.eos_token_id) if tok.eos_token_id is not None else None

    def tokenize(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def single_token_id(self, token: str) -> int | None:
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if tid is None or tid == self.tokenizer.unk_token_id or not 0 <= tid < self.vocab_size:
            return None
        return int(tid)

    def last_hidden(self, ids: list[int], prefix_len: int = 0) -> np.ndarray:
        """The last token's state at ``layer`` (one forward pass; ``prefix_len`` is not needed here)."""
        torch = require("torch", extra="probe", feature="the probe's transformers backend")
        with torch.no_grad():
            out = self.model(input_ids=torch.tensor([ids]), output_hidden_states=True, use_cache=False)
        states = out.hidden_states
        if self.n_layers is None:  # the config did not say; the output does
            _check_layer(self.layer, len(states) - 1, self.location)
        return np.asarray(states[self.layer][0, -1].float().numpy(), dtype=np.float32)
