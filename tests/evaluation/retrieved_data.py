"""A tiny invented dataset for reading questions against retrieved documents, with the
P(out of scope) a scripted detector gives each question."""

from __future__ import annotations

import json
from pathlib import Path

DOCS = {
    "lib": "The town of Brindlewick opened a new public library on Saturday. Mayor Elena Torvik said "
    "the building cost 12 million dollars, paid by a regional grant.",
    "ferry": "A storm closed the harbour of Kessling for two days and delayed the ferry to the islands. "
    "The harbour master said repairs to the pier would take a week.",
    "bakery": "The Oakmere bakery won a county prize for its rye sourdough, baked in a wood oven "
    "that the owner built from old bricks.",
}
# (id, own document, question, label, P(out of scope) the scripted detector gives)
QUESTIONS = [
    ("q1", "lib", "How much did the Brindlewick library building cost?", "in_scope", 0.1),
    # answerable from the ferry story, but worded like the library one: bm25 ranks the library first
    ("q2", "ferry", "Did Mayor Elena Torvik say the Brindlewick grant paid for the ferry?", "in_scope", 0.9),
    ("q3", "bakery", "Which county prize did the Oakmere bakery rye sourdough win?", "in_scope", 0.2),
    ("q4", "ferry", "What compensation did the Kessling ferry passengers receive?", "out_of_scope", 0.7),
    ("q5", "bakery", "How much did the Oakmere bakery pay for its wood oven bricks?", "out_of_scope", 0.3),
]
SCORES = {q: p for _, _, q, _, p in QUESTIONS}


def write_dataset(folder: Path) -> Path:
    """The dataset as a folder (documents.jsonl + questions.jsonl); returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = [{"doc_id": i, "text": t} for i, t in DOCS.items()]
    (folder / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    rows = [{"id": i, "doc_id": d, "question": q, "label": y} for i, d, q, y, _ in QUESTIONS]
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder
