"""The reading stage: an LLM's Yes/No answerability verdict read from next-token log-probs.

The model reads the instruction, the documents and the question once (template
``answerability_verdict``) and the score is its probability of answering "No" to "Does the
document contain the answer?". No text is generated, so there is nothing to parse and no
``unknown`` from a rambling reply. A calibration head (Platt scaling on the margin
log P(No) - log P(Yes), and a threshold, both fitted with document-grouped CV by
``scopeguard train-detector --detector logprob``) turns the margin into P(out of scope); the
packaged head belongs to the packaged Qwen2.5-Coder-1.5B (``scopeguard/_assets/logprob_head.json``),
read in process or served (``reader="openai:qwen2.5-coder-1.5b"`` against a server that serves it
under that name: :class:`~scopeguard.detection.read.openai.OpenAIVerdicts` sends the in-process
prompt text and takes the in-process name). With another model and no head of its own, the score
is the uncalibrated P(No | Yes or No), and ``scopeguard calibrate`` fits its thresholds.

Each retrieved document is asked on its own (the way the heads were fitted: one document per
question), and a long document is cut into passages of at most ``chunk_tokens`` at sentence
boundaries; the question counts as answered when any passage answers it (the lowest P(out of
scope) wins), and reading stops at the first passage that clearly answers it. More than
``max_chunks`` passages raise :class:`~scopeguard.errors.DocumentTooLongError` naming the limit.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopeguard.detection.detectors.base import BaseDetector
from scopeguard.detection.detectors.registry import renamed_options
from scopeguard.detection.head.logprob import LogProbHead, default_head_path, identity_head
from scopeguard.detection.read.base import VerdictScorer
from scopeguard.detection.read.reader import Reader
from scopeguard.detection.read.scorer import verdict_scorer
from scopeguard.errors import ConfigurationError
from scopeguard.types import Document, Label, Verdict

__all__ = ["LogProbDetector"]

logger = logging.getLogger(__name__)


class LogProbDetector(BaseDetector):
    """Answerability verdict from one forward pass of an LLM (see the module docstring).

    Args:
        reader: the reading model: a spec (``"local"``, ``"local:NAME_OR_FOLDER"`` for a GGUF or a
            tuned reader's folder, ``"transformers:NAME"``, ``"openai:MODEL"``), a chat model, or a
            :class:`~scopeguard.detection.read.VerdictScorer`. Default: the packaged
            Qwen2.5-Coder-1.5B with llama.cpp. (Named ``llm=`` before: that name raises, naming ``reader=``.)
        model: a calibration head (file or folder) from ``train-detector --detector logprob``;
            default: the packaged head when ``reader`` is the packaged model, else none.
        threshold: overrides the head's threshold on P(out of scope).
        chunk_tokens, max_chunks, stop_below: how documents are read
            (:class:`~scopeguard.detection.read.reader.Reader`).
    """

    name = "logprob"

    def __init__(
        self,
        *,
        reader: Any = None,
        model: str | Path | None = None,
        threshold: float | None = None,
        chunk_tokens: int = 1536,
        max_chunks: int = 32,
        stop_below: float = -4.0,
        **renamed: Any,
    ) -> None:
        renamed_options(self.name, renamed, {"llm": "reader"})
        scorer = verdict_scorer(reader)
        if model is not None:
            self.head = LogProbHead.load(model)
        else:
            packaged = LogProbHead.load(default_head_path()) if default_head_path().is_file() else None
            if packaged is not None and packaged.model == scorer.name:
                self.head = packaged
            else:
                self.head = identity_head(scorer.name)
                logger.info(
                    "no log-prob head for %s: P(out of scope) is the uncalibrated P(No); a served copy "
                    "of the packaged reader takes its head when served under the name %s "
                    "(or pass reads_as=); any other reader: scopeguard calibrate",
                    scorer.name,
                    None if packaged is None else packaged.model,
                )
        if self.head.model != scorer.name:
            logger.warning(
                "log-prob head was fitted on %s, the verdicts come from %s", self.head.model, scorer.name
            )
        self.threshold = self.head.threshold if threshold is None else float(threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {self.threshold}")
        self.reader = Reader(
            scorer,
            template=self.head.template,
            chunk_tokens=chunk_tokens,
            max_chunks=max_chunks,
            stop_below=stop_below,
        )

    @property
    def scorer(self) -> VerdictScorer:
        """The verdict scorer the reader asks."""
        return self.reader.scorer

    def identity(self) -> dict[str, str]:
        """What a calibration profile must match: the reading model (with its adapter) and the
        head's calibration of its margin (not its threshold, which a profile replaces)."""
        head = {k: v for k, v in self.head.to_dict().items() if k not in ("threshold", "info")}
        sha = hashlib.sha256(json.dumps(head, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return {"detector": self.name, "head": sha, "reader": self.reader.scorer.name}

    def load(self) -> None:
        """Load the verdict model now (otherwise it loads on the first question)."""
        self.reader.load()

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Read ``documents`` ahead of any question (:meth:`Reader.preread`); returns the passages read."""
        return self.reader.preread(documents, progress=progress)

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        best, n = self.reader.read(question, documents)
        score = self.head.p_oos(best.margin)
        label: Label = "out_of_scope" if score >= self.threshold else "in_scope"
        where = f" (best of {n} passages read)" if n > 1 else ""
        rationale = (
            f"{self.scorer.name} answers 'does the document contain the answer?' with "
            f"P(No)={best.p_no:.2f}{where}; P(out of scope) {score:.2f}"
        )
        return Verdict(label=label, score=score, rationale=rationale, llm_calls=n)
