"""The calibration study's rephrased questions (#58 item 5): ``scopeguard calibrate``'s rephrasing
(:mod:`scopeguard.calibration._rephrase`, the packaged 1.5B) of each set's generated in-scope
questions, written as dataset folders for ``calibration_study.py --extra para=OUT``:

    python benchmarks/studies/calibration_rephrase.py --generated GEN --out OUT

Resumable (``OUT/<set>/rephrased.jsonl``).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

SETS = "eloq-gold-dev,squad2-train,subjqa,near-miss,implied,policies"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=Path, required=True, help="GEN/<set>: generation run folders")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sets", default=SETS)
    ap.add_argument("--llm", default="local:qwen2.5-coder-1.5b")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from scopeguard.calibration import generated_set, rephrase_in_scope
    from scopeguard.llm import from_spec
    from scopeguard.runs import JsonlLog

    llm = from_spec(args.llm)
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        src = args.generated / name
        if not (src / "questions.jsonl").is_file():
            logging.warning("%s: no generated questions in %s, skipped", name, src)
            continue
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        questions, kept = rephrase_in_scope(generated_set(src), llm, JsonlLog(out / "rephrased.jsonl"))
        (out / "documents.jsonl").write_text(
            (src / "documents.jsonl").read_text(encoding="utf-8"), encoding="utf-8"
        )
        with open(out / "questions.jsonl", "w", encoding="utf-8") as f:
            for q in questions.questions:
                if q.question.label == "in_scope":
                    row = {
                        "id": f"{q.question.id}_para",
                        "doc_id": q.question.doc_id,
                        "question": q.question.question,
                    }
                    f.write(json.dumps({**row, "label": "in_scope"}, ensure_ascii=False) + "\n")
        n = questions.count("in_scope")
        logging.info("%s: %d in-scope questions rephrased, %d kept their wording", name, n - kept, kept)


if __name__ == "__main__":
    main()
