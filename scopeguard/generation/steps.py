"""Algorithm 1 of ELOQ (guided hallucination) for one document.

Steps (paper numbering): 1 extract ``n`` claims; 2 partition them (``i mod k``); 3-7 for each round
and subset, mask the subset as "(missing)" and have the LLM recover it without the document (faithful:
every subset in every round, ``rounds x k`` calls; efficient: one subset per round, ``rounds`` calls,
see :meth:`_DocumentRun._hallucinate`); 8 remove hallucinated claims
supported by the document or the true claims; 9 write one question per remaining claim; 10 drop the
questions the judge finds answerable from the document. In-scope questions come from appendix B.9.

Every reply is parsed strictly; an unusable reply is retried once with a firmer instruction, and every
failure is recorded as a :class:`StepIssue` with the reply id.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from scopeguard.detectors.base import Detector
from scopeguard.errors import ScopeGuardError
from scopeguard.generation.cache import CachedReply, RecordingChatModel
from scopeguard.generation.checkpoint import (
    ClaimVersion,
    DocumentRecord,
    DroppedQuestion,
    FilterRecord,
    GeneratedQuestion,
    StepIssue,
)
from scopeguard.generation.parsers import (
    MISSING,
    ReplyParseError,
    parse_claims,
    parse_guesses,
    parse_question_list,
    parse_questions_by_number,
    parse_recovered,
    parse_remaining,
)
from scopeguard.prompts import render
from scopeguard.types import Document

__all__ = ["GenerationConfig", "generate_document"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
JudgeFactory = Callable[[RecordingChatModel], Detector]


class GenerationConfig(BaseModel):
    """Settings of the generator; the defaults are the paper's (6 claims, 3 subsets, 3 rounds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["faithful", "efficient"] = "faithful"
    n_claims: int = Field(default=6, ge=2, le=30)
    n_subsets: int = Field(default=3, ge=1)
    rounds: int = Field(default=3, ge=1, le=10)
    n_in_scope: int = Field(default=3, ge=0, le=20)
    filter: bool = True
    judge_votes: int = Field(default=3, ge=1)
    judge_temperature: float = Field(default=0.7, ge=0.0)
    # scopeguard's addition: a judge sample without a verdict is asked once more for one
    # (see scopeguard.voting); False is the paper's judge.
    judge_followup: bool = True
    temperature: float = Field(default=0.0, ge=0.0)
    seed: int | None = 0
    retries: int = Field(default=1, ge=0, le=3)
    # scopeguard's addition, not in the paper: a document that ends with fewer than ``min_oos``
    # kept out-of-scope questions gets up to ``extra_rounds`` more recovery rounds, sampled at
    # ``extra_temperature`` (a greedy repeat would give the same replies), each followed by the
    # removal, question and filter steps for the claims that round changed. 0 = the paper.
    min_oos: int = Field(default=1, ge=0, le=20)
    extra_rounds: int = Field(default=2, ge=0, le=10)
    extra_temperature: float = Field(default=0.7, ge=0.0)
    # scopeguard's addition: when the paper's recovery prompt gives no usable reply (after its
    # retry), ask once more for the guesses alone (template gen_recover_guesses). False = the paper.
    recover_fallback: bool = True
    # scopeguard's addition: hallucinated facts whose question was lost in the batched question
    # step (an unusable reply, or the same question written for several facts) are asked for one
    # at a time, with the paper's prompt and a one-fact list. Facts the model chose to omit stay
    # omitted, as the paper's prompt allows. False = the paper.
    question_fallback: bool = True

    @classmethod
    def paper(cls, **settings: object) -> GenerationConfig:
        """The paper's Algorithm 1 with every scopeguard addition off (``settings`` override).

        Pair it with ``Generator(judge="judge")`` for the paper's LLM-judge filter.
        """
        additions: dict[str, object] = {
            "judge_followup": False,
            "min_oos": 0,
            "recover_fallback": False,
            "question_fallback": False,
        }
        return cls(**{**additions, **settings})  # type: ignore[arg-type]


def _parse_recovery(
    reply: CachedReply, lenient: bool, *, facts: list[str], masked: list[int]
) -> dict[int, str]:
    return parse_recovered(reply.text, facts, masked, truncated=reply.truncated, lenient=lenient)


def _words(text: str) -> int:
    return len(text.split())


class _DocumentRun:
    def __init__(
        self,
        doc: Document,
        order: int,
        llm: RecordingChatModel,
        judge: Detector | None,
        cfg: GenerationConfig,
    ) -> None:
        self.doc, self.order, self.cfg, self.judge = doc, order, cfg, judge
        self.ledger = llm.ledger
        self.llm = llm
        self.issues: list[StepIssue] = []
        self._seen_questions: set[str] = set()

    async def ask(
        self,
        step: str,
        template: str,
        parse: Callable[[CachedReply, bool], T],
        max_tokens: int,
        sampling: tuple[float, int | None] | None = None,
        **variables: object,
    ) -> tuple[T, CachedReply] | None:
        """Call, parse strictly; on failure retry with ``firm=True``; the last retry may parse leniently.

        ``sampling`` overrides the configured ``(temperature, seed)``.
        """
        view = self.llm.for_step(step)
        temperature, seed = sampling if sampling is not None else (self.cfg.temperature, self.cfg.seed)
        for attempt in range(self.cfg.retries + 1):
            prompt = render(template, firm=attempt > 0, **variables)
            reply = await view.acall(prompt, temperature=temperature, max_tokens=max_tokens, seed=seed)
            try:
                return parse(reply, False), reply
            except ReplyParseError as exc:
                self.issues.append(
                    StepIssue(step=step, reason=exc.reason, reply_id=reply.id, detail=str(exc))
                )
                if attempt > 0:
                    try:
                        value = parse(reply, True)
                    except ReplyParseError:
                        continue
                    self.issues.append(
                        StepIssue(step=step, reason="accepted_lenient", reply_id=reply.id, accepted=True)
                    )
                    return value, reply
        return None

    def _failed(self, error: str, started: float, **fields: object) -> DocumentRecord:
        return self._record("failed", started, error=error, **fields)

    def _record(self, status: Literal["done", "failed"], started: float, **fields: object) -> DocumentRecord:
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
            seconds=time.perf_counter() - started,
            **fields,  # type: ignore[arg-type]
        )

    async def run(self) -> DocumentRecord:
        cfg, doc, started = self.cfg, self.doc, time.perf_counter()
        n = cfg.n_claims
        got = await self.ask(
            "extract",
            "gen_extract_claims",
            lambda r, lenient: parse_claims(r.text, n, truncated=r.truncated, lenient=lenient),
            max_tokens=60 * n + 80,
            document=doc.text,
            n=n,
        )
        if got is None:
            return self._failed("claim extraction failed: no usable reply", started)
        claims, extract_reply = got
        history = [
            ClaimVersion(position=i, round=0, text=c, reply_id=extract_reply.id) for i, c in enumerate(claims)
        ]
        latest = list(history)
        await self._hallucinate(claims, latest, history, range(1, cfg.rounds + 1))
        true_norm = {c.strip().lower() for c in claims}
        hallucinated = [v for v in latest if v.round > 0]
        candidates = [i for i, h in enumerate(hallucinated) if h.text.strip().lower() not in true_norm]
        remaining, remove_id = await self._remove(claims, hallucinated, candidates)
        questions, dropped = await self._oos_questions(claims, hallucinated, remaining, remove_id, 0)
        extra = 0
        while len(questions) < cfg.min_oos and extra < cfg.extra_rounds:
            extra += 1
            rnd = cfg.rounds + extra
            seed = None if cfg.seed is None else cfg.seed + rnd
            await self._hallucinate(
                claims, latest, history, range(rnd, rnd + 1), sampling=(cfg.extra_temperature, seed)
            )
            seen = {h.text.strip().lower() for h in hallucinated} | true_norm
            start = len(hallucinated)
            hallucinated += [v for v in latest if v.round == rnd]
            new = [
                i for i in range(start, len(hallucinated)) if hallucinated[i].text.strip().lower() not in seen
            ]
            kept_now, remove_id = await self._remove(claims, hallucinated, new)
            remaining += kept_now
            more, gone = await self._oos_questions(claims, hallucinated, kept_now, remove_id, len(questions))
            questions += more
            dropped += gone
        if extra:
            self.issues.append(
                StepIssue(
                    step="extra_rounds",
                    reason="top_up",
                    accepted=True,
                    detail=f"{extra} extra round(s) for at least {cfg.min_oos} out-of-scope question(s); "
                    f"{len(questions)} kept",
                )
            )
        ins = await self._in_scope()
        all_q = questions + ins
        return self._record(
            "done",
            started,
            claims=tuple(claims),
            claim_history=tuple(history),
            hallucinated=tuple(hallucinated),
            remaining=tuple(remaining),
            questions=tuple(all_q),
            dropped=tuple(dropped),
        )

    async def _hallucinate(
        self,
        claims: list[str],
        latest: list[ClaimVersion],
        history: list[ClaimVersion],
        rounds: range,
        sampling: tuple[float, int | None] | None = None,
    ) -> None:
        """Steps 3-7. Faithful: every round masks every subset in turn (rounds x k calls).

        Efficient: round ``r`` masks only subset ``S_((r-1) mod k)`` (``rounds`` calls; with the
        defaults one sweep in which every claim is recovered once, each time in the context of the
        claims hallucinated so far). The masked claims are never shown to the model in either mode.
        """
        n, k = len(claims), min(self.cfg.n_subsets, len(claims))
        subsets = [[i for i in range(n) if i % k == j] for j in range(k)]
        for rnd in rounds:
            this_round = subsets if self.cfg.mode == "faithful" else [subsets[(rnd - 1) % k]]
            for subset in this_round:
                facts = [MISSING if i in subset else latest[i].text for i in range(n)]
                got = await self.ask(
                    "recover",
                    "gen_recover_claims",
                    functools.partial(_parse_recovery, facts=facts, masked=subset),
                    max_tokens=60 * n + 80,
                    sampling=sampling,
                    facts=facts,
                    n=n,
                )
                if got is None and self.cfg.recover_fallback:
                    got = await self._recover_guesses(facts, subset, sampling)
                if got is not None:
                    self._apply(got[0], rnd, got[1].id, latest, history)

    async def _recover_guesses(
        self, facts: list[str], subset: list[int], sampling: tuple[float, int | None] | None
    ) -> tuple[dict[int, str], CachedReply] | None:
        """The fallback: only the guesses, each under its number; copies are left out (recorded)."""

        def parse(reply: CachedReply, lenient: bool) -> tuple[dict[int, str], list[int]]:
            return parse_guesses(reply.text, facts, subset, truncated=reply.truncated, lenient=lenient)

        got = await self.ask(
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
            self.issues.append(
                StepIssue(
                    step="recover_guesses",
                    reason="partial",
                    reply_id=reply.id,
                    accepted=True,
                    detail=f"no new guess for facts {[i + 1 for i in rejected]} (missing or a copy): "
                    "those claims keep their previous version",
                )
            )
        return guesses, reply

    @staticmethod
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

    async def _remove(
        self, claims: list[str], hallucinated: list[ClaimVersion], candidates: list[int]
    ) -> tuple[list[int], str | None]:
        if not candidates:
            return [], None
        false_facts = [hallucinated[i].text for i in candidates]
        got = await self.ask(
            "remove",
            "gen_remove_claims",
            lambda r, _l: parse_remaining(r.text, false_facts, truncated=r.truncated),
            max_tokens=60 * len(false_facts) + 80,
            document=self.doc.text,
            true_facts=claims,
            false_facts=false_facts,
        )
        if got is None:
            self.issues.append(
                StepIssue(
                    step="remove",
                    reason="kept_all",
                    accepted=True,
                    detail="no usable reply: the filter decides",
                )
            )
            return candidates, None
        return [candidates[j] for j in got[0]], got[1].id

    async def _oos_questions(
        self,
        claims: list[str],
        hallucinated: list[ClaimVersion],
        remaining: list[int],
        remove_id: str | None,
        first_id: int,
    ) -> tuple[list[GeneratedQuestion], list[DroppedQuestion]]:
        if not remaining:
            return [], []
        facts = [hallucinated[i].text for i in remaining]
        written = await self._write_questions(facts)
        kept: list[GeneratedQuestion] = []
        dropped: list[DroppedQuestion] = []
        for j, question, reply_id in written:
            h = hallucinated[remaining[j]]
            filt = await self._filter(question)
            if filt is not None and filt.label != "out_of_scope":
                reason = (
                    "filter: answerable from the document" if filt.label == "in_scope" else "filter: unknown"
                )
                dropped.append(
                    DroppedQuestion(question=question, claim_index=h.position, reason=reason, filter=filt)
                )
                continue
            ids: dict[str, tuple[str, ...]] = {"question": (reply_id,), "claim": (h.reply_id or "",)}
            if remove_id:
                ids["remove"] = (remove_id,)
            if filt is not None:
                ids["filter"] = filt.reply_ids
            kept.append(
                GeneratedQuestion(
                    id=f"{self.doc.id}_oos_{first_id + len(kept)}",
                    doc_id=self.doc.id,
                    question=question,
                    label="out_of_scope",
                    words=_words(question),
                    claim_index=h.position,
                    true_claim=claims[h.position],
                    hallucinated_claim=h.text,
                    round=h.round,
                    reply_ids=ids,
                    filter=filt,
                )
            )
        return kept, dropped

    async def _write_questions(self, facts: list[str]) -> list[tuple[int, str, str]]:
        """Step 9: ``(fact index, question, reply id)`` for the facts that got a new question.

        One call for all ``facts`` (the paper); with ``question_fallback``, the facts whose question
        was lost (no usable reply, or a repeat of another question) are asked for one by one.
        """

        def parse(n: int) -> Callable[[CachedReply, bool], dict[int, str]]:
            return lambda r, lenient: parse_questions_by_number(
                r.text, n, truncated=r.truncated, lenient=lenient
            )

        got = await self.ask(
            "oos_questions",
            "gen_oos_questions",
            parse(len(facts)),
            max_tokens=50 * len(facts) + 60,
            document=self.doc.text,
            facts=facts,
        )
        written: list[tuple[int, str, str]] = []
        lost: list[int] = []
        if got is None:
            lost = list(range(len(facts)))
        else:
            by_fact, reply = got
            for j, question in sorted(by_fact.items()):
                if self._unique("oos_questions", [question], reply.id):
                    written.append((j, question, reply.id))
                else:
                    lost.append(j)
        if not self.cfg.question_fallback or len(facts) == 1:
            return written  # a one-fact list was already asked for alone
        for j in lost:
            one = await self.ask(
                "oos_questions_each",
                "gen_oos_questions",
                parse(1),
                max_tokens=110,
                document=self.doc.text,
                facts=[facts[j]],
            )
            if one is not None and self._unique("oos_questions_each", [one[0][0]], one[1].id):
                written.append((j, one[0][0], one[1].id))
        return sorted(written)

    async def _filter(self, question: str) -> FilterRecord | None:
        if not self.cfg.filter or self.judge is None:
            return None
        before = len(self.ledger.reply_ids)
        try:
            verdict = await self.judge.adetect(question, [self.doc])
        except ScopeGuardError as exc:
            logger.warning("filter failed on a question of %s: %s", self.doc.id, exc)
            return FilterRecord(
                label="unknown", error=str(exc), reply_ids=tuple(self.ledger.reply_ids[before:])
            )
        return FilterRecord(
            label=verdict.label,
            score=verdict.score,
            detector=verdict.detector,
            votes=tuple(v.model_dump() for v in verdict.votes),
            llm_calls=verdict.llm_calls,
            reply_ids=tuple(self.ledger.reply_ids[before:]),
            error=verdict.error,
        )

    async def _in_scope(self) -> list[GeneratedQuestion]:
        n = self.cfg.n_in_scope
        if n == 0:
            return []
        got = await self.ask(
            "in_scope_questions",
            "gen_in_scope_questions",
            lambda r, lenient: parse_question_list(r.text, n, truncated=r.truncated, lenient=lenient),
            max_tokens=50 * n + 60,
            document=self.doc.text,
            n=n,
        )
        if got is None:
            return []
        questions, reply = got
        unique = self._unique("in_scope_questions", questions, reply.id)
        return [
            GeneratedQuestion(
                id=f"{self.doc.id}_ins_{k}",
                doc_id=self.doc.id,
                question=q,
                label="in_scope",
                words=_words(q),
                reply_ids={"question": (reply.id,)},
            )
            for k, q in enumerate(unique)
        ]

    def _unique(self, step: str, questions: list[str], reply_id: str) -> list[str]:
        """``questions`` without repeats of a question this document already has (recorded)."""
        out: list[str] = []
        for q in questions:
            key = " ".join(q.lower().split())
            if key in self._seen_questions:
                self.issues.append(
                    StepIssue(step=step, reason="duplicate", reply_id=reply_id, accepted=True, detail=q)
                )
                continue
            self._seen_questions.add(key)
            out.append(q)
        return out


async def generate_document(
    doc: Document,
    llm: RecordingChatModel,
    *,
    config: GenerationConfig,
    judge: Detector | None = None,
    order: int = 0,
) -> DocumentRecord:
    """Run Algorithm 1 on one document; ``llm`` books calls on its ledger (one ledger per document)."""
    return await _DocumentRun(doc, order, llm, judge, config).run()
