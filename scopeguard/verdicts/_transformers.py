"""Log-prob verdicts from any Hugging Face causal LM with transformers, batched, CPU or CUDA.

``TransformersVerdicts("Qwen/Qwen2.5-1.5B-Instruct")`` (a hub name or a local folder; a
packaged GGUF name or a ``.gguf`` path is converted to safetensors once, see
:func:`scopeguard.models.converted_gguf_dir`). Prompts go through the
tokenizer's chat template; batches are left-padded so the last position is every prompt's own
next token. On CUDA the model runs in bfloat16, on the CPU in float32. ``layers=(...)`` returns
those layers' hidden states at the verdict position with each score (``hidden_states[layer]``,
from the same forward pass).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopeguard._optional import require
from scopeguard._progress import progress_bar
from scopeguard.errors import ConfigurationError, DocumentTooLongError, ModelError
from scopeguard.llamacpp import resolve_layers
from scopeguard.llm.base import ChatMessage
from scopeguard.verdicts.base import NO_WORDS, YES_WORDS, VerdictScore, variant_strings

__all__ = ["TransformersVerdicts"]

logger = logging.getLogger(__name__)


def _location(model: str) -> str:
    from scopeguard.models import available_ggufs, local_gguf

    if model in available_ggufs() or model.endswith(".gguf"):
        from scopeguard.models import converted_gguf_dir

        return str(converted_gguf_dir(local_gguf(model)))
    return model


class TransformersVerdicts:
    """Verdict log-probs from ``AutoModelForCausalLM`` (see the module docstring).

    Args:
        model: a hub name, a local folder, a packaged GGUF name or a ``.gguf`` path.
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
        tf = require("transformers", extra="probe", feature="log-prob verdicts with transformers")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        torch = self._torch
        self.model_name = str(model)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size
        location = _location(self.model_name)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        try:
            self.tokenizer: Any = tf.AutoTokenizer.from_pretrained(
                location, trust_remote_code=trust_remote_code
            )
            self.model: Any = tf.AutoModelForCausalLM.from_pretrained(
                location, torch_dtype=dtype, trust_remote_code=trust_remote_code
            )
        except Exception as exc:
            raise ModelError(
                f"could not load causal LM {self.model_name!r} with transformers: {exc}"
            ) from None
        self.model.to(self.device).eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
        self.max_tokens = min(max_tokens or limit, limit)
        n_layer = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)
        self.layers = resolve_layers(layers, n_layer) if layers else ()
        self._yes = self._ids(YES_WORDS)
        self._no = self._ids(NO_WORDS)
        if not self._yes or not self._no:
            raise ModelError(f"{self.model_name}: the tokenizer has no single token for Yes or No")

    @property
    def name(self) -> str:
        return Path(self.model_name).stem if self.model_name.endswith(".gguf") else self.model_name

    def _ids(self, words: Sequence[str]) -> list[int]:
        ids: list[int] = []
        for text in variant_strings(words):
            toks = self.tokenizer(text, add_special_tokens=False).input_ids
            if len(toks) == 1 and int(toks[0]) not in ids:
                ids.append(int(toks[0]))
        return ids

    def render(self, messages: Sequence[ChatMessage]) -> str:
        payload = [m.model_dump() for m in messages]
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(payload, tokenize=False, add_generation_prompt=True)
            )
        return "\n\n".join(m["content"] for m in payload) + "\n"

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
