"""The reading model in torch for tuning: base + LoRA, the verdict prompt, the verdict margin.

The prompt is the detectors' own (the verdict template through the tokenizer's chat template, as
:class:`~scopeguard.detection.read.transformers.TransformersVerdicts` renders it, which is the
template llama.cpp reads from the GGUF), and the margin is theirs: log P(No) - log P(Yes) of the
next token, every single-token form of each word summed. The loss is the logistic loss of that
margin against the label (No for out of scope), so training moves exactly the number the detectors
read, and nothing else of the model's output is trained.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from scopeguard._optional import dtype_option, require
from scopeguard.detection.read.adapter import TunedReader, tuned_reader
from scopeguard.detection.read.base import NO_WORDS, YES_WORDS
from scopeguard.detection.read.reader import question_cut, split_tokens, verdict_messages
from scopeguard.detection.read.transformers import (
    cache_argument,
    cache_layers,
    fresh_cache,
    model_location,
    render_prompt,
    verdict_token_ids,
)
from scopeguard.errors import ConfigurationError, ModelError

__all__ = ["ADAPT_MODES", "DTYPES", "TunableReader", "load_tunable"]

#: where the adapter acts: on every token of the prompt ("all"), or only from the question on
#: ("question": instruction and documents are read by the bare base, so their states are the base
#: model's, computed once per document and shared with it; see :func:`question_cut`)
ADAPT_MODES = ("all", "question")
#: the base's weights while tuning ("auto": bfloat16 on CUDA, float32 on the CPU); the adapter's
#: own weights stay float32 (PEFT's default)
DTYPES = ("auto", "float32", "bfloat16")

logger = logging.getLogger(__name__)


def _torch() -> Any:
    return require("torch", extra="train", feature="training a reader")


@dataclass
class TunableReader:
    """The tokenizer and the LoRA-wrapped model, with the verdict words' token ids."""

    tokenizer: Any
    model: Any
    device: str
    yes: list[int]
    no: list[int]
    template: str
    #: blocks below this one carry no adapter: their output is computed once per prompt and kept
    #: (:meth:`lower`), and updates and validation read only the blocks above (:meth:`upper_margin`)
    split: int = 0
    #: one of :data:`ADAPT_MODES`
    adapt: str = "all"

    def prompt(self, question: str, passage: str) -> tuple[list[int], int]:
        """The prompt's token ids and how many of them the bare base reads (0 unless
        :attr:`adapt` is ``"question"``: the tokens before the question, see :func:`split_tokens`)."""
        text = render_prompt(self.tokenizer, verdict_messages(question, passage, template=self.template))
        ids = list(self.tokenizer(text, add_special_tokens=False).input_ids)
        if self.adapt != "question":
            return ids, 0
        cut = question_cut(text, self.template)
        if cut is None:
            raise ConfigurationError(f"the prompt {self.template!r} has no question after its documents")
        prefix = self.tokenizer(text[:cut], add_special_tokens=False).input_ids
        return ids, split_tokens(prefix, ids)

    def prefix_state(self, ids: Sequence[int]) -> list[tuple[Any, Any]]:
        """The bare base's keys and values of every layer after ``ids`` (no gradients, no adapter):
        the documents' state a question-side adapter reads from."""
        torch = _torch()
        with torch.no_grad(), self.model.disable_adapter():
            out = self.model(
                input_ids=torch.tensor([list(ids)], device=self.device),
                position_ids=torch.arange(len(ids), device=self.device)[None],
                use_cache=True,
                logits_to_keep=1,
            )
        return [(k.detach(), v.detach()) for k, v in cache_layers(out)]

    def suffix_margin(self, state: Sequence[tuple[Any, Any]], ids: Sequence[int]) -> Any:
        """The margin of a prompt whose first tokens are in ``state`` (:meth:`prefix_state`) and
        whose remaining tokens are ``ids``, read with the adapter (gradients when enabled)."""
        torch = _torch()
        cache = fresh_cache(state)
        past = int(state[0][0].shape[-2])
        out = self.model(
            input_ids=torch.tensor([list(ids)], device=self.device),
            position_ids=torch.arange(past, past + len(ids), device=self.device)[None],
            use_cache=True,
            **{cache_argument(self.model): cache},
            logits_to_keep=1,
        )
        logits = out.logits[0, -1, :].float()
        return torch.logsumexp(logits[self.no], -1) - torch.logsumexp(logits[self.yes], -1)

    def margins(self, batch: Sequence[Sequence[int]]) -> Any:
        """log P(No) - log P(Yes) at the end of each prompt (a tensor with gradients when enabled).

        Prompts are right-padded and each is read at its own last token, so each is read as it
        would be alone. Not left-padded: a padded position at the start of a row attends to
        nothing, and CUDA's fused attention returns NaN gradients for such rows (seen on an H200,
        bf16: the first NaN update came after 4 to 209 updates, and every later one was NaN)."""
        torch = _torch()
        longest = max(len(ids) for ids in batch)
        pad = int(self.tokenizer.pad_token_id or 0)
        ids = torch.full((len(batch), longest), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = torch.tensor(list(seq))
            mask[row, : len(seq)] = 1
        ends = sorted({len(seq) - 1 for seq in batch})
        column = {end: i for i, end in enumerate(ends)}
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=torch.arange(longest, device=self.device)[None].expand(len(batch), -1),
            use_cache=False,
            logits_to_keep=torch.tensor(ends, device=self.device),
        )
        picks = torch.tensor([column[len(seq) - 1] for seq in batch], device=self.device)
        logits = out.logits[torch.arange(len(batch), device=self.device), picks].float()
        logp = torch.log_softmax(logits, dim=-1)
        yes = torch.logsumexp(logp[:, self.yes], dim=-1)
        no = torch.logsumexp(logp[:, self.no], dim=-1)
        return no - yes

    def _inner(self) -> Any:
        """The decoder stack (``model.model`` under the PEFT and causal-LM wrappers)."""
        inner = self.model.get_base_model()
        return getattr(inner, "model", inner)

    @contextlib.contextmanager
    def _blocks(self, part: slice, *, norm: bool = True) -> Iterator[None]:
        torch = _torch()
        inner = self._inner()
        layers, final_norm = inner.layers, inner.norm
        inner.layers = torch.nn.ModuleList(list(layers)[part])
        if not norm:
            inner.norm = torch.nn.Identity()
        try:
            yield
        finally:
            inner.layers, inner.norm = layers, final_norm

    def lower(self, ids: Sequence[int]) -> Any:
        """The output of the blocks below :attr:`split` for one prompt (no gradients), shape (T, H)."""
        torch = _torch()
        with torch.no_grad(), self._blocks(slice(0, self.split), norm=False):
            out = self._inner()(
                input_ids=torch.tensor([list(ids)], device=self.device),
                position_ids=torch.arange(len(ids), device=self.device)[None],
                use_cache=False,
            )
        return out.last_hidden_state[0].detach()

    def upper_margin(self, lower: Any) -> Any:
        """The margin read from a prompt's :meth:`lower` output through the blocks above the split
        (with the adapter; gradients when enabled): the same number as :meth:`margins`."""
        torch = _torch()
        with self._blocks(slice(self.split, None)):
            out = self.model(
                inputs_embeds=lower[None],
                position_ids=torch.arange(lower.shape[0], device=self.device)[None],
                use_cache=False,
                logits_to_keep=1,
            )
        logits = out.logits[0, -1, :].float()
        return torch.logsumexp(logits[self.no], -1) - torch.logsumexp(logits[self.yes], -1)

    def trainable(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def lora_state(self) -> dict[str, Any]:
        """The adapter's weights (PEFT names), detached on the CPU."""
        peft = require("peft", extra="train", feature="training a reader")
        state = peft.get_peft_model_state_dict(self.model)
        return {k: v.detach().cpu().clone() for k, v in state.items()}

    def load_lora_state(self, state: dict[str, Any]) -> None:
        peft = require("peft", extra="train", feature="training a reader")
        result = peft.set_peft_model_state_dict(self.model, state)
        missing = [k for k in getattr(result, "unexpected_keys", []) if "lora" in k]
        if missing:
            raise ModelError(f"the checkpoint's adapter does not fit this model: {missing[:3]}")


def load_tunable(
    base: str,
    *,
    rank: int,
    alpha: float,
    dropout: float,
    targets: Sequence[str],
    template: str,
    top_layers: int = 0,
    adapt: str = "all",
    device: str | None = None,
    dtype: str = "auto",
    seed: int = 0,
    trust_remote_code: bool = False,
) -> tuple[TunableReader, str, TunedReader | None]:
    """The base model with a fresh LoRA (``base`` a model name), or with a tuned reader's adapter
    to train further (``base`` a tuned reader's folder: its own rank, alpha and targets are kept).
    ``top_layers``: adapt only the top N decoder blocks (0: all), so gradients stop below them
    (cheaper updates). ``adapt``: one of :data:`ADAPT_MODES` (a tuned reader started from keeps
    its own). ``dtype``: one of :data:`DTYPES`. Returns the reader, the base model's name and the
    tuned reader started from (or ``None``)."""
    torch = _torch()
    tf = require("transformers", extra="train", feature="training a reader")
    peft = require("peft", extra="train", feature="training a reader")
    start = tuned_reader(base)
    base_name = start.base if start is not None else base
    if start is not None:
        adapt = str(start.meta.get("adapt", "all"))
    if adapt not in ADAPT_MODES:
        raise ConfigurationError(f"adapt must be one of {ADAPT_MODES}, got {adapt!r}")
    if adapt == "question" and top_layers:
        raise ConfigurationError("adapt='question' reads each document once already: drop top_layers")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dtype not in DTYPES:
        raise ConfigurationError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    location = model_location(base_name)
    try:
        tokenizer = tf.AutoTokenizer.from_pretrained(location, trust_remote_code=trust_remote_code)
        model = tf.AutoModelForCausalLM.from_pretrained(
            location, **dtype_option(tf, getattr(torch, dtype)), trust_remote_code=trust_remote_code
        )
    except Exception as exc:
        raise ModelError(f"could not load {base_name!r} for training with transformers: {exc}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(seed)
    if start is not None:
        model = peft.PeftModel.from_pretrained(model, str(start.require_peft()), is_trainable=True)
    else:
        names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
        unknown = [t for t in targets if t not in names]
        if unknown:
            raise ConfigurationError(f"{base_name} has no module(s) {unknown} to adapt")
        n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
        if top_layers < 0 or (n_layers and top_layers > n_layers):
            raise ConfigurationError(f"top_layers must be in 0..{n_layers} for {base_name}, got {top_layers}")
        config = peft.LoraConfig(
            layers_to_transform=list(range(n_layers - top_layers, n_layers)) if top_layers else None,
            r=rank,
            lora_alpha=alpha,
            lora_dropout=dropout,
            target_modules=list(targets),
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = peft.get_peft_model(model, config)
    model.to(device)
    split = 0
    if (
        top_layers
        and start is None
        and not getattr(model.get_base_model().model, "has_sliding_layers", False)
    ):
        split = n_layers - top_layers  # the blocks below carry no adapter: read them once
    yes, no = verdict_token_ids(tokenizer, YES_WORDS), verdict_token_ids(tokenizer, NO_WORDS)
    if not yes or not no:
        raise ModelError(f"{base_name}: the tokenizer has no single token for Yes or No")
    return TunableReader(tokenizer, model, device, yes, no, template, split, adapt), base_name, start
