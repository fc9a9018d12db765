"""In-scope questions: the questions the document directly answers (Appendix B.9)."""

from __future__ import annotations

from scopeguard.generation._context import DocumentContext
from scopeguard.generation.checkpoint import GeneratedQuestion
from scopeguard.generation.parsers import parse_question_list


async def in_scope_questions(ctx: DocumentContext) -> list[GeneratedQuestion]:
    """``n_in_scope`` questions (fewer when the reply repeats itself; none without a usable reply)."""
    n = ctx.cfg.n_in_scope
    if n == 0:
        return []
    got = await ctx.ask_list(
        "in_scope_questions", "gen_in_scope_questions", parse_question_list, n, max_tokens=50 * n + 60
    )
    if got is None:
        return []
    questions, reply = got
    unique = ctx.unique("in_scope_questions", questions, reply.id)
    return [ctx.question(q, "in_scope", k, reply.id) for k, q in enumerate(unique)]
