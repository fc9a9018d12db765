"""Rephrasing generated in-scope questions: unusable replies and LLM errors keep the wording."""

from __future__ import annotations

import json
from pathlib import Path

from scopeguard.calibration._questions import CalibrationQuestion, QuestionSet
from scopeguard.calibration._rephrase import rephrase_in_scope
from scopeguard.data import LabeledQuestion
from scopeguard.errors import LLMError
from scopeguard.runs import JsonlLog
from scopeguard.testing import ScriptedChatModel
from scopeguard.types import Document

DOC = Document(id="d", text="The ferry leaves at nine and returns at five.")


def _set(*questions: tuple[str, str]) -> QuestionSet:
    return QuestionSet(
        name="generated",
        description="scripted",
        questions=tuple(
            CalibrationQuestion(
                question=LabeledQuestion(id=f"q{i}", doc_id="d", question=q, label=label),  # type: ignore[arg-type]
                document=DOC,
                source="generated",
            )
            for i, (q, label) in enumerate(questions)
        ),
    )


def test_unusable_replies_and_errors_keep_the_wording_and_errors_are_asked_again(tmp_path: Path) -> None:
    replies = {
        "When does the ferry leave?": json.dumps({"questions": ["What time does the boat go?"]}),
        "When does the ferry return?": "I cannot help with that.",
        "Why does the ferry stop?": LLMError("server down"),
    }
    llm = ScriptedChatModel(lambda p: next(v for k, v in replies.items() if k in p), model="w")
    questions = _set(
        ("When does the ferry leave?", "in_scope"),
        ("When does the ferry return?", "in_scope"),
        ("Why does the ferry stop?", "in_scope"),
        ("How much is a ticket?", "out_of_scope"),
    )
    log = JsonlLog(tmp_path / "rephrased.jsonl")
    out, kept = rephrase_in_scope(questions, llm, log, progress=False)
    assert [q.question.question for q in out.questions] == [
        "What time does the boat go?",
        "When does the ferry return?",
        "Why does the ferry stop?",
        "How much is a ticket?",
    ]
    assert kept == 2 and len(llm.calls) == 3
    assert [q.question.id for q in out.questions] == ["q0", "q1", "q2", "q3"]
    # the error was not written: a rerun asks that question alone again
    replies["Why does the ferry stop?"] = json.dumps({"questions": ["What makes the boat halt?"]})
    again, kept = rephrase_in_scope(questions, llm, JsonlLog(tmp_path / "rephrased.jsonl"), progress=False)
    assert len(llm.calls) == 4 and kept == 1
    assert again.questions[2].question.question == "What makes the boat halt?"
