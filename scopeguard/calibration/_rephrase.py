"""Generated in-scope questions in a reader's own words, resumably: ``DIR/rephrased.jsonl``.

The generator writes an in-scope question from the document's own words; people ask in theirs, and
their answerable questions read as less answerable (0.2-2.2 logits apart at the budget's quantile on
six corpora: docs/research/calibration.md). Before a calibration reads generated in-scope questions,
the writer rephrases each one (``calibration_rephrase.j2``) and the rephrased question is read in
its place. A reply that is no usable question, or an LLM error, keeps the question as written
(counted in the notes); each result is appended as it comes, keyed by the writer and the question,
so a rerun asks only the questions not done yet.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from scopeguard._progress import progress_meter
from scopeguard.calibration._questions import CalibrationQuestion, QuestionSet
from scopeguard.detection.read.features import stable_hash
from scopeguard.errors import LLMError
from scopeguard.generation.offline import MAX_TOKENS_PER_QUESTION, parse_questions, questions_schema
from scopeguard.generation.parsers import ReplyParseError
from scopeguard.llm.base import ChatModel
from scopeguard.prompts import render
from scopeguard.runs import JsonlLog

__all__ = ["REPHRASED_FILE", "Rephrased", "rephrase_in_scope"]

logger = logging.getLogger(__name__)

REPHRASED_FILE = "rephrased.jsonl"


class Rephrased(BaseModel):
    """One line of ``rephrased.jsonl``: a question as written and as rephrased (``""``: the reply
    was no usable question, the question is read as written)."""

    model_config = ConfigDict(frozen=True)

    key: str
    id: str
    question: str
    rephrased: str
    writer: str


def _ask(llm: ChatModel, question: str) -> str:
    """The rephrased question, or ``""`` when the reply is none."""
    options: dict[str, Any] = {}
    if getattr(llm, "supports_json_schema", False):
        options["json_schema"] = questions_schema(1)
    reply = llm.complete(
        render("calibration_rephrase", question=question),
        temperature=0.0,
        max_tokens=MAX_TOKENS_PER_QUESTION + 40,
        **options,
    )
    try:
        return parse_questions(reply.text, 1, lenient=True)[0]
    except ReplyParseError:
        return ""


def rephrase_in_scope(
    questions: QuestionSet, llm: ChatModel, log: JsonlLog, *, progress: bool | None = None
) -> tuple[QuestionSet, int]:
    """``questions`` with each in-scope question rephrased by ``llm`` (out-of-scope ones as they
    are), and how many in-scope questions kept their wording (no usable reply, or an LLM error;
    an error is not written, so a rerun asks again)."""
    writer = str(llm.name)
    known = {row.key: row.rephrased for row in log.records(Rephrased)}
    # each in-scope question with its key, computed once
    asked = {
        q.question.id: stable_hash(writer, q.question.question)
        for q in questions.questions
        if q.question.label == "in_scope"
    }
    todo = [q for q in questions.questions if q.question.id in asked and asked[q.question.id] not in known]
    bar = progress_meter(total=len(todo), desc="rephrase", enabled=progress)
    try:
        for q in todo:
            key = asked[q.question.id]
            try:
                text = _ask(llm, q.question.question)
            except LLMError as exc:
                logger.warning("question %s: rephrasing failed: %s", q.question.id, exc)
                bar.update(1)
                continue
            log.append(
                Rephrased(
                    key=key, id=q.question.id, question=q.question.question, rephrased=text, writer=writer
                )
            )
            known[key] = text
            bar.update(1)
    finally:
        bar.close()
    out: list[CalibrationQuestion] = []
    kept = 0
    for q in questions.questions:
        text = known.get(asked[q.question.id], "") if q.question.id in asked else ""
        kept += q.question.id in asked and not text
        out.append(q if not text else replace(q, question=q.question.model_copy(update={"question": text})))
    described = f"{questions.description}; in-scope questions rephrased by {writer}"
    return replace(questions, description=described, questions=tuple(out)), kept
