"""The records of a lending run (:mod:`scopeguard.generation.lending`): its settings
(:class:`LendingConfig`, and ``_RunConfig``: what ``OUT/lending.json`` holds), the pairs it
reads (:class:`Pair`), their reads (:class:`LentRead`, the lines of ``OUT/.lending/reads.jsonl``)
and what it did (:class:`LendingSummary`, with its table).

They are kept apart from the run's machinery (planning the pairs, the similarity floor, the reads,
rebuilding the dataset files) because they are the folder's format and the CLI's defaults: plain
frozen records that import nothing of the generator. :mod:`scopeguard.generation.lending`
re-exports the public ones; import them from there.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from scopeguard.retrieval.registry import DEFAULT_RETRIEVER

__all__ = ["LendingConfig", "LendingSummary", "LentRead", "Pair"]


class LendingConfig(BaseModel):
    """What a lending run retrieves with: the single source of the CLI's defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    retriever: str = DEFAULT_RETRIEVER
    neighbours: int = Field(default=3, ge=1, le=20)
    min_similarity: float = Field(default=0.4, ge=0.0, le=1.0)
    similarity_model: str = "minilm"


class _RunConfig(LendingConfig):
    """``OUT/lending.json``: the retrieval settings and the filter (its identity and floor)."""

    filter: dict[str, str]
    floor: float


class Pair(BaseModel):
    """A logged question to ask of one neighbour of its own document ``source_doc`` (``rank``: the
    neighbour's place in the ranking, 1 = first)."""

    model_config = ConfigDict(frozen=True)

    log_id: str
    question: str
    source_doc: str
    doc_id: str
    rank: int


class LentRead(Pair):
    """A pair read by the filter (its label and P(out of scope)): a line of ``.lending/reads.jsonl``."""

    label: str
    score: float | None = None
    kept: bool


class LendingSummary(BaseModel):
    """What a lending run did (``*_run``) and what its folder holds now (the rest)."""

    model_config = ConfigDict(frozen=True)

    out_dir: str
    retriever: str
    filter: str
    floor: float
    log_questions: int
    not_lent: int  # labelled out_of_scope in the log
    skipped: int  # no own document found (see the warnings)
    pairs: int  # (question, neighbour) pairs of the log as it is now, alike enough to be read
    unlike: int  # pairs passed over: neighbour and own document less alike than min_similarity
    min_similarity: float
    read_run: int
    resumed: int
    failed_run: int
    kept: int
    documents_asked: int  # neighbours asked at least one question
    documents: int  # neighbours with at least one lent question
    documents_with_2: int  # ... with at least two
    corpus_documents: int
    seconds: float

    def table(self) -> str:
        asked = self.documents_asked
        share = f" ({self.documents_with_2 / asked:.0%} of those asked)" if asked else ""
        rows = [
            ("output", self.out_dir),
            ("retriever / filter", f"{self.retriever} / {self.filter}, P(out of scope) >= {self.floor:.2f}"),
            (
                "log",
                f"{self.log_questions} questions: {self.not_lent} labelled out_of_scope (not lent), "
                f"{self.skipped} not lent for want of their own document (the warnings say why)",
            ),
            (
                "reads",
                f"{self.pairs} question-neighbour pairs: {self.read_run} read this run, "
                f"{self.resumed} resumed, {self.failed_run} failed this run (re-run to retry); "
                f"{self.unlike} passed over, on another subject (similarity < {self.min_similarity:g})",
            ),
            ("lent questions", f"{self.kept} kept out of scope"),
            (
                "documents",
                f"{self.documents_with_2} of {asked} neighbours asked have >= 2 lent questions{share}; "
                f"{self.documents} have at least one; {self.corpus_documents} in the corpus",
            ),
            ("time", f"{self.seconds:.1f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
