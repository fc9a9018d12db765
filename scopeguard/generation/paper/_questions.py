"""Step 9: one question per remaining hallucinated claim (Appendix B.10), each through the filter."""

from __future__ import annotations

from collections.abc import Callable

from scopeguard.generation._context import CUT_AT_CAP, DocumentContext
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.checkpoint import ClaimVersion, DroppedQuestion, FilterRecord, GeneratedQuestion
from scopeguard.generation.offline import copied_phrase
from scopeguard.generation.parsers import parse_questions_by_number


def _drop_reason(filt: FilterRecord) -> str:
    if filt.label == "in_scope":
        return "filter: answerable from the document"
    return f"filter: unknown ({CUT_AT_CAP})" if filt.error == CUT_AT_CAP else "filter: unknown"


async def oos_questions(
    ctx: DocumentContext,
    claims: list[str],
    hallucinated: list[ClaimVersion],
    remaining: list[int],
    remove_id: str | None,
    first_id: int,
) -> tuple[list[GeneratedQuestion], list[DroppedQuestion]]:
    """The kept out-of-scope questions (ids from ``first_id``) and the ones the filter dropped."""
    if not remaining:
        return [], []
    facts = [hallucinated[i].text for i in remaining]
    written = await _write_questions(ctx, facts)
    kept: list[GeneratedQuestion] = []
    dropped: list[DroppedQuestion] = []
    for j, question, reply_id in written:
        h = hallucinated[remaining[j]]
        copied = (
            copied_phrase(question, f"{ctx.doc.text}\n{h.text}") if "natural" in ctx.cfg.screens else None
        )
        if copied is not None:
            dropped.append(
                DroppedQuestion(
                    question=question,
                    claim_index=h.position,
                    reason=f"not a usable question: {copied}",
                    filter=None,
                )
            )
            continue
        filt = await ctx.filter_question(question)
        if filt is not None and filt.label != "out_of_scope":
            dropped.append(
                DroppedQuestion(
                    question=question, claim_index=h.position, reason=_drop_reason(filt), filter=filt
                )
            )
            continue
        ids = {"claim": (h.reply_id or "",), **({"remove": (remove_id,)} if remove_id else {})}
        kept.append(
            ctx.question(
                question,
                "out_of_scope",
                first_id + len(kept),
                reply_id,
                filt,
                ids=ids,
                claim_index=h.position,
                true_claim=claims[h.position],
                hallucinated_claim=h.text,
                round=h.round,
            )
        )
    return kept, dropped


async def _write_questions(ctx: DocumentContext, facts: list[str]) -> list[tuple[int, str, str]]:
    """``(fact index, question, reply id)`` for the facts that got a new question.

    One call for all ``facts`` (the paper); with the ``question`` fallback, the facts whose question
    was lost (no usable reply, or a repeat of another question) are asked for one by one.
    """

    def parse(n: int) -> Callable[[CachedReply, bool], dict[int, str]]:
        return lambda r, lenient: parse_questions_by_number(r.text, n, truncated=r.truncated, lenient=lenient)

    got = await ctx.ask(
        "oos_questions",
        "gen_oos_questions",
        parse(len(facts)),
        max_tokens=50 * len(facts) + 60,
        document=ctx.doc.text,
        facts=facts,
    )
    written: list[tuple[int, str, str]] = []
    lost: list[int] = []
    if got is None:
        lost = list(range(len(facts)))
    else:
        by_fact, reply = got
        for j, question in sorted(by_fact.items()):
            if ctx.unique("oos_questions", [question], reply.id):
                written.append((j, question, reply.id))
            else:
                lost.append(j)
    if "question" not in ctx.cfg.fallbacks or len(facts) == 1:
        return written  # a one-fact list was already asked for alone
    for j in lost:
        one = await ctx.ask(
            "oos_questions_each",
            "gen_oos_questions",
            parse(1),
            max_tokens=110,
            document=ctx.doc.text,
            facts=[facts[j]],
        )
        if one is not None and ctx.unique("oos_questions_each", [one[0][0]], one[1].id):
            written.append((j, one[0][0], one[1].id))
    return sorted(written)
