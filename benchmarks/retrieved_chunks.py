"""The guard as it runs in production: each question read against the top chunks a retriever returns.

    python benchmarks/retrieved_chunks.py [--work /tmp/scopeguard-retrieved-chunks] [--budget-minutes 60]
    python benchmarks/retrieved_chunks.py --report-only [--work ...]     # the table again, no model
    python benchmarks/retrieved_chunks.py --only squad2-train-extra --budget-minutes M  # one set more

Sets, in this order: eloq-gold-dev, squad2-train, subjqa, the invented ``data/policies``, then
squad2-train-extra if time allows. A set's retrieval corpus is all its documents as they are (the
detector splits a long one into passages). A seeded sample of questions (``--questions``, 150;
ELOQ's 144 all) retrieves its top 5 with ``minilm`` (``DEFAULT_RETRIEVER``), and the shipped
``default`` detector reads each chunk on its own: a chunk's score is P(out of scope) of
``detector.detect(question, [chunk])``. On several documents that detector keeps the lowest
P(out of scope) over the passages and stops at one with P <= 0.05 (``STOP_BELOW_P``), so the top-K
verdict (K = 1, 3, 5) is the minimum of the first K chunk scores; on 10 ELOQ questions that is
checked against ``detector.detect(question, top 3)`` called directly (``verify_top3``: the same
label at the shipped threshold; the same score, the minimum up to where the read stops, up to
llama.cpp's rounding). The truth for the top K is ``eval-detector --retrieve``'s
(``scopeguard.evaluation.retrieved_truth``): in scope only when answerable and the question's own
document is among the K.

Per set and K: questions, answerable, recall@K, in scope, false refusals and caught at the shipped
threshold, caught at <= 10% false refusals in hindsight, AUROC, and the median seconds a question
reads: each chunk is pre-read once before its questions (``Guard.preread``'s path), so that is the
question side, up to the chunk that answers clearly; the pre-reads' seconds are per set apart.

Sample sizes: ELOQ is read whole and timed. Each later set is planned at its own start from the
pace so far (medians of the last pre-reads and reads): the largest size (150, 145, ..., 40; the
first questions of the set's seeded order) at which it and the core sets after it fit what is left
of ``--budget-minutes``, counted from the work folder's first start; squad2-train-extra is skipped
when 100 do not fit. The JSON's ``plan`` says what was chosen and why. Run again with a larger
``--budget-minutes`` to extend the sets (the samples nest: only the new questions are read).

The work folder resumes (run the same command again): ``retrieval.jsonl`` (each question's 5 chunk
ids), ``plan.jsonl``, ``prereads.jsonl``, ``reads.jsonl`` (each chunk score as read, keyed by set,
question id and chunk id), ``verify.jsonl``. As soon as a set is done its per-question file
``benchmarks/results/retrieved_chunks/<set>.json`` is written (id, doc_id, label, the 5 retrieved
ids, the 5 chunk scores and seconds; no text), and ``benchmarks/results/retrieved_chunks.json``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import cpu_model, report

from scopeguard.data import Dataset, LabeledQuestion, atomic_write_json, load_dataset
from scopeguard.detection.detectors.default import STOP_BELOW_P, DefaultDetector
from scopeguard.detection.head.default import DefaultHead, default_head_path
from scopeguard.evaluation import RetrievedQuestion, retrieve_top_k, retrieved_metrics
from scopeguard.evaluation.detection import detect_or_unknown
from scopeguard.retrieval.registry import DEFAULT_RETRIEVER, get_retriever
from scopeguard.runs import RunFolder
from scopeguard.types import Verdict

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SETS = {"eloq-gold-dev": DATA / "eloq-gold-dev", "squad2-train": DATA / "squad2-train",
        "subjqa": DATA / "subjqa", "policies": ROOT / "benchmarks" / "data" / "policies",
        "squad2-train-extra": DATA / "squad2-train-extra"}  # fmt: skip
FIRST, CORE, LAST = "eloq-gold-dev", ("squad2-train", "subjqa", "policies"), "squad2-train-extra"
RESULT = ROOT / "benchmarks" / "results" / "retrieved_chunks.json"
PER_SET = ROOT / "benchmarks" / "results" / "retrieved_chunks"
KS = (1, 3, 5)
MIN_QUESTIONS = 100  # a set's sample when the budget allows
FLOOR = 40  # the core sets' smallest sample when it does not
RECENT = 200  # the pace is the median of the last reads (the machine's load changes)
VERIFY = 10
Tops = dict[str, dict[str, list[str]]]  # set -> question id -> retrieved chunk ids in rank order


class ChunksConfig(BaseModel):
    seed: int = 0
    top: int = 5
    retriever: str = DEFAULT_RETRIEVER
    questions: int = 150
    threads: int = 2
    budget_minutes: float = 60.0


class Work:
    """The work folder's logs."""

    def __init__(self, root: Path, config: ChunksConfig) -> None:
        folder = RunFolder(root, ChunksConfig, free=("threads", "budget_minutes"))
        self.config = folder.open(config)
        self.retrieval, self.plan = folder.log("retrieval.jsonl"), folder.log("plan.jsonl")
        self.prereads, self.reads = folder.log("prereads.jsonl"), folder.log("reads.jsonl")
        self.verify, self.starts = folder.log("verify.jsonl"), folder.log("starts.jsonl")
        self.starts.append({"time": time.time()})
        self.first_start = next(self.starts.rows())["time"]  # the budget counts from the first start

    def planned(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for row in self.plan.rows():
            out[row["set"]] = row  # a set's last plan (under a larger budget) extends the earlier ones
        return out

    def scores(self, name: str) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["id"], r["chunk"]): r for r in self.reads.rows() if r["set"] == name}


def sample(ds: Dataset, n: int, seed: int) -> list[LabeledQuestion]:
    """The first ``n`` questions of the set's seeded order (a larger ``n`` extends a smaller one)."""
    order = list(range(len(ds.questions)))
    random.Random(seed).shuffle(order)
    return [ds.questions[i] for i in order[:n]]


def retrieved(work: Work, name: str, ds: Dataset) -> dict[str, list[str]]:
    """Each sampled question's top chunk ids (retrieved once, then read from the work folder)."""
    config = work.config
    questions = sample(ds, config.questions, config.seed)
    have = {r["id"]: r["retrieved"] for r in work.retrieval.rows() if r["set"] == name}
    if all(q.id in have for q in questions):
        return have
    started = time.perf_counter()
    retriever = get_retriever(config.retriever)
    top = retrieve_top_k(retriever, list(ds.documents.values()), [q.question for q in questions], config.top)
    for q, ids in zip(questions, top, strict=True):
        if q.id not in have:
            work.retrieval.append({"set": name, "id": q.id, "retrieved": list(ids)})
            have[q.id] = list(ids)
    print(f"{name}: indexed {len(ds.documents)} documents, retrieved for {len(questions)} questions "
          f"in {time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
    return have


def read_set(
    det: DefaultDetector, work: Work, name: str, ds: Dataset, n: int, top: dict[str, list[str]]
) -> None:
    """Read every (question, chunk) pair of the set's first ``n`` questions not read yet, chunk by
    chunk: the chunk pre-read (timed apart), then each of its questions against it alone."""
    done = set(work.scores(name))
    pending: dict[str, list[LabeledQuestion]] = {}
    for q in sample(ds, n, work.config.seed):
        for chunk in top[q.id]:
            if (q.id, chunk) not in done:
                pending.setdefault(chunk, []).append(q)
    total, count = sum(len(v) for v in pending.values()), 0
    print(f"{name}: {n} questions, {total} chunk reads to do over {len(pending)} chunks", flush=True)
    for chunk, questions in pending.items():
        document = ds.documents[chunk]
        started = time.perf_counter()
        passages = det.preread([document], progress=False)
        work.prereads.append({"set": name, "chunk": chunk, "seconds": round(time.perf_counter() - started, 3),
                              "passages": passages, "words": len(document.text.split())})  # fmt: skip
        for q in questions:
            started = time.perf_counter()
            v = detect_or_unknown(det, q.question, [document], q.id)
            work.reads.append({"set": name, "id": q.id, "chunk": chunk, "score": v.score, "label": v.label,
                               "seconds": round(time.perf_counter() - started, 3), "llm_calls": v.llm_calls,
                               "error": v.error})  # fmt: skip
            count += 1
        print(f"  {name}: {count}/{total} reads", flush=True)


def question_rows(
    work: Work, name: str, ds: Dataset, n: int, top: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """Per question of the first ``n``: ids, label, the chunks in rank order with their scores."""
    scores = work.scores(name)
    rows = []
    for q in sample(ds, n, work.config.seed):
        reads = [scores.get((q.id, c)) for c in top[q.id]]
        rows.append({"id": q.id, "doc_id": q.doc_id, "label": q.label, "retrieved": top[q.id],
                     "scores": [None if r is None else r["score"] for r in reads],
                     "seconds": [None if r is None else r["seconds"] for r in reads],
                     "complete": all(r is not None for r in reads)})  # fmt: skip
    return rows


def at_k(row: dict[str, Any], k: int, threshold: float) -> RetrievedQuestion:
    """The verdict for the top ``k``: the lowest of the first ``k`` chunk scores; the seconds of the
    chunks read up to the first that answers clearly (where the detector stops)."""
    scores, seconds = row["scores"][:k], row["seconds"][:k]
    stop = next((i for i, s in enumerate(scores) if s is not None and s <= STOP_BELOW_P), len(scores) - 1)
    read = [s for s in scores[: stop + 1] if s is not None]
    latency = 1000 * sum(s or 0.0 for s in seconds[: stop + 1])
    if read:
        p = min(read)
        v = Verdict(label="out_of_scope" if p >= threshold else "in_scope", score=p, latency_ms=latency)
    else:
        v = Verdict(label="unknown", latency_ms=latency)
    return RetrievedQuestion(row["id"], row["doc_id"], row["label"], tuple(row["retrieved"][:k]), v, v.label)


def table_rows(name: str, rows: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    out = []
    for k in KS:
        m = retrieved_metrics([at_k(r, k, threshold) for r in rows], k=k)
        out.append({"set": name, "K": k, "questions": int(m["n"]), "answerable": int(m["answerable"]),
                    "recall@K": round(m["recall_at_k"], 3), "in_scope": int(m["in_scope"]),
                    "false_refusals": round(m["false_refusals_at_threshold"], 3),
                    "caught": round(m["caught_at_threshold"], 3),
                    "caught_fr10": round(m["recall_oos_at_fr10"], 3), "auroc": round(m["auroc"], 3),
                    "median_s": round(m["latency_ms_p50"] / 1000, 3)})  # fmt: skip
    return out


def speed(work: Work) -> dict[str, float]:
    """Pre-read seconds per word and seconds per read: medians of the last reads, so that the first
    pre-read (which loads the model) does not count and a change of the machine's load does."""
    pre = [r["seconds"] / max(1, r["words"]) for r in work.prereads.rows()][-RECENT // 4 :]
    reads = [r["seconds"] for r in work.reads.rows()][-RECENT:]
    return {"preread_s_per_word": statistics.median(pre) if pre else 0.01,
            "read_s": statistics.median(reads) if reads else 0.5}  # fmt: skip


def cost(
    work: Work, name: str, ds: Dataset, n: int, top: dict[str, list[str]], pace: dict[str, float]
) -> float:
    """Estimated seconds to read the set's first ``n`` questions (what is read already is free)."""
    done = work.scores(name)
    pairs = {(q.id, c) for q in sample(ds, n, work.config.seed) for c in top[q.id]} - set(done)
    chunks = {c for _, c in pairs}
    words = sum(len(ds.documents[c].text.split()) for c in chunks)
    return pace["preread_s_per_word"] * words + pace["read_s"] * len(pairs)


def plan(work: Work, loaded: dict[str, Dataset], tops: Tops, names: list[str], seconds_left: float) -> None:
    """Choose the sample size of ``names[0]``: the largest of ``--questions``, ..., 100, ..., 40
    (capped by each set's size) at which it and the sets after it in ``names`` (each at that size)
    fit ``seconds_left`` at the pace so far, and record it in ``plan.jsonl``. Each set is planned at
    its own start, so a change of pace counts. The last set is skipped when 100 of its questions do
    not fit. A set planned under this ``--budget-minutes`` keeps its size; a larger budget plans it
    again, never smaller (the samples nest: only the new questions are read)."""
    before = work.planned().get(names[0])
    if before is not None and before.get("budget_minutes") == work.config.budget_minutes:
        return
    pace, cap = speed(work), work.config.questions
    floor = MIN_QUESTIONS if names[0] == LAST else FLOOR
    sizes = list(range(cap, floor - 1, -5)) or [cap]
    for n in sizes:
        est = {s: cost(work, s, loaded[s], min(n, len(loaded[s].questions)), tops[s], pace) for s in names}
        if sum(est.values()) <= seconds_left or n == sizes[-1]:
            break
    fits, name = sum(est.values()) <= seconds_left, names[0]
    size = 0 if name == LAST and not fits else min(n, len(loaded[name].questions))
    size = max(size, before["questions"] if before else 0)
    why = (f"{seconds_left / 60:.1f} min left of the budget; at {pace['preread_s_per_word'] * 1000:.1f} ms "
           f"a pre-read word, {pace['read_s']:.2f} s a read (medians of the last reads), {n} questions a set "
           f"{'fit' if fits else 'do not fit'} ({', '.join(names)}: estimated "
           f"{sum(est.values()) / 60:.1f} min in all, this set {est[name] / 60:.1f} min)"
           + ("" if size else "; skipped")
           + (f"; {size} kept from an earlier plan" if size > n else ""))  # fmt: skip
    work.plan.append({"set": name, "questions": size, "estimate_min": round(est[name] / 60, 1), "why": why,
                      "budget_minutes": work.config.budget_minutes})  # fmt: skip
    print(f"plan {name}: {size} questions ({why})", flush=True)


def prepare(work: Work, name: str, loaded: dict[str, Dataset], tops: Tops, seconds_left: float) -> None:
    """Retrieve for ``name`` (and the core sets after it) and plan its sample size."""
    later = [s for s in CORE[CORE.index(name) + 1 :] if s in loaded] if name in CORE else []
    for s in [name, *later]:
        if s not in tops:
            tops[s] = retrieved(work, s, loaded[s])
    if name != FIRST:
        plan(work, loaded, tops, [name, *later], seconds_left)
    elif name not in work.planned():
        size = min(len(loaded[name].questions), work.config.questions)
        work.plan.append({"set": name, "questions": size, "why": "read whole, first: it times the reads"})


def verify_read(
    det: DefaultDetector, work: Work, name: str, ds: Dataset, n: int, top: dict[str, list[str]]
) -> None:
    """``detector.detect(question, top 3)`` called directly on the set's first questions (logged)."""
    have = {r["id"] for r in work.verify.rows() if r["set"] == name}
    for q in sample(ds, min(VERIFY, n), work.config.seed):
        if q.id not in have:
            v = detect_or_unknown(det, q.question, [ds.documents[c] for c in top[q.id][:3]], q.id)
            work.verify.append({"set": name, "id": q.id, "score": v.score, "label": v.label})


def verify_summary(
    work: Work, name: str, ds: Dataset, n: int, top: dict[str, list[str]], threshold: float
) -> Any:
    """How the direct reads agree with the verdicts derived from the chunk scores (``None``: none)."""
    got = {r["id"]: r for r in work.verify.rows() if r["set"] == name}
    if not got:
        return None
    checks = []
    for row in question_rows(work, name, ds, min(VERIFY, n), top):
        if row["id"] not in got or not row["complete"] or got[row["id"]]["score"] is None:
            continue
        scores, direct = row["scores"][:3], got[row["id"]]
        stop = next((i for i, s in enumerate(scores) if s <= STOP_BELOW_P), 2)
        expected = min(scores[: stop + 1])  # what the read finds: the lowest up to where it stops
        derived = at_k(row, 3, threshold).verdict
        checks.append({"id": row["id"], "detect_score": direct["score"], "min_of_3": derived.score,
                       "expected_score": expected, "early_stop": stop < 2,
                       "same_label": direct["label"] == derived.label,
                       "score_diff": round(abs(direct["score"] - expected), 5)})  # fmt: skip
    no_stop = [c["score_diff"] for c in checks if not c["early_stop"]]
    return {"set": name, "k": 3, "questions": len(checks), "same_label": sum(c["same_label"] for c in checks),
            "early_stops": sum(c["early_stop"] for c in checks),
            "max_score_diff_no_early_stop": max(no_stop) if no_stop else None,
            "max_score_diff": max((c["score_diff"] for c in checks), default=None),
            "rows": checks}  # fmt: skip


def finish_set(
    work: Work, name: str, ds: Dataset, n: int, top: dict[str, list[str]], threshold: float
) -> dict[str, Any]:
    """The set's summary, and its per-question file (written atomically) once every read is done
    (``--report-only`` during a run leaves the file of a set still being read alone)."""
    rows = question_rows(work, name, ds, n, top)
    complete = all(r["complete"] for r in rows)
    pre = list({r["chunk"]: r for r in work.prereads.rows() if r["set"] == name}.values())  # the last
    if complete:
        atomic_write_json(PER_SET / f"{name}.json", {
            "set": name, "questions": len(rows), "complete": complete, "top": work.config.top,
            "retriever": work.config.retriever, "seed": work.config.seed, "threshold": threshold,
            "fields": "id, doc_id, label (the data set's), retrieved (chunk ids in rank order), scores "
                      "(each chunk's P(out of scope) read alone), seconds (each read, the chunk pre-read)",
            "rows": rows})  # fmt: skip
    return {"questions": len(rows), "complete": complete, "chunks_preread": len(pre),
            "preread_s_median": round(statistics.median(r["seconds"] for r in pre), 3) if pre else None,
            "preread_s_total": round(sum(r["seconds"] for r in pre), 1),
            "read_s_total": round(sum(s or 0 for r in rows for s in r["seconds"]), 1)}  # fmt: skip


def detector(threads: int) -> DefaultDetector:
    """The shipped ``default`` detector (the packaged head and its model) with ``threads`` llama.cpp
    threads and its kept states in memory only (a set's chunks would fill GBs of disk)."""
    from scopeguard.detection.read.scorer import verdict_scorer

    head = DefaultHead.load(default_head_path())
    extra = {"layers": head.layers} if head.layers else {}
    scorer = verdict_scorer(f"local:{head.verdict_model}", n_threads=threads, persist_states=False, **extra)
    return DefaultDetector(reader=scorer)


def write(work: Work, summary: dict[str, Any], verified: Any, threshold: float, loaded: dict[str, Dataset],
          tops: Tops, started: float) -> None:  # fmt: skip
    rows = [row for name, s in summary.items() if s["complete"] for row in table_rows(
        name, question_rows(work, name, loaded[name], s["questions"], tops[name]), threshold)]  # fmt: skip
    report(rows, {
        "benchmark": "retrieved_chunks", "cpu": cpu_model(), "cores": os.cpu_count(),
        "threads": work.config.threads, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "detector": "default (packaged head)", "threshold": threshold, "stop_below_p": STOP_BELOW_P,
        "retriever": work.config.retriever, "top": work.config.top, "seed": work.config.seed, "ks": list(KS),
        "seconds": "median_s: a question's reading with its chunks pre-read (the question side), up to the "
                   "chunk that answers clearly; the pre-reads apart, per set (sets)",
        "plan": work.planned(), "sets": summary, "verify_top3": verified, "pace": speed(work),
        "seconds_this_run": round(time.time() - started, 1),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}, RESULT)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-retrieved-chunks"))
    ap.add_argument("--questions", type=int, default=150, help="the most questions a set")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp and torch threads")
    ap.add_argument("--budget-minutes", type=float, default=60.0)
    ap.add_argument("--report-only", action="store_true", help="the table from the work folder; no model")
    ap.add_argument(
        "--only",
        choices=sorted(SETS),
        help="read (and plan under this budget) this set alone; the others as logged",
    )
    args = ap.parse_args()
    started = time.time()
    config = ChunksConfig(questions=args.questions, threads=args.threads, budget_minutes=args.budget_minutes)
    work = Work(args.work, config)
    os.environ["SCOPEGUARD_N_THREADS"] = str(args.threads)
    threshold = DefaultHead.load(default_head_path()).threshold
    present = {n: p for n, p in SETS.items() if (p / "questions.jsonl").is_file()}
    if FIRST not in present:
        raise SystemExit(f"skipped: needs the shared ELOQ dev set at {SETS[FIRST]}")
    loaded = {n: load_dataset(p) for n, p in present.items()}
    tops: Tops = {}
    det = None
    if args.report_only or args.only:
        for r in work.retrieval.rows():
            tops.setdefault(r["set"], {})[r["id"]] = r["retrieved"]
    if not args.report_only:
        import torch

        torch.set_num_threads(args.threads)
        det = detector(args.threads)
    summary: dict[str, Any] = {}
    verified = None
    for name, ds in loaded.items():
        reading = det is not None and args.only in (None, name)
        if reading:
            tops.pop(name, None)
            prepare(
                work, name, loaded, tops, args.budget_minutes * 60 - (time.time() - work.first_start) - 60
            )
        n = work.planned().get(name, {}).get("questions", 0)
        if not n or name not in tops:
            continue
        if reading:
            read_set(det, work, name, ds, n, tops[name])
            if name == FIRST:
                verify_read(det, work, name, ds, n, tops[name])
        if name == FIRST:
            verified = verify_summary(work, name, ds, n, tops[name], threshold)
        summary[name] = finish_set(work, name, ds, n, tops[name], threshold)
        write(work, summary, verified, threshold, loaded, tops, started)
        done = f"done; {PER_SET / (name + '.json')}" if summary[name]["complete"] else "still being read"
        print(f"{name}: {done}", flush=True)


if __name__ == "__main__":
    main()
