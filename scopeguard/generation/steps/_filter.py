"""Step 10: drop the questions the judge finds answerable from the document (Appendix B.3).

A judge reply cut at its token cap (finish reason ``length``) is never silently an ``unknown``
vote: the voting judges draw such a reply again without the cap themselves
(:class:`~scopeguard.judging.JudgeConfig` ``retry_truncated``, see :mod:`scopeguard.voting`), so the
filter judges each question once. Cut replies are recorded as a ``truncated`` issue; a verdict
still unknown after them (a judge that does not redraw) carries :data:`CUT_AT_CAP` as its error.
"""

from __future__ import annotations

import logging

from scopeguard.errors import ScopeGuardError
from scopeguard.generation.checkpoint import FilterRecord
from scopeguard.generation.steps._context import DocumentContext

logger = logging.getLogger(__name__)

CUT_AT_CAP = "a judge reply was cut at its token cap and left without a verdict"


async def filter_question(ctx: DocumentContext, question: str) -> FilterRecord | None:
    """The judge's verdict on ``question``; ``None`` when the filter is off."""
    judge = ctx.judge
    if not ctx.cfg.filter or judge is None:
        return None
    before = len(ctx.ledger.reply_ids)
    cut_before = ctx.ledger.total.truncated
    try:
        verdict = await judge.adetect(question, [ctx.doc])
    except ScopeGuardError as exc:
        logger.warning("filter failed on a question of %s: %s", ctx.doc.id, exc)
        return FilterRecord(label="unknown", error=str(exc), reply_ids=tuple(ctx.ledger.reply_ids[before:]))
    cut = ctx.ledger.total.truncated - cut_before
    unresolved = bool(cut) and verdict.label == "unknown"
    if cut:
        ctx.note(
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
        reply_ids=tuple(ctx.ledger.reply_ids[before:]),
        error=verdict.error or (CUT_AT_CAP if unresolved else None),
    )
