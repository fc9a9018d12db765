"""Typed records that flow between scopeguard's stages.

All records are frozen pydantic models: they validate on construction, compare by value and
serialise with ``model_dump()`` / ``model_dump_json()``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from scopeguard.errors import ConfigurationError, ErrorKind, InputError, unknown_options_message

__all__ = [
    "Action",
    "Document",
    "GuardResult",
    "Label",
    "StrictOptions",
    "Verdict",
    "Vote",
    "as_documents",
    "validate_question",
]

Label = Literal["in_scope", "out_of_scope", "unknown"]
"""A detector's decision. ``unknown`` means no decision could be made (never a default label)."""


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Document(_Record):
    """A retrieved document (or passage) that a question is checked against."""

    text: str
    id: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, /, **data: Any) -> None:
        # Checked before pydantic runs: an error raised inside a validator reaches the caller
        # wrapped in a pydantic ValidationError, and a bad document is an InputError everywhere.
        # (model_validate, used on stored records, still raises ValidationError.)
        if "text" not in data:
            raise InputError("Document needs text=: the document's text as a string")
        text = data["text"]
        if not isinstance(text, str):
            raise InputError(f"Document text must be a string, got {type(text).__name__}")
        doc_id = data.get("id", "")
        if not isinstance(doc_id, str):
            raise InputError(f"Document id must be a string, got {type(doc_id).__name__}")
        metadata = data.get("metadata", {})
        if not isinstance(metadata, dict):
            raise InputError(f"Document metadata must be a dict, got {type(metadata).__name__}")
        unknown = sorted(set(data) - {"text", "id", "metadata"})
        if unknown:
            raise InputError(f"Document got unknown field(s) {', '.join(unknown)}; use text, id, metadata")
        super().__init__(**data)

    @property
    def content_hash(self) -> str:
        """SHA-256 of the text: the key for embedding and feature caches."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


class Vote(_Record):
    """One sample of a voting detector (for example one LLM judgement).

    ``followup`` is the reply to the follow-up turn that asked for a verdict the sample lacked.
    ``truncated``: the sample stopped at the reply cap (``raw`` is then its uncapped redraw when
    the judge retried it, see :class:`scopeguard.judging.JudgeConfig`).
    """

    label: Label
    rationale: str = ""
    raw: str = ""
    followup: str | None = None
    truncated: bool = False


class Verdict(_Record):
    """What a detector decided for one (question, documents) pair.

    ``score`` is the probability (or vote share) that the question is out of scope;
    ``None`` when the detector could not score (label ``unknown``).
    ``uncovered`` lists the parts of the question the documents do not support, when the
    detector can tell; the clarify policy uses it.
    ``stage`` names the stage of a multi-stage detector that decided (``"fast"``, ``"logprob"``).
    """

    label: Label
    score: float | None = None
    rationale: str = ""
    votes: tuple[Vote, ...] = ()
    uncovered: tuple[str, ...] = ()
    detector: str = ""
    latency_ms: float = 0.0
    llm_calls: int = 0
    escalated: bool = False
    stage: str = ""
    error: str | None = None
    #: what kind of failure ``error`` is, in the one vocabulary (:data:`scopeguard.errors.ErrorKind`:
    #: ``timeout``, ``upstream``, ``auth``, ``bad_reply``, ``too_long``...), set where it happened
    error_kind: ErrorKind | None = None
    #: in scope, but in a calibration profile's hedge band: answered with a caveat that the
    #: documents may not fully cover the question (see :mod:`scopeguard.detection.profile`)
    hedge: bool = False

    @field_validator("score")
    @classmethod
    def _score_in_unit_interval(cls, v: float | None) -> float | None:
        if v is not None and not 0.0 <= v <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {v}")
        return v

    @property
    def is_out_of_scope(self) -> bool:
        return self.label == "out_of_scope"


class Action(str, Enum):
    """What the guard did with a question."""

    ANSWERED = "answered"
    #: answered with a caveat that the documents may not fully cover the question (a score in a
    #: calibration profile's hedge band)
    HEDGED = "hedged"
    REFUSED = "refused"
    CLARIFIED = "clarified"
    DEFUSED = "defused"
    FLAGGED = "flagged"
    CUSTOM = "custom"


class GuardResult(_Record):
    """The outcome of :meth:`scopeguard.Guard.answer` (or ``check``, with no response)."""

    question: str
    verdict: Verdict
    action: Action
    response: str | None = None
    documents: tuple[Document, ...] = ()
    failed_closed: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


def validate_question(question: str) -> str:
    """Return the stripped question, or raise :class:`InputError` when it is empty."""
    if not isinstance(question, str):
        raise InputError(f"question must be a string, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise InputError("question is empty")
    return q


def as_documents(documents: str | Document | Iterable[str | Document]) -> tuple[Document, ...]:
    """Normalise one or many documents (strings or :class:`Document`) to a tuple.

    Raises :class:`InputError` when there are no documents or one is empty.
    """
    items: Sequence[str | Document] = (
        [documents] if isinstance(documents, (str, Document)) else list(documents)
    )
    if not items:
        raise InputError("no documents given: pass at least one retrieved document")
    out: list[Document] = []
    for i, d in enumerate(items):
        doc = d if isinstance(d, Document) else Document(text=d, id=f"doc{i}")
        if not isinstance(doc.text, str) or not doc.text.strip():
            raise InputError(f"document {doc.id or i} is empty")
        out.append(doc)
    return tuple(out)


def _field_names(model: type[Any]) -> set[str]:
    """The keyword arguments a pydantic model's fields take: their names and aliases."""
    names: set[str] = set()
    for name, field in getattr(model, "model_fields", {}).items():
        names.add(name)
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                names.add(alias)
            else:  # AliasChoices: its plain-name choices
                names.update(c for c in getattr(alias, "choices", ()) if isinstance(c, str))
    return names


class StrictOptions:
    """The first base of a pydantic model whose constructor must not drop an option silently: a
    keyword argument that is none of the model's fields (or their aliases) raises
    :class:`~scopeguard.errors.ConfigurationError` before the model is built, naming it, the closest
    valid option and the valid ones. ``_passed_through``: names a subclass lets through unchecked
    (a library's own serialized form may carry them)."""

    _passed_through: frozenset[str] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        valid = _field_names(type(self))
        unknown = [name for name in kwargs if name not in valid and name not in self._passed_through]
        if unknown:
            raise ConfigurationError(unknown_options_message(type(self).__name__, unknown, valid))
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]  # the pydantic base takes them
