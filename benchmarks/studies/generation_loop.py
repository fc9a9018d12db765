"""Close the loop: generate offline on a corpus, fit a head on it, score human questions.

    python benchmarks/studies/generation_loop.py --gen-docs 20 --eval-docs 30 --work /tmp/genloop

The corpus is ../shared/data/squad2-train (read at run time; Wikipedia paragraphs with human
questions, SQuAD 2.0's unanswerable ones among them). Its documents are drawn with ``--seed`` and
split in two groups, so that no document is in both: the first ``--gen-docs`` get generated
questions (``scopeguard generate``'s pipeline, offline mode, ``--llm``; their human questions are
never used), the next ``--eval-docs`` are scored on their human questions only. The documents the
shipped heads were fitted on (``train-detector --max-docs 80``, seed 0, on squad2-train) are left
out of both groups, so the shipped head has not seen the scored documents either. Then, with the
commands a user runs:

    scopeguard train-detector WORK/generated --detector DETECTOR --out WORK/head
    scopeguard eval-detector WORK/heldout --detector DETECTOR [--model WORK/head] --json

``--detector default`` (margin and layer-21 hidden state: the corpus head can change the ranking)
or ``logprob`` (a Platt calibration of one margin: both heads rank alike, only the threshold can
move). ``--no-filter`` (with ``--mode perturb``) labels each question by how it was made; with
the filter, the packaged logprob detector keeps only the candidates it agrees with, so the set
separates perfectly on its own margin and a head fitted on it can only move the threshold. Both
heads' verdicts are paired per question (McNemar's exact test).

``--with-shared`` adds a third head: the shipped head's own recipe (the same shared sets and
document samples, ``SHIPPED_RECIPE``) with the generated set as one more dataset, the way a user
adapts the packaged detector to a corpus, scored and paired against the shipped head the same way.
``--tune-reader BASE`` closes the loop through the reader itself (#36): ``scopeguard train-reader
WORK/generated --base BASE`` LoRA-tunes the reading model on the generated set, and ``logprob`` reads
the scored questions through the bare BASE and through the tuned reader (llama.cpp, each at its own
threshold), paired the same way; ``--no-heads`` skips the heads (their features cost a 1.5B read).
``--oracle`` adds the ceiling of that loop: the same recipe with the generation documents' own human
questions (SQuAD's labels) in place of the generated set, so that what a perfect generator on those
documents could add is measured too. ``--same-docs`` also scores the heads on the generation
documents' own human questions (never used in a fit, except by ``--oracle``'s head, which is not
scored there): the user's case, where the corpus generated on is the one asked about. Writes
``benchmarks/studies/results/generation_loop.json`` (or ``--out``): counts and metrics only, never text.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _report
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/studies/: the other studies

from _report import cpu_model, report
from reader_extract import DEFAULT_SETS, OWN, parse_sets

from scopeguard.data import load_dataset, read_jsonl
from scopeguard.detection.signals import sample_documents
from scopeguard.generation import GenerationConfig, Generator, LengthRule

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "squad2-train"
RESULT = Path(__file__).resolve().parent / "results" / "generation_loop.json"
METRICS = ("accuracy", "false_refusal_rate", "recall_oos", "auroc", "n")


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "scopeguard", *args], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"scopeguard {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


#: the packaged default head's train-detector datasets and --max-docs (scopeguard/_assets/default_head.md):
#: the samples reader_extract.py reads (None: every document)
SHIPPED_RECIPE = parse_sets(DEFAULT_SETS)
SHIPPED_MAX_DOCS = dict(SHIPPED_RECIPE)["squad2-train"]  # the squad2-train documents the shipped heads saw


def evaluate(
    heldout: Path, head: Path | None, detector: str, per_question: Path, llm: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``scopeguard eval-detector``'s figures and its per-question rows (id, label, predicted, score)."""
    args = ["eval-detector", str(heldout), "--detector", detector, "--json", "--no-progress"]
    out = _cli(
        *args,
        "--per-question",
        str(per_question),
        *(["--model", str(head)] if head is not None else []),
        *(["--llm", llm] if llm else []),
    )
    line = [ln for ln in out.splitlines() if ln.startswith("{")][-1]
    return json.loads(line), list(read_jsonl(per_question))


def split_documents(
    data: Path, n_gen: int, n_eval: int, seed: int
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The generation and the scoring documents: drawn with ``seed`` from those the shipped heads
    were not fitted on, no document in both."""
    seen = set(sample_documents(load_dataset(data), SHIPPED_MAX_DOCS, seed=0).documents)
    docs = [d for d in read_jsonl(data / "documents.jsonl") if d["doc_id"] not in seen]
    random.Random(seed).shuffle(docs)
    gen_docs, eval_docs = docs[:n_gen], docs[n_gen : n_gen + n_eval]
    if {d["doc_id"] for d in eval_docs} & {d["doc_id"] for d in gen_docs}:  # grouped
        raise SystemExit("a document id is in both groups: the corpus has duplicate ids")
    return gen_docs, eval_docs


def human_set(folder: Path, docs: list[dict[str, object]], questions: list[dict[str, object]]) -> Path:
    """A dataset folder with these documents and their human questions."""
    ids = {d["doc_id"] for d in docs}
    _write_jsonl(folder / "documents.jsonl", docs)
    _write_jsonl(folder / "questions.jsonl", [q for q in questions if q["doc_id"] in ids])
    return folder


def _round(value: object) -> object:
    return round(value, 3) if isinstance(value, float) else value


def mcnemar(a: dict[str, bool], b: dict[str, bool]) -> tuple[int, int, float]:
    """Questions only ``a`` gets right, only ``b`` gets right, and McNemar's exact two-sided p-value."""
    only_a = sum(a[k] and not b[k] for k in a)
    only_b = sum(b[k] and not a[k] for k in a)
    n = only_a + only_b
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n if n else 1.0
    return only_a, only_b, round(min(1.0, 2 * tail), 3)


def _paired(
    a: dict[str, bool], b: dict[str, bool], names: tuple[str, str] = ("shipped", "corpus")
) -> dict[str, object]:
    only_a, only_b, p = mcnemar(a, b)
    return {f"only_{names[0]}_right": only_a, f"only_{names[1]}_right": only_b, "mcnemar_p": p}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llm", default="local:qwen2.5-coder-1.5b")
    ap.add_argument("--gen-docs", type=int, default=20)
    ap.add_argument("--eval-docs", type=int, default=30)
    ap.add_argument("--detector", default="default", choices=("default", "logprob"))
    ap.add_argument("--mode", default="offline", help="generation mode (offline, perturb, followup)")
    ap.add_argument(
        "--filter",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep only candidates the packaged logprob detector agrees with (--no-filter: labels "
        "from how each question was made)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-generation-loop"))
    ap.add_argument(
        "--note", default="", help="recorded with the figures (e.g. whether the machine was shared)"
    )
    ap.add_argument(
        "--with-shared",
        action="store_true",
        help="also fit the shipped head's recipe plus the generated set, and score it",
    )
    ap.add_argument(
        "--oracle",
        action="store_true",
        help="also fit the shipped recipe plus the generation documents' own human questions (the "
        "ceiling a generated set on those documents could reach), and score it",
    )
    ap.add_argument(
        "--same-docs",
        action="store_true",
        help="also score every head not fitted on them on the generation documents' own human "
        "questions (the user's case: the corpus generated on is the corpus asked about)",
    )
    ap.add_argument(
        "--tune-reader",
        metavar="BASE",
        default=None,
        help="also LoRA-tune BASE's reader on the generated set (train-reader) and score logprob "
        "through the bare and the tuned reader",
    )
    ap.add_argument(
        "--tune-options",
        default="--adapt question --lr 1e-4 --batch 4 --val-questions 24 --eval-every 20",
        help="train-reader's options for --tune-reader",
    )
    ap.add_argument(
        "--heads", action=argparse.BooleanOptionalAction, default=True, help="fit and score the heads"
    )
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()

    threads = args.threads or os.cpu_count() or 1
    os.environ["SCOPEGUARD_N_THREADS"] = str(threads)  # this process's models and the CLI's
    gen_docs, eval_docs = split_documents(args.data, args.gen_docs, args.eval_docs, args.seed)

    generated = args.work / "generated"
    summary = Generator(
        args.llm, config=GenerationConfig(mode=args.mode, filter=args.filter), progress=False
    ).run(
        [{"doc_id": d["doc_id"], "text": d["text"]} for d in gen_docs],
        generated,
        length_rule=LengthRule(min_words=None, max_words=300),  # SQuAD paragraphs are short
    )
    questions = list(read_jsonl(args.data / "questions.jsonl"))
    heldout = human_set(args.work / "squad2-heldout", eval_docs, questions)
    human = human_set(args.work / "generation-docs-human", gen_docs, questions)
    fit_log = ""
    heads: list[tuple[str, Path | None, Path | None]] = [("shipped", None, None)]  # name, head, added set
    fits: list[tuple[str, Path, bool]] = [("generated corpus", generated, False)] if args.heads else []
    if args.with_shared and args.heads:
        fits.append(("shipped recipe + generated corpus", generated, True))
    if args.oracle and args.heads:  # the ceiling: SQuAD's own labels on the generation documents
        fits.append(("shipped recipe + human questions of the generation documents", human, True))
    # the shipped head's datasets first, then the added one (the --max-docs order)
    recipe = [str(OWN / n if (OWN / n).is_dir() else args.data.parent / n) for n, _ in SHIPPED_RECIPE]
    limits = ",".join(str(m or 0) for _, m in SHIPPED_RECIPE) + ",0"
    options = ["--max-docs", limits, "--same-source", "squad2-train-extra=squad2-train"]
    for i, (name, added, with_recipe) in enumerate(fits):
        fitted = args.work / f"head-{i}"
        fit_log += _cli(
            "train-detector",
            *(recipe if with_recipe else []),
            str(added),
            *(options if with_recipe else []),
            "--detector",
            args.detector,
            "--out",
            str(fitted),
            "--seed",
            str(args.seed),
        )
        heads.append((name, fitted, added))
    readers: list[tuple[str, str]] = []  # name, logprob's --llm
    tune_log = ""
    if args.tune_reader:
        tuned = args.work / "reader"
        if not (tuned / "reader.json").is_file():
            tune_log = _cli(
                "train-reader",
                str(generated),
                "--base",
                args.tune_reader,
                "--out",
                str(tuned),
                "--seed",
                str(args.seed),
                "--no-progress",
                *args.tune_options.split(),
                *(["--resume"] if (tuned / "checkpoint").is_dir() else []),
            )
        if not (tuned / "reader.json").is_file():
            raise SystemExit(f"train-reader wrote no tuned reader in {tuned}:\n{tune_log}")
        readers = [
            (f"bare {args.tune_reader}", f"local:{args.tune_reader}"),
            ("tuned on generated", f"local:{tuned}"),
        ]
    scored = [("other documents", "other", heldout)]
    if args.same_docs:
        scored.append(("generation documents", "same", human))
    rows: list[dict[str, object]] = []
    paired: dict[str, dict[str, object]] = {}
    for where, tag, folder in scored:
        right: dict[str, dict[str, bool]] = {}
        for i, (name, fitted, fitted_on) in enumerate(heads):
            if fitted_on == folder:
                continue  # fitted on these very questions
            result, per_q = evaluate(folder, fitted, args.detector, args.work / f"{tag}-{i}.jsonl")
            right[name] = {str(r["id"]): r["label"] == r["predicted"] for r in per_q}
            rows.append({"head": name, "scored on": where, **{m: _round(result.get(m)) for m in METRICS}})
            if fitted is not None:
                paired[f"{name} ({where})"] = _paired(right["shipped"], right[name])
        for j, (name, llm) in enumerate(readers):
            result, per_q = evaluate(folder, None, "logprob", args.work / f"{tag}-reader-{j}.jsonl", llm)
            right[name] = {str(r["id"]): r["label"] == r["predicted"] for r in per_q}
            rows.append(
                {
                    "head": f"logprob, {name}",
                    "scored on": where,
                    **{m: _round(result.get(m)) for m in METRICS},
                }
            )
        if readers:
            bare, tuned_name = (name for name, _ in readers)
            pair = _paired(right[bare], right[tuned_name], ("bare", "tuned"))
            paired[f"tuned reader vs bare ({where})"] = pair
    report(
        rows,
        {
            "benchmark": "generation_loop",
            "data": f"{args.data.name}: {len(gen_docs)} documents for generation, {len(eval_docs)} other "
            f"documents' human questions for scoring (seed {args.seed})"
            + (", and the generation documents' own human questions" if args.same_docs else ""),
            "writer": args.llm,
            "mode": args.mode,
            "filter": args.filter,
            "detector": args.detector,
            "generated": {
                "docs_done": summary.docs_done,
                "oos": summary.oos_kept,
                "in_scope": summary.in_scope,
                "unusable": summary.docs_unusable,
            },
            "paired": paired,
            "train_detector_output": fit_log.splitlines()[-12:],
            "train_reader_output": tune_log.splitlines()[-12:],
            "tune_options": args.tune_options if args.tune_reader else None,
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": threads, "note": args.note},
        },
        args.out,
    )


if __name__ == "__main__":
    main()
