"""Out-of-scope questions borrowed from a document's neighbours: a pilot for #59 (not built).

In a RAG system a question goes out of scope when retrieval returns a document next to the one that
answers it. This asks each target document the in-scope questions of its nearest documents in the
same corpus (all-MiniLM-L6-v2 cosine), keeps those the generator's filter finds out of scope (the
``logprob`` detector at its threshold plus ``GenerationConfig().oos_margin``, as the generator's
keeper does), and puts them beside the target to be read by hand:

    # targets and their neighbours (WORK/DOMAIN_targets.jsonl, WORK/DOMAIN_neighbours.jsonl)
    python benchmarks/studies/neighbour_questions.py plan --work W --seed 1208 --targets 8
    # the neighbours' in-scope questions, written by the generator (each domain)
    scopeguard generate W/news_neighbours.jsonl --out W/news_in --mode in_scope --min-words 40
    # each target asked its neighbours' questions; a sheet to read in W, empty labels in the review file
    python benchmarks/studies/neighbour_questions.py ask --work W --domain news ...
    # fill natural / answerable in the review file, then
    python benchmarks/studies/neighbour_questions.py report --work W --domain news ...

``ask --source dataset`` takes the data set's own (human-written) in-scope questions instead of the
generator's: what the method gives with the best questions a neighbour could lend. ``plan --ids
DOMAIN=ID,ID`` names the targets instead of drawing them. Labels are kept as hashes in
``benchmarks/studies/results/neighbour_questions_review.json`` (keys ``DOC_ID:SHA`` as in
``generation_domains.py``), the counts in ``results/neighbour_questions.json``; no text.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _report import cpu_model, wilson
from generation_domains import ROOT, SHARED, label_key, read_labels, records, write_labels

from scopeguard.data import read_jsonl

HERE = Path(__file__).resolve().parent
REVIEW = HERE / "results" / "neighbour_questions_review.json"
RESULT = HERE / "results" / "neighbour_questions.json"
READ_BEFORE = ROOT / "benchmarks" / "results" / "generation_domains_review.json"
#: each domain's corpus: data set folders, and whether a fresh draw leaves out documents read before
POOLS: dict[str, tuple[list[Path], bool]] = {
    "wikipedia": ([SHARED / "squad2-train"], True),
    "reviews": ([SHARED / "subjqa"], True),
    "news": ([SHARED / "eloq-gold-dev", ROOT / "benchmarks" / "data" / "news-unseen"], False),
    "policies": (
        [ROOT / "benchmarks" / "data" / "policies", ROOT / "benchmarks" / "data" / "policies-unseen"],
        False,
    ),
}
MIN_WORDS = 40
NEAREST_MAX = 0.97  # a neighbour this close is the same text again
PER_TARGET = 6  # candidates asked of a target: its neighbours' questions most like it
DOCUMENT_CHARS = 2500


def pool(domain: str) -> list[dict[str, Any]]:
    folders, _ = POOLS[domain]
    docs = [d for f in folders for d in read_jsonl(f / "documents.jsonl")]
    return [d for d in docs if len(d["text"].split()) >= MIN_WORDS]


def embed(texts: list[str]) -> Any:
    from scopeguard.models import sentence_model

    return sentence_model("minilm").encode(texts, normalize_embeddings=True, batch_size=32)


def plan(args: argparse.Namespace) -> None:
    ids = dict(pair.split("=", 1) for pair in args.ids)
    read = {k.split(":")[0] for k in read_labels(READ_BEFORE)} | {
        k.split(":")[0] for k in read_labels(REVIEW)
    }
    out: dict[str, Any] = {}
    for domain in args.domain or list(POOLS):
        docs = pool(domain)
        vectors = embed([d["text"][:2000] for d in docs])
        if domain in ids:
            index = {d["doc_id"]: i for i, d in enumerate(docs)}
            targets = [index[i] for i in ids[domain].split(",")]
        else:
            fresh = [i for i, d in enumerate(docs) if not (POOLS[domain][1] and d["doc_id"] in read)]
            targets = random.Random(args.seed).sample(fresh, args.targets)
        out[domain], lend = [], set()
        for t in targets:
            sims = vectors @ vectors[t]
            near = [int(j) for j in (-sims).argsort() if j != t and sims[j] < NEAREST_MAX][: args.neighbours]
            out[domain].append(
                {
                    "target": docs[t]["doc_id"],
                    "neighbours": [[docs[j]["doc_id"], round(float(sims[j]), 3)] for j in near],
                }
            )
            lend.update(near)
        args.work.mkdir(parents=True, exist_ok=True)
        for name, rows in (("targets", targets), ("neighbours", sorted(lend))):
            lines = [json.dumps({"doc_id": docs[i]["doc_id"], "text": docs[i]["text"]}) + "\n" for i in rows]
            (args.work / f"{domain}_{name}.jsonl").write_text("".join(lines), encoding="utf-8")
        print(f"{domain}: {len(targets)} targets, {len(lend)} neighbours")
    (args.work / "plan.json").write_text(json.dumps({"seed": args.seed, "plan": out}, indent=1) + "\n")


def lent_questions(domain: str, work: Path, source: str) -> dict[str, list[str]]:
    """Each neighbour's in-scope questions: kept by the generator's run, or the data set's own."""
    out: dict[str, list[str]] = {}
    if source == "generated":
        for rec in records(work / f"{domain}_in"):
            out[rec.doc_id] = [q.question for q in rec.questions if q.label == "in_scope"]
        return out
    for folder in POOLS[domain][0]:
        if (folder / "questions.jsonl").is_file():
            for q in read_jsonl(folder / "questions.jsonl"):
                if q["label"] == "in_scope":
                    out.setdefault(q["doc_id"], []).append(q["question"])
    return out


def ask(args: argparse.Namespace) -> None:
    from scopeguard.detection.detectors.registry import get_detector
    from scopeguard.generation.config import GenerationConfig
    from scopeguard.generation.offline import margin_floor
    from scopeguard.types import Document

    detector = get_detector("logprob")
    floor = margin_floor(detector, GenerationConfig().oos_margin)  # the keeper's own floor
    steps = json.loads((args.work / "plan.json").read_text())["plan"]
    labels = read_labels(REVIEW)
    for domain in args.domain:
        texts = {d["doc_id"]: d["text"] for d in read_jsonl(args.work / f"{domain}_targets.jsonl")}
        lent = lent_questions(domain, args.work, args.source)
        rows, sheet = [], []
        for step in steps[domain]:
            target = step["target"]
            candidates = [(q, n) for n, _ in step["neighbours"] for q in lent.get(n, [])]
            sheet += ["", f"=== {target}", texts[target][:DOCUMENT_CHARS]]
            if not candidates:
                continue
            likeness = embed([q for q, _ in candidates]) @ embed([texts[target][:2000]])[0]
            for j in (-likeness).argsort()[:PER_TARGET]:
                question, source = candidates[int(j)]
                verdict = detector.detect(question, [Document(id=target, text=texts[target])])
                score = float(verdict.score if verdict.score is not None else 0.0)
                key = label_key(target, question)
                rows.append(
                    {"key": key, "source_doc": source, "score": round(score, 4), "kept": score >= floor}
                )
                if score >= floor:
                    sheet.append(f"  [{key.split(':')[1]}] {question}")
                    labels.setdefault(
                        key, {"domain": domain, "source": args.source, "natural": None, "answerable": None}
                    )
        (args.work / f"{domain}_{args.source}_sheet.txt").write_text(
            "\n".join(sheet) + "\n", encoding="utf-8"
        )
        (args.work / f"{domain}_{args.source}_asked.json").write_text(json.dumps(rows, indent=1) + "\n")
        print(f"{domain}: {len(rows)} asked, {sum(r['kept'] for r in rows)} kept (P >= {floor:.2f})")
    write_labels(REVIEW, labels)


def report(args: argparse.Namespace) -> None:
    labels = read_labels(REVIEW)
    result: dict[str, Any] = {"machine": cpu_model(), "source": args.source, "domains": {}}
    print(
        "| domain | targets | asked | kept | natural and unanswerable (95% interval) | targets with 2 kept |"
    )
    print("|---|---|---|---|---|---|")
    for domain in args.domain:
        rows = json.loads((args.work / f"{domain}_{args.source}_asked.json").read_text())
        kept = [r for r in rows if r["kept"]]
        read = [labels[r["key"]] for r in kept if labels.get(r["key"], {}).get("natural") is not None]
        good = sum(bool(lab["natural"]) and not lab["answerable"] for lab in read)
        per = Counter(r["key"].split(":")[0] for r in kept)
        target_ids = list(dict.fromkeys(r["key"].split(":")[0] for r in rows))
        targets = len(target_ids)
        low, high = wilson(good, len(read)) or (0.0, 0.0)
        share = f"{good} / {len(read)} ({low:.2f}-{high:.2f})" if read else "not read"
        with_two = sum(n >= 2 for n in per.values())
        print(f"| {domain} | {targets} | {len(rows)} | {len(kept)} | {share} | {with_two} |")
        result["domains"][domain] = {
            "targets": targets,
            "target_ids": target_ids,
            "asked": len(rows),
            "kept": len(kept),
            "read": len(read),
            "natural_unanswerable": good,
            "targets_with_2": with_two,
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(args.out.read_text()) if args.out.is_file() else {}
    earlier[args.source] = result
    args.out.write_text(json.dumps(earlier, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("plan", "ask", "report"))
    ap.add_argument("--work", type=Path, required=True, help="a folder for texts, outside the repository")
    ap.add_argument("--domain", action="append", choices=list(POOLS), help="repeatable (plan: default all)")
    ap.add_argument("--seed", type=int, default=1208)
    ap.add_argument("--targets", type=int, default=8)
    ap.add_argument("--neighbours", type=int, default=3)
    ap.add_argument("--ids", action="append", default=[], help="plan: DOMAIN=ID,ID,... instead of a draw")
    ap.add_argument("--source", choices=("generated", "dataset"), default="generated")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    if args.step != "plan" and not args.domain:
        ap.error(f"{args.step} needs --domain")
    {"plan": plan, "ask": ask, "report": report}[args.step](args)


if __name__ == "__main__":
    main()
