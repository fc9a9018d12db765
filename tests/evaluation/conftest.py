"""A tiny invented dataset and a scripted RAG system + judge for the evaluation tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from scopeguard.testing import ScriptedChatModel

DOCUMENTS = [
    {
        "doc_id": "d_sport",
        "topic": "sport",
        "text": "The Riverside Rowers won the regional eights final on Sunday by two boat lengths. "
        "Coach Mira Lind said the crew had trained at dawn six days a week since January.",
    },
    {
        "doc_id": "d_food",
        "topic": "food",
        "text": "A new night market opened in Eastgate with forty stalls selling dumplings, grilled corn "
        "and mango desserts. It will run every Friday until the end of October.",
    },
]
QUESTIONS = [
    {
        "id": "s_in",
        "doc_id": "d_sport",
        "question": "By how much did the Riverside Rowers win the final?",
        "label": "in_scope",
    },
    {
        "id": "s_oos",
        "doc_id": "d_sport",
        "question": "Which sponsor paid for the Riverside Rowers' new boat?",
        "label": "out_of_scope",
    },
    {
        "id": "f_in",
        "doc_id": "d_food",
        "question": "Until when will the Eastgate night market run?",
        "label": "in_scope",
    },
    {
        "id": "f_oos",
        "doc_id": "d_food",
        "question": "Why did the Eastgate night market ban plastic cutlery?",
        "label": "out_of_scope",
    },
]

DEFUSING = "The document does not mention this, so the question cannot be answered from the document."
ANSWERING = "The crew won it with help from a large sponsor who also paid for a new boat."


@pytest.fixture()
def tiny_dataset(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    root.mkdir()
    (root / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in DOCUMENTS) + "\n")
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    return root


def scripted_system() -> Callable[[str], str]:
    """RAG: defuses with the zero-shot-CoT prompt, answers otherwise. Judges: read the response."""

    def reply(prompt: str) -> str:
        if "confusing and unanswerable" in prompt:  # defusion judge (ELOQ B.5)
            last = prompt.rsplit("Answer:\n", 1)[1]
            verdict = "Yes" if last.startswith(DEFUSING) else "No"
            how = "declines" if verdict == "Yes" else "attempts"
            return f"The response {how} to answer. **The answer is: {verdict}.**"
        if "refuses to answer the question" in prompt:  # refusal judge
            return "The response gives an answer. The answer is: No."
        if "reason step by step" in prompt:
            return DEFUSING
        if "Which sponsor" in prompt or "plastic cutlery" in prompt:
            return ANSWERING
        return "By two boat lengths; it is open every Friday until the end of October."

    return reply


@pytest.fixture()
def scripted_llm() -> ScriptedChatModel:
    return ScriptedChatModel(scripted_system())
