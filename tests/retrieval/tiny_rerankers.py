"""Tiny random rerankers built offline (a word-level tokenizer and a few-unit model) for plumbing tests."""

from __future__ import annotations

from pathlib import Path

import pytest

WORDS = (
    "query document relevant true false the zorbian lighthouse was painted green in 1931 by harbour guild "
    "marlow pies are baked with quince and served cold at spring fair of zorbia meets every tuesday "
    "beside what colour is who"
)


def _tokenizer(pair_template: bool):  # type: ignore[no-untyped-def]
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "</s>"]
    vocab = {w: i for i, w in enumerate([*special, *dict.fromkeys(WORDS.split())])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.Lowercase()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    if pair_template:
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
        )
    else:
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="$A </s>", special_tokens=[("</s>", vocab["</s>"])]
        )
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>"
    ), len(vocab)


def _save(root: Path, model_class: str, config_class: str, *, pair_template: bool, **config: object) -> Path:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    tokenizer, n = _tokenizer(pair_template=pair_template)
    model_config = getattr(transformers, config_class)(vocab_size=n, pad_token_id=0, **config)
    getattr(transformers, model_class)(model_config).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


def build_cross_encoder(root: Path, *, num_labels: int = 1) -> Path:
    """A 2-layer, 16-unit BertForSequenceClassification saved under ``root``."""
    return _save(
        root,
        "BertForSequenceClassification",
        "BertConfig",
        pair_template=True,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=num_labels,
        initializer_range=0.5,  # scores far enough apart to tell orders apart
    )


def build_monot5(root: Path) -> Path:
    """A 1-layer, 16-unit T5ForConditionalGeneration saved under ``root`` ("</s>" is id 4)."""
    return _save(
        root,
        "T5ForConditionalGeneration",
        "T5Config",
        pair_template=False,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        eos_token_id=4,
        decoder_start_token_id=0,
    )
