"""One read for the set: each question read once against its top-3 retrieved chunks together.

    python benchmarks/set_reads.py [--work /tmp/scopeguard-set-reads] [--sets eloq-gold-dev,...]
    python benchmarks/set_reads.py --report-only [--work ...]        # the table again, no model
    python benchmarks/set_reads.py --top first                       # the top chunk joined first
    python benchmarks/set_reads.py --report-only --signals margin    # the set head on the margin alone
    python benchmarks/set_reads.py --k 1                             # sets of 1 (or 2) passages

The questions and their top 3 are ``retrieved_chunks.py``'s (``benchmarks/results/retrieved_chunks/
<set>.json``: the seeded sample, MiniLM's top 5, and the shipped ``default`` detector's P(out of
scope) of each chunk read on its own), so both modes are compared on the same questions and the
same truth (in scope = answerable and its own document among the 3, ``eval-detector --retrieve``'s).
Per question, the 3 chunks are pre-read (their kept states, as ``Guard.preread`` keeps them; timed
apart) and ``DefaultDetector(read="set")`` reads the question once against them together
(:meth:`~scopeguard.detection.read.reader.Reader.read_set`): the verdict margin, the head layer's
hidden state and the seconds are logged (``reads.jsonl`` in the work folder; a rerun resumes).

Reported per set, side by side:
- ``passages``: the shipped detector passage by passage (the lowest of the first 3 chunk scores, read
  up to the first clear answer), at its shipped threshold;
- ``set, shipped head``: the set read scored by the shipped head (fitted on single-passage reads);
- ``set, set head``: a head of the same form (margin + hidden state of the same layer, the same L2)
  fitted on the set reads leave-one-dataset-out (both SQuAD files left out together), its threshold
  chosen on the left-out scores by the budget rule (``fit_default_head(threshold_on="lodo",
  max_false_refusal=BUDGET)``): each set scored by a head and a threshold that never saw it.
AUROC, false refusals and caught at each mode's threshold, caught at <= 10% false refusals in
hindsight, and the median seconds a question's set read took. ``--ship OUT`` writes the set head
fitted on every set (its threshold the left-out one) to ``OUT``. With ``--k`` other than 3 (sets of
the top k, read into their own log, truth by the top k), each set is also scored by the head fitted
on the other groups' top-3 sets, at that fit's threshold (``set, top-3 set head (left out)``): does
the head of 3 passages carry over to another set size?
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report, run_header
from retrieved_chunks import PER_SET, SETS, at_k

from scopeguard.data import Dataset, load_dataset
from scopeguard.detection.detectors.default import DefaultDetector
from scopeguard.detection.head.default import DefaultHead, default_head_path, fit_default_head
from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
from scopeguard.detection.signals import Signals
from scopeguard.errors import DocumentTooLongError
from scopeguard.evaluation import RetrievedQuestion, retrieved_metrics
from scopeguard.runs import RunFolder
from scopeguard.types import Verdict

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "set_reads.json"
NAMES = ("eloq-gold-dev", "squad2-train", "squad2-train-extra", "policies")
GROUPS = {"squad2-train": "squad2", "squad2-train-extra": "squad2"}  # left out together
K = 3
BUDGET = 0.10


class SetReadsConfig(BaseModel):
    k: int = K
    threads: int = 2


def rows_of(name: str, questions: int | None = None) -> list[dict[str, Any]]:
    """``retrieved_chunks.py``'s per-question rows of ``name`` (read in full), the first
    ``questions`` of them (its seeded order)."""
    data = json.loads((PER_SET / f"{name}.json").read_text(encoding="utf-8"))
    return [r for r in data["rows"] if r["complete"]][:questions]


def detector(work: Path, threads: int) -> DefaultDetector:
    """The shipped head's detector reading sets, its states kept in the work folder."""
    head = DefaultHead.load(default_head_path())
    scorer = LlamaCppVerdicts(
        head.verdict_model,
        layers=head.layers,
        n_threads=threads,
        state_dir=work / "states",
        state_cache_mb=1024,
    )  # room for a set of 5 long documents' states at once
    return DefaultDetector(model=default_head_path(), reader=scorer, read="set")


def log_name(top: str, template: str | None = None, k: int = K) -> str:
    return f"reads-top-{top}{'' if template is None else '-' + template}{'' if k == K else f'-k{k}'}.jsonl"


def read_all(
    work: Path,
    names: list[str],
    loaded: dict[str, Dataset],
    threads: int,
    questions: int,
    top: str,
    template: str | None = None,
    k: int = K,
) -> None:
    folder = RunFolder(work, SetReadsConfig, free=("threads",))
    folder.open(SetReadsConfig(threads=threads))
    log = folder.log(log_name(top, template, k))
    done = {(r["set"], r["id"]) for r in log.rows()}
    det = detector(work, threads)
    if template is not None:  # another last line after the same instruction and documents
        det.reader.template = template
    for name in names:
        ds = loaded[name]
        asked = {q.id: q.question for q in ds.questions}
        todo = [r for r in rows_of(name, questions) if (name, r["id"]) not in done]
        print(f"{name}: {len(todo)} questions to read", flush=True)
        for i, row in enumerate(todo, 1):
            docs = [ds.documents[c] for c in row["retrieved"][:k]]
            docs = docs[::-1] if top == "first" else docs  # the reader joins the first one last
            started = time.perf_counter()
            prereads = det.preread(docs, progress=False)
            preread_s = time.perf_counter() - started
            started = time.perf_counter()
            passages = det.reader.passages(docs)
            try:
                (score,) = det.reader.read_set(asked[row["id"]], passages)
            except DocumentTooLongError:  # the detector would read it in halves: counted, not scored
                log.append({"set": name, "id": row["id"], "too_long": True, "passages": len(passages)})
                continue
            seconds = time.perf_counter() - started
            hidden = np.asarray(score.hidden, dtype=np.float32).ravel()
            log.append({"set": name, "id": row["id"], "margin": score.margin, "tokens": score.n_tokens,
                        "passages": len(passages), "seconds": round(seconds, 3),
                        "preread_s": round(preread_s, 3), "prereads": prereads,
                        "hidden": [round(float(x), 5) for x in hidden]})  # fmt: skip
            if i % 10 == 0:
                print(f"  {name}: {i}/{len(todo)}", flush=True)


def truth_rows(name: str, reads: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows_of(name) if r["id"] in reads]


def metrics(rows: list[RetrievedQuestion], k: int = K) -> dict[str, float]:
    m = retrieved_metrics(rows, k=k)
    return {"questions": int(m["n"]), "in_scope": int(m["in_scope"]), "auroc": round(m["auroc"], 3),
            "false_refusals": round(m["false_refusals_at_threshold"], 3),
            "caught": round(m["caught_at_threshold"], 3),
            "caught_fr10": round(m["recall_oos_at_fr10"], 3)}  # fmt: skip


def scored(row: dict[str, Any], p: float, threshold: float, seconds: float, k: int = K) -> RetrievedQuestion:
    v = Verdict(label="out_of_scope" if p >= threshold else "in_scope", score=p, latency_ms=1000 * seconds)
    return RetrievedQuestion(row["id"], row["doc_id"], row["label"], tuple(row["retrieved"][:k]), v, v.label)


def head_p(h: DefaultHead, read: dict[str, Any]) -> float:
    """The head ``h``'s P(out of scope) of a logged read (its margin and hidden state)."""
    return float(h.head.predict(h.row(read["margin"], None, np.asarray(read["hidden"])))[0])


def by_head(
    h: DefaultHead, threshold: float, rows: list[dict[str, Any]], reads: dict[str, dict[str, Any]], k: int
) -> list[RetrievedQuestion]:
    """``rows`` scored by the head ``h`` from their logged ``reads``, at ``threshold``."""
    return [scored(r, head_p(h, reads[r["id"]]), threshold, reads[r["id"]]["seconds"], k) for r in rows]


#: the set scores between which a cascade falls back on reading passage by passage
BANDS = ((0.35, 0.80), (0.40, 0.75), (0.45, 0.70), (0.50, 0.65))


def cascade(
    name: str, rows: list[dict[str, Any]], set_p: list[float], per: list[RetrievedQuestion]
) -> list[dict[str, Any]]:
    """A set read first, passage by passage only where its score is in a band: AUROC (a score
    below the band ranks below every passage score, one above it above them) and the share that
    fell back, per band, on the recorded scores (no model)."""
    from sklearn.metrics import roc_auc_score

    truth = [int(r.truth == "out_of_scope") for r in per]
    out = []
    for lo, hi in BANDS:
        ranked = [p - 1 if p < lo else p + 1 if p > hi else float(q.verdict.score or 0.0)
                  for p, q in zip(set_p, per, strict=True)]  # fmt: skip
        fallback = sum(lo <= p <= hi for p in set_p) / len(set_p)
        out.append({"set": name, "band": [lo, hi], "auroc": round(float(roc_auc_score(truth, ranked)), 3),
                    "fallback": round(fallback, 3)})  # fmt: skip
    return out


def signals(
    names: list[str], reads: dict[tuple[str, str], dict[str, Any]], layer: int, k: int = K
) -> Signals:
    ids, groups, datasets, labels, margins, hidden = [], [], [], [], [], []
    for name in names:
        for row in rows_of(name):
            read = reads.get((name, row["id"]))
            if read is None:
                continue
            truth = scored(row, 0.0, 1.0, 0.0, k).truth
            ids.append(f"{name}/{row['id']}")
            groups.append(f"{name}/{row['doc_id']}")
            datasets.append(name)
            labels.append(int(truth == "out_of_scope"))
            margins.append(read["margin"])
            hidden.append(read["hidden"])
    n = len(ids)
    return Signals(ids=tuple(ids), groups=tuple(groups), datasets=tuple(datasets),
                   labels=np.asarray(labels), coverage=np.zeros(n), alignment=np.zeros(n),
                   margin=np.asarray(margins, dtype=np.float64),
                   hidden=np.asarray(hidden, dtype=np.float32)[:, None, :], layers=(layer,))  # fmt: skip


def summarise(
    work: Path,
    names: list[str],
    ship: Path | None,
    top: str = "last",
    template: str | None = None,
    head_signals: tuple[str, ...] | None = None,
    l2: float | None = None,
    k: int = K,
) -> dict[str, Any]:
    head = DefaultHead.load(default_head_path())
    log = RunFolder(work, SetReadsConfig, free=("threads",))
    logged = list(log.log(log_name(top, template, k)).rows())
    reads = {(r["set"], r["id"]): r for r in logged if "margin" in r}
    too_long = {n: sum(r["set"] == n and "margin" not in r for r in logged) for n in names}
    names = [n for n in names if any(s == n for s, _ in reads)]
    sig = signals(names, reads, head.layer or 0, k)
    selection = (
        "retrieved_chunks.py's seeded question samples, each read once against its MiniLM top 3 "
        f"joined (the top one last); the threshold by the budget rule (<= {BUDGET:.2f} false "
        "refusals on every left-out set; benchmarks/set_reads.py --ship)"
    )
    form = {"verdict_model": head.verdict_model, "names": head_signals or head.signals, "layer": head.layer,
            "l2": l2 or float(head.info.get("l2", 300.0)), "dataset_of": GROUPS}  # fmt: skip
    fitted, fit_report = fit_default_head(
        sig, **form, max_false_refusal=BUDGET, threshold_on="lodo",
        info={"datasets": names, "n": len(sig), "selection": selection},
    )  # fmt: skip
    # another set size: each group also scored by the head fitted on the other groups' top-K sets
    # (with the threshold that fit chose on its left-out scores): does a head of 3 passages carry over?
    carried: dict[str, DefaultHead] = {}
    carried_threshold = 0.0
    if k != K:
        base = {(r["set"], r["id"]): r for r in log.log(log_name(top, template)).rows()}
        base_names = [n for n in names if any(s == n for s, _ in base)]
        _, base_report = fit_default_head(signals(base_names, base, head.layer or 0), **form,
                                          max_false_refusal=BUDGET, threshold_on="lodo")  # fmt: skip
        carried_threshold = float(base_report["threshold"])
        for g in {GROUPS.get(n, n) for n in names}:
            train = [n for n in base_names if GROUPS.get(n, n) != g]
            carried[g], _ = fit_default_head(signals(train, base, head.layer or 0), **form)
    p_lodo = fit_report["out_of_fold"].get("p_lodo")
    lodo_scores = {} if p_lodo is None else dict(zip(sig.ids, p_lodo.tolist(), strict=True))
    table: list[dict[str, Any]] = []
    cascades: list[dict[str, Any]] = []
    for name in names:
        mine = {i: r for (s, i), r in reads.items() if s == name}
        rows = truth_rows(name, mine)
        per = [at_k(r, k, head.threshold) for r in rows]

        seconds = [mine[r["id"]]["seconds"] for r in rows]
        entries = [("passages", per), ("set, shipped head", by_head(head, head.threshold, rows, mine, k))]
        if lodo_scores:
            threshold = fit_report["threshold"]
            lodo = [scored(r, lodo_scores[f"{name}/{r['id']}"], threshold, mine[r["id"]]["seconds"], k)
                    for r in rows]  # fmt: skip
            entries.append(("set, set head (left out)", lodo))
        if carried:
            left_out = carried[GROUPS.get(name, name)]
            entries.append(
                (f"set, top-{K} set head (left out)", by_head(left_out, carried_threshold, rows, mine, k))
            )
        median = round(statistics.median(seconds), 3)
        for mode, verdicts in entries:
            table.append({"set": name, "mode": mode, **metrics(verdicts, k),
                          "median_s": None if mode == "passages" else median})  # fmt: skip
        if lodo_scores:
            cascades.extend(cascade(name, rows, [lodo_scores[f"{name}/{r['id']}"] for r in rows], per))
    if ship is not None:
        fitted.save(ship)
    return {"table": table, "cascade": cascades, "too_long": too_long,
            "fit": {key: v for key, v in fit_report.items() if key != "out_of_fold"}}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-set-reads"))
    ap.add_argument("--sets", default=",".join(NAMES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--questions", type=int, default=150, help="the first N of each set's questions")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--template", default=None, help="another verdict prompt for the question's side")
    ap.add_argument("--signals", default=None, help="the set head's signals (default: the shipped head's)")
    ap.add_argument("--l2", type=float, default=None, help="the set head's L2 (default: the shipped head's)")
    ap.add_argument("--top", choices=("last", "first"), default="last",
                    help="where the top chunk is joined: last, next to the question (the reader's order), "
                         "or first")  # fmt: skip
    ap.add_argument("--ship", type=Path, default=None, help="write the set head fitted on every set here")
    ap.add_argument("--k", type=int, default=K, help=f"passages a set (the top k; default {K})")
    args = ap.parse_args()
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    if not args.report_only:
        loaded = {n: load_dataset(SETS[n]) for n in names}
        read_all(args.work, names, loaded, args.threads, args.questions, args.top, args.template, args.k)
    head_signals = tuple(args.signals.split(",")) if args.signals else None
    summary = summarise(args.work, names, args.ship, args.top, args.template, head_signals, args.l2, args.k)
    result = {**run_header("set_reads"), "k": args.k, "budget": BUDGET, "top": args.top, **summary}
    report(
        summary["table"],
        result,
        RESULT.with_name(
            "set_reads"
            + ("" if args.top == "last" else f"_top_{args.top}")
            + ("" if args.template is None else f"_{args.template}")
            + ("" if head_signals is None else "_" + "+".join(head_signals))
            + ("" if args.l2 is None else f"_l2_{args.l2:g}")
            + ("" if args.k == K else f"_k{args.k}")
            + ".json"
        ),
    )


if __name__ == "__main__":
    main()
