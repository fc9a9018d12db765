"""Algorithm 1 of ELOQ for one document, its steps in order (plus scopeguard's optional extra rounds)."""

from __future__ import annotations

from scopeguard.generation._context import DocumentContext
from scopeguard.generation.checkpoint import ClaimVersion, DocumentRecord
from scopeguard.generation.paper._extract import extract_claims
from scopeguard.generation.paper._in_scope import in_scope_questions
from scopeguard.generation.paper._questions import oos_questions
from scopeguard.generation.paper._recover import hallucinate
from scopeguard.generation.paper._remove import remove_supported

__all__ = ["generate_paper"]


def _norm(text: str) -> str:
    return text.strip().lower()


async def generate_paper(ctx: DocumentContext) -> DocumentRecord:
    """One document through Algorithm 1 (``faithful`` or ``efficient``): the steps in the paper's
    order, then the in-scope questions."""
    cfg = ctx.cfg
    got = await extract_claims(ctx)
    if got is None:
        return ctx.record("failed", error="claim extraction failed: no usable reply")
    claims, extract_reply = got
    history = [
        ClaimVersion(position=i, round=0, text=c, reply_id=extract_reply.id) for i, c in enumerate(claims)
    ]
    latest = list(history)
    await hallucinate(ctx, claims, latest, history, range(1, cfg.rounds + 1))
    true_norm = {_norm(c) for c in claims}
    hallucinated = [v for v in latest if v.round > 0]
    candidates = [i for i, h in enumerate(hallucinated) if _norm(h.text) not in true_norm]
    remaining, remove_id = await remove_supported(ctx, claims, hallucinated, candidates)
    questions, dropped = await oos_questions(ctx, claims, hallucinated, remaining, remove_id, 0)
    extra = 0
    # scopeguard's addition (min_oos > 0): sampled extra rounds for a document short of questions
    while len(questions) < cfg.min_oos and extra < cfg.extra_rounds:
        extra += 1
        rnd = cfg.rounds + extra
        seed = None if cfg.seed is None else cfg.seed + rnd
        await hallucinate(
            ctx, claims, latest, history, range(rnd, rnd + 1), sampling=(cfg.extra_temperature, seed)
        )
        seen = {_norm(h.text) for h in hallucinated} | true_norm
        start = len(hallucinated)
        hallucinated += [v for v in latest if v.round == rnd]
        new = [i for i in range(start, len(hallucinated)) if _norm(hallucinated[i].text) not in seen]
        kept_now, remove_id = await remove_supported(ctx, claims, hallucinated, new)
        remaining += kept_now
        more, gone = await oos_questions(ctx, claims, hallucinated, kept_now, remove_id, len(questions))
        questions += more
        dropped += gone
    if extra:
        ctx.note(
            "extra_rounds",
            "top_up",
            accepted=True,
            detail=f"{extra} extra round(s) for at least {cfg.min_oos} out-of-scope question(s); "
            f"{len(questions)} kept",
        )
    ins = await in_scope_questions(ctx)
    return ctx.record(
        "done",
        claims=tuple(claims),
        claim_history=tuple(history),
        hallucinated=tuple(hallucinated),
        remaining=tuple(remaining),
        questions=tuple(questions + ins),
        dropped=tuple(dropped),
    )
