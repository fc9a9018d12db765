"""Can the packaged writer tell a natural out-of-scope question from an unnatural one? (#59; not shipped)

#59 lists "a learned naturalness score" among the ways to keep only questions a person would send.
Before building one into the generator, this asks the packaged Qwen2.5-Coder 1.5B, for every kept
out-of-scope question of the given run folders that has a hand label in
``benchmarks/results/generation_domains_review.json``, whether it is a clear, sensible question a
person could ask: once shown the document (``doc``), once the question alone (``nodoc``). The score
is P(Yes) / (P(Yes) + P(No)) of the reply's first token, read by the project's verdict scorer
(:func:`scopeguard.detection.read.verdict_scorer`, llama.cpp through its one loader). Per prompt
it prints the AUROC against two hand labels: ``natural``, and ``good`` (natural and unanswerable,
what the generator wants):

    python benchmarks/studies/naturalness_probe.py --run policies=DIR --run news=DIR ...

A domain may be given several run folders (two arms of one draw); a question kept by both is scored
once. Writes ``benchmarks/studies/results/naturalness_probe.json`` (scores and label keys, no text).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model
from generation_domains import REVIEW, label_key, read_labels, records

RESULT = Path(__file__).resolve().parent / "results" / "naturalness_probe.json"
DOCUMENT_CHARS = 2500
PROMPTS = {
    "doc": 'Text: "{document}"\n\nA reader of this text asks: "{question}"\nIs this a clear, sensible '
    "question that a real person could ask about this text (a question with a real answer, not "
    "garbled, not based on a false idea)? Answer Yes or No.",
    "nodoc": 'A customer or reader asks: "{question}"\nIs this a clear, sensible question a real person '
    "would ask? Answer Yes or No.",
}


def auroc_of(rows: list[dict[str, Any]], score: str, label: str) -> float | None:
    """The AUROC of ``score`` for ``label`` (:func:`~scopeguard.detection.head.calibration.auroc`);
    ``None`` without both classes."""
    from scopeguard.detection.head.calibration import auroc

    value = auroc([r[score] for r in rows], [int(r[label]) for r in rows])
    return None if math.isnan(value) else value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="DOMAIN=RUN_FOLDER, repeatable")
    ap.add_argument("--llm", default="local:qwen2.5-coder-1.5b", help="a log-prob verdict spec")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()

    from scopeguard.detection.read import verdict_scorer
    from scopeguard.llm.base import ChatMessage

    scorer = verdict_scorer(args.llm)
    labels = read_labels(REVIEW)
    rows: dict[str, dict[str, Any]] = {}
    for domain, _, root in (r.partition("=") for r in args.run):
        for rec in records(Path(root)):
            for q in rec.questions:
                key = label_key(rec.doc_id, q.question)
                lab = labels.get(key)
                if q.label != "out_of_scope" or key in rows or not lab or lab.get("natural") is None:
                    continue
                start = time.perf_counter()
                row: dict[str, Any] = {
                    "domain": domain,
                    "key": key,
                    "natural": bool(lab["natural"]),
                    "good": bool(lab["natural"]) and not lab["answerable"],
                }
                for name, prompt in PROMPTS.items():
                    text = prompt.format(document=rec.text[:DOCUMENT_CHARS], question=q.question)
                    score = scorer.score([ChatMessage(role="user", content=text)])
                    row[name] = round(1.0 - score.p_no, 4)
                row["seconds"] = round(time.perf_counter() - start, 2)
                rows[key] = row
    scored = list(rows.values())
    table = {
        name: {label: auroc_of(scored, name, label) for label in ("natural", "good")} for name in PROMPTS
    }
    print(
        f"{len(scored)} questions, {sum(r['natural'] for r in scored)} natural, "
        f"{sum(r['good'] for r in scored)} natural and unanswerable"
    )
    for name, aucs in table.items():
        print(f"{name:<6}", "  ".join(f"AUROC {label} {v:.2f}" for label, v in aucs.items() if v is not None))
    out = {"machine": cpu_model(), "llm": args.llm, "runs": args.run, "auroc": table, "questions": scored}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
