"""Reading (question, documents) with a verdict scorer: passages, the verdict prompt, kept states.

A :class:`Reader` asks a :class:`~scopeguard.detection.read.base.VerdictScorer` the verdict prompt
(``answerability_verdict`` unless told otherwise) about each passage of the documents: each
document whole when it fits ``chunk_tokens``, else its consecutive sentences packed into passages
that do (:meth:`Reader.split` gives each passage with the index of its document). It stops at
the first passage that clearly answers the question (``stop_below``) and refuses more than
``max_chunks`` passages with :class:`~scopeguard.errors.DocumentTooLongError` naming the limit.
With a scorer that keeps prompt states (llama.cpp) the instruction is read once per model
(:meth:`Reader.prime`) and a document once per process, or once ever with :meth:`Reader.preread`;
further prompts that start like the verdict prompt (``read_passage``'s ``templates``) read only
their own last tokens against the same document state.

Every reading detector (``logprob``, ``default``) and the signal extraction for training
(:func:`scopeguard.detection.signals.extract_signals`) read through this one class.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from scopeguard._sentences import split_sentences
from scopeguard.detection.read._verdict_prompt import (
    _DOCUMENT_SLOT,
    _QUESTION_SLOT,
    TEMPLATE,
    question_cut,
    split_tokens,
    verdict_messages,
)
from scopeguard.detection.read.base import VerdictScore, VerdictScorer
from scopeguard.detection.read.scorer import verdict_scorer
from scopeguard.errors import ConfigurationError, DocumentTooLongError
from scopeguard.prompts import render_documents
from scopeguard.types import Document, as_documents

__all__ = ["TEMPLATE", "Passage", "Reader", "question_cut", "split_tokens", "verdict_messages"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Passage:
    """One text the reader asks about (:meth:`Reader.split`): ``text`` as the prompt shows it, and
    ``document``, the index of the document it comes from in the documents split."""

    text: str
    document: int


class Reader:
    """Reads questions against documents with one verdict scorer (see the module docstring).

    Args:
        scorer: a :class:`~scopeguard.detection.read.base.VerdictScorer`, or an LLM spec or chat
            model for :func:`~scopeguard.detection.read.scorer.verdict_scorer` (default: the
            packaged Qwen2.5-Coder-1.5B with llama.cpp).
        template: the verdict prompt's template name.
        chunk_tokens: the longest passage (in the model's tokens) asked at once.
        max_chunks: the most passages one check may need before it is refused.
        stop_below: stop reading further passages once one answers with a margin at or below
            this (log P(No) - log P(Yes) = -4: P(Yes) over 0.98).
    """

    def __init__(
        self,
        scorer: Any = None,
        *,
        template: str = TEMPLATE,
        chunk_tokens: int = 1536,
        max_chunks: int = 32,
        stop_below: float = -4.0,
    ) -> None:
        if chunk_tokens < 64:
            raise ConfigurationError(f"chunk_tokens must be at least 64, got {chunk_tokens}")
        if max_chunks < 1:
            raise ConfigurationError(f"max_chunks must be >= 1, got {max_chunks}")
        self.scorer: VerdictScorer = verdict_scorer(scorer)
        self.template = template
        self.chunk_tokens = chunk_tokens
        self.max_chunks = max_chunks
        self.stop_below = stop_below
        self._primed = False

    def load(self) -> None:
        """Load the verdict model now (otherwise it loads on the first question)."""
        loader = getattr(self.scorer, "load", None)
        if callable(loader):
            loader()
        self.prime()

    def prime(self) -> None:
        """Have a scorer with a prefix cache (llama.cpp) read the instruction once (see
        :meth:`LlamaCppVerdicts.prime`), from disk after the first process."""
        if self._primed:
            return
        self._primed = True
        prime = getattr(self.scorer, "prime", None)
        if callable(prime):
            prime(verdict_messages("?", _DOCUMENT_SLOT, template=self.template), upto=_DOCUMENT_SLOT)

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Read ``documents`` ahead of any question and keep the model's state after each passage,
        so that a later question about them costs only its own tokens; returns the passages read.

        With llama.cpp the states go to the scorer's ``state_dir`` (default
        ``$SCOPEGUARD_CACHE/llama-states``, about 28 KB per token with the 1.5B model's f16 KV
        cache: ~9 MB for a 250-word passage; 15 KB with ``kv_type="q8_0"``), where every later
        process finds them: pre-read a fixed corpus once (offline, or on a bigger machine with the
        same model file, llama.cpp version and KV type) and online checks skip reading it. A scorer
        without a prefix cache reads nothing (returns 0). Verdicts equal a fresh read's up to
        llama.cpp's rounding (see :meth:`LlamaCppVerdicts.prime`).
        """
        from scopeguard._progress import progress_bar

        prime = getattr(self.scorer, "prime", None)
        if not callable(prime):
            return 0
        self.prime()
        passages = [p for d in as_documents(list(documents)) for p in self.passages([d])]
        done = 0
        for passage in progress_bar(passages, desc="pre-reading", enabled=progress):
            messages = verdict_messages(_QUESTION_SLOT, passage, template=self.template)
            done += bool(prime(messages, upto=_QUESTION_SLOT))
        return done

    def _lookup(self, passage: str) -> None:
        """Bring a pre-read passage's saved state into memory, if there is one (reads nothing)."""
        prime = getattr(self.scorer, "prime", None)
        if callable(prime):
            messages = verdict_messages(_QUESTION_SLOT, passage, template=self.template)
            prime(messages, upto=_QUESTION_SLOT, create=False)

    # -- passages ---------------------------------------------------------------------------
    def passages(self, documents: Sequence[Document]) -> list[str]:
        """The texts asked one at a time: each document whole when it fits ``chunk_tokens``, else
        its consecutive sentences packed into passages that do (in the documents' order)."""
        return [p.text for p in self.split(documents)]

    def split(self, documents: Sequence[Document]) -> list[Passage]:
        """The passages asked one at a time (the texts of :meth:`passages`), each with the index
        of its document in ``documents``."""
        budget_chars = self.chunk_tokens * 3  # about 4 characters a token in English; keep a margin
        total = sum(len(d.text) for d in documents)
        if total > budget_chars * self.max_chunks * 2:  # refuse before any tokenising
            raise self._too_long(total)
        out: list[Passage] = []
        for index, doc in enumerate(documents):
            whole = render_documents([doc])
            # a token is at least one character: short texts need no tokenizer
            if len(whole) <= self.chunk_tokens or self.scorer.count_tokens(whole) <= self.chunk_tokens:
                out.append(Passage(whole, index))
            else:
                current: list[str] = []
                size = 0
                for sentence in split_sentences(doc.text) or [doc.text]:
                    for i in range(0, len(sentence), budget_chars):
                        piece = sentence[i : i + budget_chars]
                        if current and size + len(piece) > budget_chars:
                            out.append(Passage(" ".join(current), index))
                            current, size = [], 0
                        current.append(piece)
                        size += len(piece) + 1
                if current:
                    out.append(Passage(" ".join(current), index))
            if len(out) > self.max_chunks:
                raise self._too_long(total)
        return out

    def _too_long(self, n_chars: int) -> DocumentTooLongError:
        limit = self.chunk_tokens * self.max_chunks
        return DocumentTooLongError(
            f"the documents ({n_chars:,} characters) need more than {self.max_chunks} passages of "
            f"{self.chunk_tokens} tokens (about {limit:,} tokens in all): the reader's limit. "
            "Pass fewer or shorter documents, or raise max_chunks / chunk_tokens.",
            n_tokens=n_chars // 4,
            limit=limit,
        )

    # -- scoring ----------------------------------------------------------------------------
    def read(
        self,
        question: str,
        documents: Sequence[Document | str],
        *,
        stop_below: float | None = None,
        template: str | None = None,
    ) -> tuple[VerdictScore, int]:
        """The verdict log-probs of the passage that best answers ``question``, and the passages read.

        Reading stops at the first passage whose margin is at or below ``stop_below`` (default:
        the reader's ``stop_below``), where no later passage can change the decision.
        ``template``: another verdict prompt than the head's (one that starts like it, such as
        ``answerability_inference``, reads only its own last tokens after the head's).
        """
        template = template or self.template
        stop = self.stop_below if stop_below is None else stop_below
        passages = self.passages(as_documents(list(documents)))
        self.prime()
        best: VerdictScore | None = None
        read = 0
        for passage in passages:
            self._lookup(passage)
            score = self.scorer.score(verdict_messages(question, passage, template=template))
            read += 1
            if best is None or score.margin < best.margin:
                best = score
            if best.margin <= stop:  # clearly answered here: the rest cannot change that
                break
        assert best is not None  # as_documents guarantees at least one document
        return best, read

    def read_passages(
        self, question: str, documents: Sequence[Document | str], templates: Sequence[str] = ()
    ) -> Iterator[list[VerdictScore]]:
        """Each passage of ``documents`` in turn, read for ``question`` (:meth:`read_passage`). Stop
        iterating to stop reading."""
        passages = self.passages(as_documents(list(documents)))
        for passage in passages:
            yield self.read_passage(question, passage, templates)

    def read_set(
        self, question: str, passages: Sequence[str], templates: Sequence[str] = ()
    ) -> list[VerdictScore]:
        """``question`` read once against ``passages`` (texts of :meth:`passages`, split by the
        caller as for :meth:`read_passage`) together: the scores of the head's prompt, then of each
        of ``templates``, each one verdict for the whole set. The passages' kept states are joined
        (unread ones are read and kept first), so a question about known passages costs its own
        tokens once, not once per passage. The passages are joined in reverse, the first (the best
        ranked) last, next to the question. Needs a scorer that joins kept states (llama.cpp's
        :meth:`~scopeguard.detection.read.llamacpp.LlamaCppVerdicts.score_set`); its margins are a
        set's, scored by a head fitted on set reads."""
        score_set = getattr(self.scorer, "score_set", None)
        if not callable(score_set):
            raise ConfigurationError(
                f"{self.scorer.name} cannot read passages as a set (only a llama.cpp reader joins kept "
                "states): read passage by passage"
            )
        # the first passage (a retriever's best) is joined last, next to the question, where a set
        # read weighs it most (``benchmarks/set_reads.py``: the worst left-out set's AUROC 0.758 so,
        # 0.736 with the first passage first)
        joined = list(passages)[::-1]
        self.prime()
        return [
            score_set([verdict_messages(question, p, template=t) for p in joined], template=t)
            for t in (self.template, *templates)
        ]

    def read_passage(self, question: str, passage: str, templates: Sequence[str] = ()) -> list[VerdictScore]:
        """``passage`` (one of :meth:`split`'s texts) read for ``question``: the scores of the head's
        prompt, then of each of ``templates`` (prompts that start like it: each reads only its own
        last tokens after the first), all against the one state of that passage."""
        self.prime()
        self._lookup(passage)
        return [
            self.scorer.score(verdict_messages(question, passage, template=t))
            for t in (self.template, *templates)
        ]
