"""The reading stage: an LLM's Yes/No answerability verdict read from next-token log-probs.

The model reads the instruction, the documents and the question once (template
``answerability_verdict``) and the score is its probability of answering "No" to "Does the
document contain the answer?". No text is generated, so there is nothing to parse and no
``unknown`` from a rambling reply. A calibration head (Platt scaling on the margin
log P(No) - log P(Yes), and a threshold, both fitted with document-grouped CV by
``scopeguard train-detector --detector logprob``) turns the margin into P(out of scope); the
packaged head belongs to the packaged Qwen2.5-Coder-1.5B (``scopeguard/_assets/logprob_head.json``).
With another model and no head of its own, the score is the uncalibrated P(No | Yes or No).

Each retrieved document is asked on its own (the way the heads were fitted: one document per
question), and a long document is cut into passages of at most ``chunk_tokens`` at sentence
boundaries; the question counts as answered when any passage answers it (the lowest P(out of
scope) wins), and reading stops at the first passage that clearly answers it. More than
``max_chunks`` passages raise :class:`~scopeguard.errors.DocumentTooLongError` naming the limit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from scopeguard._sentences import split_sentences
from scopeguard.calibration import LogisticHead, head_file, read_head_file, write_head_file
from scopeguard.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError, DocumentTooLongError, ModelError
from scopeguard.llm.base import ChatMessage
from scopeguard.prompts import render, render_documents
from scopeguard.types import Document, Label, Verdict, as_documents
from scopeguard.verdicts import VerdictScore, VerdictScorer, verdict_scorer

__all__ = ["TEMPLATE", "LogProbDetector", "LogProbHead", "default_head_path", "verdict_messages"]

logger = logging.getLogger(__name__)

TEMPLATE = "answerability_verdict"
HEAD_FILE = "logprob_head.json"


def default_head_path() -> Path:
    """The calibration shipped in the package (``scopeguard/_assets/logprob_head.json``)."""
    return Path(str(resources.files("scopeguard") / "_assets" / HEAD_FILE))


_DOCUMENT_SLOT = "SCOPEGUARD-DOCUMENT-SLOT"  # where the documents go, to find the instruction before them
_QUESTION_SLOT = "SCOPEGUARD-QUESTION-SLOT"  # where the question goes, to find instruction + document


def verdict_messages(question: str, document_text: str, *, template: str = TEMPLATE) -> list[ChatMessage]:
    """The chat messages of one verdict prompt (one user turn)."""
    return [ChatMessage(role="user", content=render(template, document=document_text, question=question))]


@dataclass(frozen=True)
class LogProbHead:
    """Calibration of one verdict model: Platt scaling of the margin and a threshold."""

    model: str
    calibration: LogisticHead
    threshold: float = 0.5
    template: str = TEMPLATE
    info: dict[str, Any] = field(default_factory=dict)

    def p_oos(self, margin: float) -> float:
        return float(self.calibration.predict([margin])[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "logprob",
            "model": self.model,
            "template": self.template,
            "calibration": self.calibration.to_dict(),
            "threshold": self.threshold,
            "info": self.info,
        }

    def save(self, path: str | Path) -> Path:
        return write_head_file(path, HEAD_FILE, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LogProbHead:
        raw = read_head_file(path, HEAD_FILE, "log-prob head")
        p = head_file(path, HEAD_FILE)
        try:
            return cls(
                model=str(raw["model"]),
                calibration=LogisticHead.from_dict(raw["calibration"]),
                threshold=float(raw.get("threshold", 0.5)),
                template=str(raw.get("template", TEMPLATE)),
                info=dict(raw.get("info", {})),
            )
        except ModelError as exc:
            raise ModelError(f"{p}: {exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{p}: not a valid log-prob head ({type(exc).__name__}: {exc})") from None


def _identity_head(model: str) -> LogProbHead:
    """No calibration: P(out of scope) = P(No | Yes or No), threshold 0.5."""
    return LogProbHead(model=model, calibration=LogisticHead(("margin",), (0.0,), (1.0,), (1.0,), 0.0))


class LogProbDetector(BaseDetector):
    """Answerability verdict from one forward pass of an LLM (see the module docstring).

    Args:
        llm: an LLM spec (``"local:qwen2.5-coder-1.5b"``, ``"transformers:NAME"``,
            ``"openai:MODEL"``), a chat model, or a :class:`~scopeguard.verdicts.VerdictScorer`.
            Default: the packaged Qwen2.5-Coder-1.5B with llama.cpp.
        model: a calibration head (file or folder) from ``train-detector --detector logprob``;
            default: the packaged head when ``llm`` is the packaged model, else none.
        threshold: overrides the head's threshold on P(out of scope).
        chunk_tokens: the longest passage (in the model's tokens) asked at once.
        max_chunks: the most passages one check may need before it is refused.
        stop_below: stop reading further passages once one answers with a margin at or below
            this (log P(No) - log P(Yes) = -4: P(Yes) over 0.98).
    """

    name = "logprob"

    def __init__(
        self,
        *,
        llm: Any = None,
        model: str | Path | None = None,
        threshold: float | None = None,
        chunk_tokens: int = 1536,
        max_chunks: int = 32,
        stop_below: float = -4.0,
    ) -> None:
        if chunk_tokens < 64:
            raise ConfigurationError(f"chunk_tokens must be at least 64, got {chunk_tokens}")
        if max_chunks < 1:
            raise ConfigurationError(f"max_chunks must be >= 1, got {max_chunks}")
        self.scorer: VerdictScorer = verdict_scorer(llm)
        if model is not None:
            self.head = LogProbHead.load(model)
        else:
            packaged = LogProbHead.load(default_head_path()) if default_head_path().is_file() else None
            if packaged is not None and packaged.model == self.scorer.name:
                self.head = packaged
            else:
                self.head = _identity_head(self.scorer.name)
        if self.head.model != self.scorer.name:
            logger.warning(
                "log-prob head was fitted on %s, the verdicts come from %s", self.head.model, self.scorer.name
            )
        self.threshold = self.head.threshold if threshold is None else float(threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {self.threshold}")
        self.chunk_tokens = chunk_tokens
        self.max_chunks = max_chunks
        self.stop_below = stop_below
        self._primed = False

    def load(self) -> None:
        """Load the verdict model now (otherwise it loads on the first question)."""
        loader = getattr(self.scorer, "load", None)
        if callable(loader):
            loader()
        self._prime()

    def _prime(self) -> None:
        """Have a scorer with a prefix cache (llama.cpp) read the instruction once (see
        :meth:`LlamaCppVerdicts.prime`), from disk after the first process."""
        if self._primed:
            return
        self._primed = True
        prime = getattr(self.scorer, "prime", None)
        if callable(prime):
            prime(verdict_messages("?", _DOCUMENT_SLOT, template=self.head.template), upto=_DOCUMENT_SLOT)

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Read ``documents`` ahead of any question and keep the model's state after each passage,
        so that a later question about them costs only its own tokens; returns the passages read.

        With llama.cpp the states go to the scorer's ``state_dir`` (default
        ``$SCOPEGUARD_CACHE/llama-states``, about 30 KB per token with the 1.5B model: ~10 MB for a
        250-word passage), where every later process finds them: pre-read a fixed corpus once
        (offline, or on a bigger machine with the same model file and llama.cpp version) and
        online checks skip reading it. A scorer without a prefix cache reads nothing (returns 0).
        Verdicts equal a fresh read's up to llama.cpp's rounding (see :meth:`LlamaCppVerdicts.prime`).
        """
        from scopeguard._progress import progress_bar

        prime = getattr(self.scorer, "prime", None)
        if not callable(prime):
            return 0
        self._prime()
        passages = [p for d in as_documents(list(documents)) for p in self.passages([d])]
        done = 0
        for passage in progress_bar(passages, desc="pre-reading", enabled=progress):
            messages = verdict_messages(_QUESTION_SLOT, passage, template=self.head.template)
            done += bool(prime(messages, upto=_QUESTION_SLOT))
        return done

    def _lookup(self, passage: str) -> None:
        """Bring a pre-read passage's saved state into memory, if there is one (reads nothing)."""
        prime = getattr(self.scorer, "prime", None)
        if callable(prime):
            messages = verdict_messages(_QUESTION_SLOT, passage, template=self.head.template)
            prime(messages, upto=_QUESTION_SLOT, create=False)

    # -- passages ---------------------------------------------------------------------------
    def passages(self, documents: Sequence[Document]) -> list[str]:
        """The texts asked one at a time: each document whole when it fits ``chunk_tokens``, else
        its consecutive sentences packed into passages that do (in the documents' order)."""
        budget_chars = self.chunk_tokens * 3  # about 4 characters a token in English; keep a margin
        total = sum(len(d.text) for d in documents)
        if total > budget_chars * self.max_chunks * 2:  # refuse before any tokenising
            raise self._too_long(total)
        out: list[str] = []
        for doc in documents:
            whole = render_documents([doc])
            # a token is at least one character: short texts need no tokenizer
            if len(whole) <= self.chunk_tokens or self.scorer.count_tokens(whole) <= self.chunk_tokens:
                out.append(whole)
            else:
                current: list[str] = []
                size = 0
                for sentence in split_sentences(doc.text) or [doc.text]:
                    for i in range(0, len(sentence), budget_chars):
                        piece = sentence[i : i + budget_chars]
                        if current and size + len(piece) > budget_chars:
                            out.append(" ".join(current))
                            current, size = [], 0
                        current.append(piece)
                        size += len(piece) + 1
                if current:
                    out.append(" ".join(current))
            if len(out) > self.max_chunks:
                raise self._too_long(total)
        return out

    def _too_long(self, n_chars: int) -> DocumentTooLongError:
        limit = self.chunk_tokens * self.max_chunks
        return DocumentTooLongError(
            f"the documents ({n_chars:,} characters) need more than {self.max_chunks} passages of "
            f"{self.chunk_tokens} tokens (about {limit:,} tokens in all): the log-prob detector's limit. "
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
        the detector's ``stop_below``), where no later passage can change the decision.
        ``template``: another verdict prompt than the head's (one that starts like it, such as
        ``answerability_inference``, reads only its own last tokens after the head's).
        """
        template = template or self.head.template
        stop = self.stop_below if stop_below is None else stop_below
        passages = self.passages(as_documents(list(documents)))
        self._prime()
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
        """Each passage of ``documents`` in turn, read for ``question``: the scores of the head's
        prompt, then of each of ``templates`` (prompts that start like it: each reads only its own
        last tokens after the first), all against the one state of that passage. Stop iterating to
        stop reading."""
        passages = self.passages(as_documents(list(documents)))
        self._prime()
        for passage in passages:
            self._lookup(passage)
            yield [
                self.scorer.score(verdict_messages(question, passage, template=t))
                for t in (self.head.template, *templates)
            ]

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        best, n = self.read(question, documents)
        score = self.head.p_oos(best.margin)
        label: Label = "out_of_scope" if score >= self.threshold else "in_scope"
        where = f" (best of {n} passages read)" if n > 1 else ""
        rationale = (
            f"{self.scorer.name} answers 'does the document contain the answer?' with "
            f"P(No)={best.p_no:.2f}{where}; P(out of scope) {score:.2f}"
        )
        return Verdict(label=label, score=score, rationale=rationale, llm_calls=n)
