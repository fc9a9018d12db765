"""The shipped ``default`` detector: one read of each document, signals from it, one learned head.

1. **Read.** The packaged Qwen2.5-Coder-1.5B (llama.cpp) reads the instruction, the document and
   the question, and is asked "Does the document contain the answer?" (``answerability_verdict``).
   From that one decode come the Yes/No log-probabilities (``margin`` = log P(No) - log P(Yes))
   and the hidden state at the verdict position of one layer (the paper's probe, ELOQ section
   4.2.1, read from the same pass through llama.cpp's eval callback: no second read).
2. **Optionally, a second question against the same document state.** ``answerability_inference``
   asks whether a careful reader could answer from what the document states or clearly implies; it
   shares everything with the first prompt but its last line, so it costs only those tokens
   (``inference_margin``). A head may use it; the packaged one does not (it did not help any
   left-out dataset).
3. **Head.** A logistic regression over the chosen signals gives P(out of scope); a threshold
   gives the label. Which signals, which layer and how much regularisation were chosen by the
   worst leave-one-dataset-out score over the shared datasets, not by their mean
   (``benchmarks/studies/reader_generalisation.py``); the packaged head's card
   (``scopeguard/_assets/default_head.md``) lists the data and the figures, and
   ``scopeguard train-detector --detector default`` reproduces it.

There is no word-overlap stage any more: the cascade it fed read 99.9% of the questions anyway,
and the overlap features lower the left-out SQuAD score (0.743 with the margin alone, 0.726 with
them). ``Verdict.uncovered`` still lists the question's content words the documents lack, from
plain stems, only when the label is out of scope.

Each retrieved document (or passage of a long one) is read on its own; the question counts as
answered when any passage answers it (the lowest P(out of scope) wins), and reading stops at a
passage that answers it clearly. A document shorter than the head's short-passage limit (a
snippet, a sentence) gives the reader little to go on: its P(out of scope) is lowered by the head's
shift first (:class:`~scopeguard.detection.head.default.ShortPassages`).

``read="set"`` reads the question once against all the passages instead (their kept states joined,
:meth:`~scopeguard.detection.read.reader.Reader.read_set`), scored by the packaged head fitted on
such reads: a check of many known chunks costs one question's read, and ranks a little worse
(``benchmarks/set_reads.py``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scopeguard.detection.detectors.base import BaseDetector
from scopeguard.detection.detectors.registry import renamed_options
from scopeguard.detection.head.default import DefaultHead, default_head_path
from scopeguard.detection.read.reader import Reader
from scopeguard.detection.read.text import STOPWORDS, content_stem_set, stem, tokenize
from scopeguard.errors import ConfigurationError, DocumentTooLongError
from scopeguard.types import Document, Label, Verdict, as_documents

__all__ = ["READ_MODES", "STOP_BELOW_P", "DefaultDetector", "DefaultReading"]

logger = logging.getLogger(__name__)

#: how the detector reads several passages: each on its own, or all as one set
READ_MODES = ("passages", "set")

#: P(out of scope) at or below which a passage answers the question clearly: stop reading
STOP_BELOW_P = 0.05


@dataclass(frozen=True)
class DefaultReading:
    """What the ``default`` detector read for one question (:meth:`DefaultDetector.reading`): the
    head's P(out of scope) of the passage that answers best, that passage's verdict margin (and
    inference margin, for a head that reads it), and how many passages were read."""

    p_out_of_scope: float
    margin: float
    inference_margin: float | None
    passages: int


class DefaultDetector(BaseDetector):
    """One read, several signals, one head (see the module docstring).

    Args:
        model: a head file or folder from ``train-detector --detector default`` (default: the
            packaged head for the ``read`` mode).
        reader: the reading model: a spec (``"local"``, ``"local:NAME_OR_FOLDER"`` for a GGUF or
            a tuned reader's folder, ``"transformers:NAME"``, ``"openai:MODEL"``), a chat model or
            a verdict scorer; default: the model the head was fitted on, the packaged
            Qwen2.5-Coder-1.5B through llama.cpp. A head with a hidden state needs a scorer that
            returns it (llama.cpp's, built here from a spec with the head's layer); a head fitted
            on another model warns. (Named ``reader_llm=`` before: that name raises, naming ``reader=``.)
        reader_kwargs: options for the :class:`~scopeguard.detection.read.reader.Reader`
            (``chunk_tokens``, ``max_chunks``).
        threshold: overrides the head's threshold on P(out of scope).
        read: ``"passages"`` (each passage on its own, the lowest P(out of scope) wins) or
            ``"set"`` (the question read once against all the passages together: their kept states
            joined, one verdict for the set; llama.cpp only; see :meth:`Reader.read_set`),
            scored by the packaged head fitted on set reads.
    """

    name = "default"
    stages = ("read",)

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        reader: Any = None,
        reader_kwargs: dict[str, Any] | None = None,
        threshold: float | None = None,
        read: str = "passages",
        **renamed: Any,
    ) -> None:
        renamed_options(self.name, renamed, {"reader_llm": "reader"})
        if read not in READ_MODES:
            raise ConfigurationError(f"read must be one of {', '.join(READ_MODES)}, got {read!r}")
        self.read = read
        self.head = DefaultHead.load(model if model is not None else default_head_path(read))
        if reader is None:  # the packaged reading model: fail now, with the pip line, if it cannot run
            from scopeguard._optional import require

            require(
                "llama_cpp",
                extra="local",
                feature="the default detector's reading stage",
                package="llama-cpp-python",
            )
        self.threshold = self.head.threshold if threshold is None else float(threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {self.threshold}")
        self._reading_model = reader
        self._reader_kwargs = dict(reader_kwargs or {})
        self._reader: Reader | None = None

    @property
    def reader(self) -> Reader:
        """The read (a :class:`~scopeguard.detection.read.Reader` with the head's prompt), built lazily."""
        if self._reader is None:
            model = self._reading_model  # a spec (or None: the packaged model) gets the head's layers
            scorer = self.head.scorer(model) if model is None or isinstance(model, str) else model
            self._reader = Reader(scorer, template=self.head.template, **self._reader_kwargs)
            if self._reader.scorer.name != self.head.verdict_model:
                logger.warning(
                    "default head was fitted on %s; reading with %s",
                    self.head.verdict_model,
                    self._reader.scorer.name,
                )
        return self._reader

    def identity(self) -> dict[str, str]:
        """What a calibration profile must match: the head's weights (not its threshold, which a
        profile replaces), the reading model with its adapter, and a set read (its scores are not
        a passage's)."""
        found = {"detector": self.name, "head": self.head.weights_sha256(), "reader": self.reader.scorer.name}
        return found if self.read == "passages" else {**found, "read": self.read}

    def load(self) -> None:
        """Load the reading model now (otherwise on the first question)."""
        self.reader.load()

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Read ``documents`` ahead of the questions and keep the model's state after each (on disk
        with llama.cpp), so that a later question costs only its own tokens; see
        :meth:`Reader.preread`. Returns the passages read."""
        return int(self.reader.preread(documents, progress=progress))

    def reading(self, question: str, documents: Sequence[Document | str]) -> DefaultReading:
        """Read ``question`` against each passage of ``documents`` until one answers it clearly;
        the head's lowest P(out of scope) and that passage's margins (no threshold applied). A
        passage of a document the head's short-passage rule applies to has its P lowered by it."""
        docs = as_documents(list(documents))
        rule = self.head.short_passages
        if self.read == "set":
            passages = self.reader.passages(docs)
            p, margin, inference = self._read_set(question, passages)
            if rule is not None and all(rule.applies(d.text) for d in docs):
                p = rule.lowered(p)
            return DefaultReading(
                p_out_of_scope=p, margin=margin, inference_margin=inference, passages=len(passages)
            )
        # each document's short-passage rule: None where it has none or the document is not short
        short = [rule if rule is not None and rule.applies(d.text) else None for d in docs]
        best: tuple[float, float, float | None] | None = None
        n = 0
        for passage in self.reader.split(docs):
            scores = self.reader.read_passage(question, passage.text, self.head.probes)
            main, inference = scores[0], (scores[1].margin if len(scores) > 1 else None)
            p = float(self.head.head.predict(self.head.row(main.margin, inference, main.hidden))[0])
            lowering = short[passage.document]
            if lowering is not None:
                p = lowering.lowered(p)
            n += 1
            if best is None or p < best[0]:
                best = (p, main.margin, inference)
            if p <= STOP_BELOW_P:  # clearly answered here: the rest cannot change that
                break
        assert best is not None  # as_documents guarantees at least one document
        return DefaultReading(p_out_of_scope=best[0], margin=best[1], inference_margin=best[2], passages=n)

    def _read_set(self, question: str, passages: list[str]) -> tuple[float, float, float | None]:
        """The head's P(out of scope) of ``passages`` read as one set, its margin and inference
        margin; a set too long for the reader's context is read as two halves, the lower P wins."""
        try:
            scores = self.reader.read_set(question, passages, self.head.probes)
        except DocumentTooLongError:
            if len(passages) < 2:
                raise
            half = len(passages) // 2
            first, second = (
                self._read_set(question, passages[:half]),
                self._read_set(question, passages[half:]),
            )
            return min(first, second, key=lambda read: read[0])
        main, inference = scores[0], (scores[1].margin if len(scores) > 1 else None)
        p = float(self.head.head.predict(self.head.row(main.margin, inference, main.hidden))[0])
        return p, main.margin, inference

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        reader = self.reader
        read = self.reading(question, documents)
        p, margin, inference, n = read.p_out_of_scope, read.margin, read.inference_margin, read.passages
        label: Label = "out_of_scope" if p >= self.threshold else "in_scope"
        p_no = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, margin))))
        sets = self.read == "set"
        where = f" ({n} passages read as one set)" if sets else f" (best of {n} passages read)"
        where = where if n > 1 else ""
        rationale = (
            f"{reader.scorer.name} answers 'does the document contain the answer?' with P(No)={p_no:.2f}"
        )
        if inference is not None:
            p_inf = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, inference))))
            rationale += f", 'could a careful reader answer it?' with P(No)={p_inf:.2f}"
        rationale += f"{where}; P(out of scope) {p:.2f}"
        uncovered = _uncovered_words(question, documents) if label == "out_of_scope" else ()
        if uncovered:
            rationale += "; not in the documents: " + ", ".join(repr(u) for u in uncovered)
        return Verdict(
            label=label,
            score=p,
            rationale=rationale,
            uncovered=uncovered,
            stage="read",
            llm_calls=(1 if sets else n) * (1 + len(self.head.probes)),
        )


def _uncovered_words(question: str, documents: Sequence[Document]) -> tuple[str, ...]:
    """The question's content words whose stems no document has (shown next to a refusal)."""
    doc_stems: set[str] = set().union(*(content_stem_set(d.text) for d in documents))
    words = (t for t in tokenize(question) if t not in STOPWORDS and stem(t) not in doc_stems)
    return tuple(dict.fromkeys(words))
