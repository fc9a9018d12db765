"""The inputs of the calibration study (#58 item 5): a few documents of each set to generate on.

For each set, ``--docs`` documents are drawn (``random.Random(58)``) among those with both kinds of
human question and, for the sets the packaged ``default`` head drew some documents of (SQuAD 2.0,
SubjQA: ``default_budget.py``'s sample), outside that draw; the set's other such documents are the
held-out pool of human questions. Writes ``OUT/<set>/documents.jsonl`` (the drawn documents, the
generator's input) and ``OUT/<set>/split.json`` (``generated_on``, ``pool``, ``used_in_training``):

    python benchmarks/studies/calibration_corpora.py --out /work/scratch/sg/corpora
    scopeguard generate OUT/<set>/documents.jsonl --out GEN/<set> --min-words 40 ...

Keep ``OUT`` somewhere that outlives the session (not ``/tmp``): the study reads it back.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from default_budget import DEFAULT_SETS, dataset_path, parse_sets

SETS = "eloq-gold-dev,squad2-train,subjqa,near-miss,implied,policies"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sets", default=SETS)
    ap.add_argument("--docs", type=int, default=6, help="documents drawn a set to generate on")
    args = ap.parse_args()

    from scopeguard.data import load_dataset
    from scopeguard.detection.signals import sample_documents

    trained = dict(parse_sets(DEFAULT_SETS))
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        data = load_dataset(dataset_path(name))
        used: set[str] = set()
        if trained.get(name):  # 0: every document drawn, the study reads the set left out
            used = set(sample_documents(data, trained[name] or None, seed=0).documents)
        labels: dict[str, set[str]] = {}
        for q in data.questions:
            labels.setdefault(q.doc_id, set()).add(q.label)
        both = sorted(d for d, kinds in labels.items() if len(kinds) == 2 and d not in used)
        drawn = random.Random(58).sample(both, min(args.docs, len(both)))
        pool = [d for d in both if d not in set(drawn)]
        folder = args.out / name
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "documents.jsonl", "w", encoding="utf-8") as f:
            for doc_id in drawn:
                f.write(
                    json.dumps({"id": doc_id, "text": data.documents[doc_id].text}, ensure_ascii=False) + "\n"
                )
        split = {"generated_on": drawn, "pool": pool, "used_in_training": sorted(used)}
        (folder / "split.json").write_text(json.dumps(split) + "\n", encoding="utf-8")
        print(f"{name}: {len(drawn)} drawn, {len(pool)} in the pool, {len(used)} in the head's draw")


if __name__ == "__main__":
    main()
