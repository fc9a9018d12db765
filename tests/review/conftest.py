from __future__ import annotations

import json
from pathlib import Path

import pytest

HOSTILE = 'Harbour <script>window.__pwned = 1;</script> <img src=x onerror="window.__pwned = 2"> news & notes'


@pytest.fixture()
def review_dir(tmp_path: Path) -> Path:
    """A tiny generated-style dataset (invented text), one document carrying HTML/script."""
    docs = [
        {"doc_id": "d1", "text": "The ferry Kestrel carries 180 passengers across the bay in 35 minutes."},
        {"doc_id": "d2", "text": HOSTILE},
    ]
    qs = [
        {
            "id": "d1_ins_1",
            "doc_id": "d1",
            "question": "How many passengers does the Kestrel carry?",
            "label": "in_scope",
        },
        {
            "id": "d1_oos_1",
            "doc_id": "d1",
            "question": "Which shipyard built the Kestrel?",
            "label": "out_of_scope",
            "claim": "The Kestrel was built by a <b>famous</b> shipyard.",
            "round": 2,
            "response": "It was built by Harland shipyard.",
        },
        {
            "id": "d2_oos_1",
            "doc_id": "d2",
            "question": "What does <i>the</i> script do?",
            "label": "out_of_scope",
        },
    ]
    (tmp_path / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    return tmp_path


@pytest.fixture()
def calibration_dir(tmp_path: Path) -> Path:
    """A calibration folder (invented text) with 4 chosen questions to label."""
    from tests.review.chosen_folder import write_chosen

    return write_chosen(tmp_path / "calibration", 4)
