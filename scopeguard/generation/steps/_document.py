"""One document: Algorithm 1's steps in order (plus scopeguard's optional extra rounds), or an
offline mode (:mod:`._offline`)."""

from __future__ import annotations

from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError
from scopeguard.generation.cache import RecordingChatModel
from scopeguard.generation.checkpoint import ClaimVersion, DocumentRecord
from scopeguard.generation.config import OFFLINE_MODES, GenerationConfig
from scopeguard.generation.steps._context import DocumentContext
from scopeguard.generation.steps._extract import extract_claims
from scopeguard.generation.steps._in_scope import in_scope_questions
from scopeguard.generation.steps._offline import generate_offline
from scopeguard.generation.steps._questions import oos_questions
from scopeguard.generation.steps._recover import hallucinate
from scopeguard.generation.steps._remove import remove_supported
from scopeguard.generation.steps._screens import get_screens
from scopeguard.types import Document


def _norm(text: str) -> str:
    return text.strip().lower()


async def _run(ctx: DocumentContext) -> DocumentRecord:
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


async def generate_document(
    doc: Document,
    llm: RecordingChatModel,
    *,
    config: GenerationConfig,
    judge: Detector | None = None,
    order: int = 0,
) -> DocumentRecord:
    """Run the configured mode on one document (Algorithm 1 for ``faithful`` and ``efficient``, see
    :mod:`._offline` for the offline modes); ``llm`` books calls on its ledger (one per document).

    ``config.mode`` must be resolved (not ``auto``): see :meth:`GenerationConfig.resolved`.
    """
    if config.mode == "auto":
        raise ConfigurationError("mode 'auto' must be resolved first: use config.resolved(llm)")
    get_screens(config.screens)  # an unknown name: a ConfigurationError naming the valid ones
    ctx = DocumentContext(doc, order, llm, judge, config)
    if config.mode in OFFLINE_MODES:
        return await generate_offline(ctx)
    return await _run(ctx)
