"""Step 8: remove the hallucinated claims supported by the document or the true claims (Appendix B.11)."""

from __future__ import annotations

from scopeguard.generation._context import DocumentContext
from scopeguard.generation.checkpoint import ClaimVersion
from scopeguard.generation.parsers import parse_remaining


async def remove_supported(
    ctx: DocumentContext, claims: list[str], hallucinated: list[ClaimVersion], candidates: list[int]
) -> tuple[list[int], str | None]:
    """The ``candidates`` (indices into ``hallucinated``) that remain, and the reply id.

    Without a usable reply every candidate remains (recorded): the filter decides.
    """
    if not candidates:
        return [], None
    false_facts = [hallucinated[i].text for i in candidates]
    got = await ctx.ask(
        "remove",
        "gen_remove_claims",
        lambda r, _l: parse_remaining(r.text, false_facts, truncated=r.truncated),
        max_tokens=60 * len(false_facts) + 80,
        document=ctx.doc.text,
        true_facts=claims,
        false_facts=false_facts,
    )
    if got is None:
        ctx.note("remove", "kept_all", accepted=True, detail="no usable reply: the filter decides")
        return candidates, None
    return [candidates[j] for j in got[0]], got[1].id
