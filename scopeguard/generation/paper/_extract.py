"""Step 1: extract ``n`` claims from the document (Appendix B.1)."""

from __future__ import annotations

from scopeguard.generation._context import DocumentContext
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.parsers import parse_claims


async def extract_claims(ctx: DocumentContext) -> tuple[list[str], CachedReply] | None:
    """The document's claims and the reply they came from; ``None`` when no reply was usable."""
    n = ctx.cfg.n_claims
    return await ctx.ask_list("extract", "gen_extract_claims", parse_claims, n, max_tokens=60 * n + 80)
