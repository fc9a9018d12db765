"""Steps 2-7: partition the claims, mask each subset and have the LLM recover it (Appendix B.2).

Faithful: every round masks every subset in turn (``rounds x k`` calls). Efficient: round ``r``
masks only subset ``S_((r-1) mod k)`` (``rounds`` calls; with the defaults one sweep in which every
claim is recovered once, each time in the context of the claims hallucinated so far). The masked
claims are never shown to the model in either mode.
"""

from __future__ import annotations

import functools

from scopeguard.generation._context import DocumentContext, Sampling
from scopeguard.generation.cache import CachedReply
from scopeguard.generation.checkpoint import ClaimVersion
from scopeguard.generation.parsers import MISSING, parse_guesses, parse_recovered


def _parse_recovery(
    reply: CachedReply, lenient: bool, *, facts: list[str], masked: list[int]
) -> dict[int, str]:
    return parse_recovered(reply.text, facts, masked, truncated=reply.truncated, lenient=lenient)


async def hallucinate(
    ctx: DocumentContext,
    claims: list[str],
    latest: list[ClaimVersion],
    history: list[ClaimVersion],
    rounds: range,
    sampling: Sampling | None = None,
) -> None:
    """Run ``rounds``, updating ``latest`` (one version per claim) and appending to ``history``."""
    n, k = len(claims), min(ctx.cfg.n_subsets, len(claims))
    subsets = [[i for i in range(n) if i % k == j] for j in range(k)]
    for rnd in rounds:
        this_round = subsets if ctx.cfg.mode == "faithful" else [subsets[(rnd - 1) % k]]
        for subset in this_round:
            facts = [MISSING if i in subset else latest[i].text for i in range(n)]
            got = await ctx.ask(
                "recover",
                "gen_recover_claims",
                functools.partial(_parse_recovery, facts=facts, masked=subset),
                max_tokens=60 * n + 80,
                sampling=sampling,
                facts=facts,
                n=n,
            )
            if got is None and "recover" in ctx.cfg.fallbacks:
                got = await _recover_guesses(ctx, facts, subset, sampling)
            if got is not None:
                _apply(got[0], rnd, got[1].id, latest, history)


async def _recover_guesses(
    ctx: DocumentContext, facts: list[str], subset: list[int], sampling: Sampling | None
) -> tuple[dict[int, str], CachedReply] | None:
    """The fallback: only the guesses, each under its number; copies are left out (recorded)."""

    def parse(reply: CachedReply, lenient: bool) -> tuple[dict[int, str], list[int]]:
        return parse_guesses(reply.text, facts, subset, truncated=reply.truncated, lenient=lenient)

    got = await ctx.ask(
        "recover_guesses",
        "gen_recover_guesses",
        parse,
        max_tokens=60 * len(subset) + 40,
        sampling=sampling,
        facts=facts,
        n=len(facts),
        missing=[i + 1 for i in subset],
    )
    if got is None:
        return None
    (guesses, rejected), reply = got
    if rejected:
        ctx.note(
            "recover_guesses",
            "partial",
            reply_id=reply.id,
            accepted=True,
            detail=f"no new guess for facts {[i + 1 for i in rejected]} (missing or a copy): "
            "those claims keep their previous version",
        )
    return guesses, reply


def _apply(
    guesses: dict[int, str],
    rnd: int,
    reply_id: str,
    latest: list[ClaimVersion],
    history: list[ClaimVersion],
) -> None:
    for i, text in guesses.items():
        version = ClaimVersion(position=i, round=rnd, text=text, reply_id=reply_id)
        latest[i] = version
        history.append(version)
