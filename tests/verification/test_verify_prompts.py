"""Snapshots of the verification prompts (the paper's Figures 2-4, verbatim) and the refusal."""

from __future__ import annotations

from scopeguard.prompts import available_templates, render

FIG4 = (
    "Instruction: I want you to act as a classifier for given question-answer pairs. You will be presented "
    "with a question and two answers from different sources, and your task is to classify them as one of "
    "three categories: 1)Yes, meaning the answers are the same with respect to the question; 2)Not Related, "
    "meaning both answers are not related to the question; or 3)No, meaning the answers are different with "
    'respect to the question. Please reply with only the classification result ("Yes", "Not Related", or '
    '"No") and do not provide any further explanation!\n\nQuestion: Q?\nAnswer1: A1\nAnswer2: A2'
)
FIG3 = (
    "Instruction: I want you to act as an expert tasked with extracting answers from a given passage. Given "
    "a question and a passage that contains the answer to the question, your goal is to extract the answer "
    "from the passage and provide it in a concise format. Your response should include the extracted answer "
    "and any relevant supporting details from the passage. Remember to prioritize concision, while still "
    "providing a complete answer.\n\nQuestion: Q?\nAnswer: P."
)


def test_templates_are_shipped() -> None:
    names = set(available_templates())
    assert {"verify_answer", "verify_reader", "verify_classify", "verify_refusal"} <= names


def test_snapshots() -> None:
    assert render("verify_answer", question="Q?") == (
        "Instruction: You are an expert in this field. Please answer the question as simply and concisely "
        "as possible.\n\nQuestion: Q?\nAnswer:"
    )
    assert render("verify_reader", question="Q?", passage="P.") == FIG3
    assert render("verify_classify", question="Q?", llm_answer="A1", retriever_answer="A2") == FIG4
    assert render("verify_refusal", evidence_id="d#p1") == (
        "I can't give a reliable answer to that: the answer I drafted is contradicted by the source "
        "documents (see d#p1)."
    )
    assert render("verify_refusal", evidence_id="").endswith("source documents.")
