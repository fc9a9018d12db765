"""The state one document's run shares between its steps: the LLM, the filter, the issues, the
questions so far. Both wings read a document through it: the paper's steps (:mod:`.paper`) and the
offline writer (:mod:`.offline`).

The filter (Algorithm 1 step 10, Appendix B.3; the offline keeper's too) is
:meth:`DocumentContext.filter_question`. A judge reply cut at its token cap (finish reason
``length``) is never silently an ``unknown`` vote: the voting judges draw such a reply again without
the cap themselves (:class:`~scopeguard.judging.JudgeConfig` ``retry_truncated``, see
:mod:`scopeguard.voting`), so the filter judges each question once. Cut replies are recorded as a
``truncated`` issue; a verdict still unknown after them (a judge that does not redraw) carries
:data:`CUT_AT_CAP` as its error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeVar

from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ScopeGuardError
from scopeguard.generation.cache import CachedReply, RecordingChatModel
from scopeguard.generation.checkpoint import DocumentRecord, FilterRecord, GeneratedQuestion, StepIssue
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.parsers import ReplyParseError
from scopeguard.prompts import render
from scopeguard.types import Document

__all__ = ["CUT_AT_CAP", "DocumentContext", "ListParser", "Sampling", "words"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Sampling = tuple[float, int | None]
CUT_AT_CAP = "a judge reply was cut at its token cap and left without a verdict"


class ListParser(Protocol):
    """A parser of a numbered list of ``n`` items (:func:`~scopeguard.generation.parsers.parse_claims`)."""

    def __call__(self, text: str, n: int, *, truncated: bool, lenient: bool) -> list[str]: ...


def words(text: str) -> int:
    return len(text.split())


class DocumentContext:
    """One document's run: :meth:`ask` calls and parses; every failure lands in ``issues``."""

    def __init__(
        self,
        doc: Document,
        order: int,
        llm: RecordingChatModel,
        judge: Detector | None,
        cfg: GenerationConfig,
    ) -> None:
        self.doc, self.order, self.cfg, self.judge = doc, order, cfg, judge
        self.llm = llm
        self.ledger = llm.ledger
        self.issues: list[StepIssue] = []
        self._seen_questions: set[str] = set()
        self.started = time.perf_counter()

    def note(self, step: str, reason: str, **fields: object) -> None:
        """Record an issue of ``step`` (see :class:`StepIssue`)."""
        self.issues.append(StepIssue(step=step, reason=reason, **fields))  # type: ignore[arg-type]

    async def ask(
        self,
        step: str,
        template: str,
        parse: Callable[[CachedReply, bool], T],
        max_tokens: int,
        sampling: Sampling | None = None,
        schema: Mapping[str, Any] | None = None,
        **variables: object,
    ) -> tuple[T, CachedReply] | None:
        """Call, parse strictly; on failure retry with ``firm=True``; the last retry may parse leniently.

        ``sampling`` overrides the configured ``(temperature, seed)``; ``schema`` holds the replies
        to a JSON schema where the backend can (:meth:`RecordingChatModel.constrained`).
        """
        view = self.llm.for_step(step)
        if schema is not None:
            view = view.constrained(schema)
        temperature, seed = sampling if sampling is not None else (self.cfg.temperature, self.cfg.seed)
        for attempt in range(self.cfg.retries + 1):
            prompt = render(template, firm=attempt > 0, **variables)
            reply = await view.acall(prompt, temperature=temperature, max_tokens=max_tokens, seed=seed)
            try:
                return parse(reply, False), reply
            except ReplyParseError as exc:
                self.note(step, exc.reason, reply_id=reply.id, detail=str(exc))
                if attempt > 0:
                    try:
                        value = parse(reply, True)
                    except ReplyParseError:
                        continue
                    self.note(step, "accepted_lenient", reply_id=reply.id, accepted=True)
                    return value, reply
        return None

    async def ask_list(
        self, step: str, template: str, parse: ListParser, n: int, max_tokens: int
    ) -> tuple[list[str], CachedReply] | None:
        """:meth:`ask` for ``n`` numbered items of the document (``template`` gets ``document`` and
        ``n``), read by ``parse``; ``None`` when no reply was usable."""
        return await self.ask(
            step,
            template,
            lambda r, lenient: parse(r.text, n, truncated=r.truncated, lenient=lenient),
            max_tokens=max_tokens,
            document=self.doc.text,
            n=n,
        )

    async def filter_question(self, question: str) -> FilterRecord | None:
        """The judge's verdict on ``question`` (see the module docstring); ``None`` when the filter
        is off."""
        judge = self.judge
        if not self.cfg.filter or judge is None:
            return None
        before = len(self.ledger.reply_ids)
        cut_before = self.ledger.total.truncated
        try:
            verdict = await judge.adetect(question, [self.doc])
        except ScopeGuardError as exc:
            logger.warning("filter failed on a question of %s: %s", self.doc.id, exc)
            return FilterRecord(
                label="unknown", error=str(exc), reply_ids=tuple(self.ledger.reply_ids[before:])
            )
        cut = self.ledger.total.truncated - cut_before
        unresolved = bool(cut) and verdict.label == "unknown"
        if cut:
            self.note(
                "filter",
                "truncated",
                accepted=not unresolved,
                detail=f"{cut} judge repl{'y' if cut == 1 else 'ies'} cut at the token cap on {question!r}: "
                + (
                    "no verdict (the judge does not draw a cut reply again)"
                    if unresolved
                    else "a cut reply without a verdict was judged again without a cap by the judge"
                ),
            )
        return FilterRecord(
            label=verdict.label,
            score=verdict.score,
            detector=verdict.detector,
            votes=tuple(v.model_dump() for v in verdict.votes),
            llm_calls=verdict.llm_calls,
            reply_ids=tuple(self.ledger.reply_ids[before:]),
            error=verdict.error or (CUT_AT_CAP if unresolved else None),
        )

    def unique(self, step: str, questions: list[str], reply_id: str) -> list[str]:
        """``questions`` without repeats of a question this document already has (recorded)."""
        out: list[str] = []
        for q in questions:
            key = " ".join(q.lower().split())
            if key in self._seen_questions:
                self.note(step, "duplicate", reply_id=reply_id, accepted=True, detail=q)
                continue
            self._seen_questions.add(key)
            out.append(q)
        return out

    def question(
        self,
        question: str,
        label: Literal["in_scope", "out_of_scope"],
        index: int,
        reply_id: str,
        filt: FilterRecord | None = None,
        *,
        ids: Mapping[str, tuple[str, ...]] | None = None,
        **provenance: object,
    ) -> GeneratedQuestion:
        """A kept question of this document, its id ``<doc>_<oos|ins>_<index>``: written in reply
        ``reply_id`` (with the other replies it came from, ``ids``), read by the filter as ``filt``."""
        reply_ids: dict[str, tuple[str, ...]] = {"question": (reply_id,), **(ids or {})}
        if filt is not None:
            reply_ids["filter"] = filt.reply_ids
        return GeneratedQuestion(
            id=f"{self.doc.id}_{'oos' if label == 'out_of_scope' else 'ins'}_{index}",
            doc_id=self.doc.id,
            question=question,
            label=label,
            words=words(question),
            reply_ids=reply_ids,
            filter=filt,
            **provenance,  # type: ignore[arg-type]
        )

    def record(self, status: Literal["done", "failed", "skipped"], **fields: object) -> DocumentRecord:
        return DocumentRecord(
            doc_id=self.doc.id,
            order=self.order,
            text=self.doc.text,
            metadata=self.doc.metadata,
            status=status,
            mode=self.cfg.mode,
            model=self.llm.name,
            issues=tuple(self.issues),
            usage=dict(self.ledger.by_step),
            seconds=time.perf_counter() - self.started,
            **fields,  # type: ignore[arg-type]
        )
