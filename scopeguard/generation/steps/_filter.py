"""Step 10: drop the questions the judge finds answerable from the document (Appendix B.3).

A judge reply cut at its token cap (finish reason ``length``) is never silently an ``unknown``
vote: when a judge that has a cap (``max_tokens``, as :class:`~scopeguard.detectors.judge.JudgeDetector`)
returns a cut reply, the question is judged again without a cap, and the cut replies are recorded
as a ``truncated`` issue. A judge without a cap to lift keeps its verdict; the issue says so.
"""

from __future__ import annotations

import copy
import logging

from scopeguard.detectors.base import Detector
from scopeguard.errors import ScopeGuardError
from scopeguard.generation.checkpoint import FilterRecord
from scopeguard.generation.steps._context import DocumentContext
from scopeguard.types import Verdict

logger = logging.getLogger(__name__)

CUT_AT_CAP = "a judge reply was cut at its token cap (the judge has no cap to lift)"


def _uncapped(judge: Detector) -> Detector | None:
    """A copy of ``judge`` without its reply cap, or ``None`` when it has no cap to lift."""
    if getattr(judge, "max_tokens", None) is None:
        return None
    lifted = copy.copy(judge)
    lifted.max_tokens = None  # type: ignore[attr-defined]
    return lifted


async def _judge(ctx: DocumentContext, judge: Detector, question: str) -> tuple[Verdict, int]:
    """The verdict and how many of the judge's replies stopped at the token cap."""
    cut_before = ctx.ledger.total.truncated
    verdict = await judge.adetect(question, [ctx.doc])
    return verdict, ctx.ledger.total.truncated - cut_before


async def filter_question(ctx: DocumentContext, question: str) -> FilterRecord | None:
    """The judge's verdict on ``question``; ``None`` when the filter is off."""
    judge = ctx.judge
    if not ctx.cfg.filter or judge is None:
        return None
    before = len(ctx.ledger.reply_ids)
    unresolved = False
    try:
        verdict, cut = await _judge(ctx, judge, question)
        if cut:
            lifted = _uncapped(judge)
            if lifted is not None:
                verdict, _ = await _judge(ctx, lifted, question)
            unresolved = lifted is None
            ctx.note(
                "filter",
                "truncated",
                accepted=lifted is not None,
                detail=f"{cut} judge repl{'y' if cut == 1 else 'ies'} cut at the token cap on "
                f"{question!r}: "
                + ("judged again without a cap" if lifted is not None else "the verdict stands"),
            )
    except ScopeGuardError as exc:
        logger.warning("filter failed on a question of %s: %s", ctx.doc.id, exc)
        return FilterRecord(label="unknown", error=str(exc), reply_ids=tuple(ctx.ledger.reply_ids[before:]))
    return FilterRecord(
        label=verdict.label,
        score=verdict.score,
        detector=verdict.detector,
        votes=tuple(v.model_dump() for v in verdict.votes),
        llm_calls=verdict.llm_calls,
        reply_ids=tuple(ctx.ledger.reply_ids[before:]),
        error=verdict.error or (CUT_AT_CAP if unresolved else None),
    )
