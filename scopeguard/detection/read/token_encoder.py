"""MiniLM's contextual token vectors for the fast read (:mod:`scopeguard.detection.read.fast`).

:class:`TokenEncoder` embeds texts with the packaged MiniLM (plain-torch BERT, see
:mod:`scopeguard._bert`) and keeps the vectors of content pieces with their text and span. A
document's sentences are packed into one sequence (block-diagonal attention, positions restarting
per sentence) instead of being padded to a common length.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scopeguard._optional import require
from scopeguard.errors import ConfigurationError

__all__ = ["TokenEmbeddings", "TokenEncoder"]


@dataclass(frozen=True)
class TokenEmbeddings:
    """Last-layer token vectors (L2-normalised) of one text, with each piece's text and span."""

    vectors: np.ndarray
    pieces: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]


class TokenEncoder:
    """Contextual token embeddings from a sentence-transformers model (``minilm``, ``mpnet``, a path).

    Texts are tokenized together. With the packaged MiniLM (the plain-torch BERT of
    :mod:`scopeguard._bert`) consecutive texts are packed into sequences of at most
    ``pack_tokens`` tokens, attention kept within each text and positions restarting at each, so
    no padding is computed (a document's sentences padded to a common length cost 1.6x the work).
    Other models run sorted by length in batches of at most ``batch_size`` texts and
    ``batch_tokens`` padded positions. Neither changes a text's vectors beyond float rounding.
    """

    def __init__(
        self, name: str = "minilm", *, batch_size: int = 32, batch_tokens: int = 4096, pack_tokens: int = 256
    ) -> None:
        require("torch", extra="embeddings", feature="the fast detector")
        from scopeguard.models import token_model

        if batch_size < 1 or batch_tokens < 1 or pack_tokens < 1:
            raise ConfigurationError(
                "batch_size, batch_tokens and pack_tokens must be >= 1, got "
                f"{batch_size}, {batch_tokens}, {pack_tokens}"
            )
        self.name = name
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.pack_tokens = pack_tokens
        parts = token_model(name)  # the transformer alone: no sentence_transformers import
        self._tokenizer = parts.tokenizer
        self._model: Any = parts.model
        self._max_len = parts.max_seq_length
        self._special = set(self._tokenizer.all_special_ids)

    @staticmethod
    def max_similarity(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """For each row of ``queries``, the largest dot product with a row of ``keys``.

        Runs in torch (its intra-op thread setting applies) rather than numpy's BLAS, whose
        threads spin badly on an oversubscribed machine.
        """
        import torch

        if not len(queries) or not len(keys):
            return np.ones(len(queries), dtype=np.float32)
        with torch.inference_mode():
            sims = torch.from_numpy(queries).matmul(torch.from_numpy(keys).T)
            return sims.amax(dim=1).numpy()

    def _tokenize(self, texts: Sequence[str], *, offsets: bool) -> tuple[Any, list[list[int]]]:
        """The tokenizer's encoding of ``texts`` (unpadded) and each text's non-special positions."""
        enc = self._tokenizer(
            list(texts), truncation=True, max_length=self._max_len, return_offsets_mapping=offsets
        )
        keeps = [[j for j, t in enumerate(ids) if t not in self._special] for ids in enc["input_ids"]]
        return enc, keeps

    def _forward(self, enc: Any, keeps: list[list[int]]) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(index, hidden states of the kept positions)`` for every text of ``enc``, in
        batches of similar length (so not in input order)."""
        import torch

        ids: list[list[int]] = enc["input_ids"]
        packed = getattr(self._model, "packed", None)
        if callable(packed):  # the plain-torch BERT: no padding at all
            for group in self._packs([len(x) for x in ids]):
                hidden = packed([ids[i] for i in group])
                for i, h in zip(group, hidden, strict=True):
                    yield i, h.float().numpy()[keeps[i]]
            return
        names = [n for n in self._tokenizer.model_input_names if n in enc]
        pad = {
            "input_ids": self._tokenizer.pad_token_id or 0,
            "token_type_ids": getattr(self._tokenizer, "pad_token_type_id", 0),
        }
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            # grow the batch while it fits both budgets (sorted, so the last text is the longest)
            stop = start + 1
            while (
                stop < len(order)
                and stop - start < self.batch_size
                and len(ids[order[stop]]) * (stop + 1 - start) <= self.batch_tokens
            ):
                stop += 1
            batch = order[start:stop]
            width = len(ids[batch[-1]])
            inputs = {}
            for name in names:
                arr = np.full((len(batch), width), pad.get(name, 0), dtype=np.int64)
                for row, i in enumerate(batch):
                    arr[row, : len(ids[i])] = enc[name][i]
                inputs[name] = torch.from_numpy(arr)
            with torch.inference_mode():
                hidden = self._model(**inputs).last_hidden_state.float().numpy()
            for row, i in enumerate(batch):
                yield i, hidden[row, keeps[i]]
            start = stop

    def _packs(self, lengths: list[int]) -> list[list[int]]:
        """Consecutive texts grouped into packs of at most ``pack_tokens`` tokens (a longer text
        alone): attention within a pack costs its length squared, so packs stay short."""
        packs: list[list[int]] = []
        size = 0
        for i, n in enumerate(lengths):
            if not packs or size + n > self.pack_tokens:
                packs.append([])
                size = 0
            packs[-1].append(i)
            size += n
        return packs

    @staticmethod
    def _normalise(vecs: np.ndarray) -> np.ndarray:
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: Sequence[str]) -> list[TokenEmbeddings]:
        """The token vectors, pieces and spans of each text, in input order."""
        enc, keeps = self._tokenize(texts, offsets=True)
        vectors: dict[int, np.ndarray] = {}
        for i, vecs in self._forward(enc, keeps):
            vectors[i] = np.ascontiguousarray(self._normalise(vecs), dtype=np.float32)
        out: list[TokenEmbeddings] = []
        for i, keep in enumerate(keeps):
            ids, offsets = enc["input_ids"][i], enc["offset_mapping"][i]
            pieces = tuple(self._tokenizer.convert_ids_to_tokens([ids[j] for j in keep]))
            spans = tuple((int(offsets[j][0]), int(offsets[j][1])) for j in keep)
            out.append(TokenEmbeddings(vectors.pop(i), pieces, spans))
        return out

    def stack(self, texts: Sequence[str]) -> np.ndarray:
        """All token vectors of ``texts`` (L2-normalised) as one ``(n_tokens, dim)`` float32 array.

        Rows are written in place as the batches finish (no per-text arrays to concatenate);
        their order follows the length-sorted batches, which a maximum over rows ignores.
        """
        enc, keeps = self._tokenize(texts, offsets=False)
        dim = int(self._model.config.hidden_size)
        out = np.empty((sum(len(k) for k in keeps), dim), dtype=np.float32)
        row = 0
        for _, vecs in self._forward(enc, keeps):
            out[row : row + len(vecs)] = self._normalise(vecs)
            row += len(vecs)
        return out
