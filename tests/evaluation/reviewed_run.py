"""A tiny reviewed evaluation run (invented text) for the agreement tests of the library and CLI.

Three out-of-scope questions judged by the defusion judge (``q4``'s judgement is unknown), the
dataset's ``responses.jsonl`` with the responses the review page shows, and two reviewers:

========  =====  =====  =====  =====
          q1     q2     q3     q4
========  =====  =====  =====  =====
judge     yes    no     yes    ?
alice     yes    no     no     yes
bob       yes    yes    no
========  =====  =====  =====  =====
"""

from __future__ import annotations

import json
from pathlib import Path

from scopeguard.evaluation import Judgement, ResponseRecord, RunConfig, RunStore
from scopeguard.review import LabelStore

RESPONSES = {
    "q1": "The document does not say who sponsored the boat.",
    "q2": "The boat was paid for by Harbour Bank.",
    "q3": "It is not stated; perhaps the city council.",
    "q4": "The article gives no price.",
}
JUDGE = {"q1": True, "q2": False, "q3": True, "q4": None}
LABELS = {
    "alice": {"q1": "yes", "q2": "no", "q3": "no", "q4": "yes"},
    "bob": {"q1": "yes", "q2": "yes", "q3": "no"},
}


def _jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_reviewed_run(root: Path) -> tuple[Path, Path]:
    """``(run_dir, dataset_dir)`` under ``root``."""
    data = root / "dataset"
    data.mkdir()
    _jsonl(data / "documents.jsonl", [{"doc_id": "d", "text": "The rowing club bought a new boat in May."}])
    questions = [
        {"id": q, "doc_id": "d", "question": f"Who paid for the boat ({q})?", "label": "out_of_scope"}
        for q in RESPONSES
    ]
    _jsonl(data / "questions.jsonl", questions)
    _jsonl(data / "responses.jsonl", [{"question_id": q, "response": r} for q, r in RESPONSES.items()])
    run = root / "run"
    store = RunStore(run)
    store.open(RunConfig(dataset=str(data), rag="scripted", judge="scripted", prompts=("basic", "two-shot")))
    for q, response in RESPONSES.items():
        base = {"question_id": q, "doc_id": "d", "topic": "sport", "label": "out_of_scope", "question": q}
        store.append_response(
            ResponseRecord(**base, prompt="basic", response=response, defusion=Judgement(value=JUDGE[q]))
        )
        # another prompt's response, which no reviewer saw: never compared
        store.append_response(
            ResponseRecord(
                **base, prompt="two-shot", response="Harbour Bank.", defusion=Judgement(value=False)
            )
        )
    for reviewer, labels in LABELS.items():
        store_ = LabelStore(data, reviewer)
        for q, value in labels.items():
            store_.set(q, "defused", value)
    return run, data
