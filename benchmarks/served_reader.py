"""Does a reader served by an engine read like the same model in process, and what does it cost?

    python benchmarks/served_reader.py [--work /tmp/scopeguard-served-reader] [--limit N]
        [--parts parity,prefix,concurrency] [--model qwen2.5-coder-1.5b] [--threads 2]

Serves the packaged reader with llama-cpp-python's server (``scopeguard.llm.llama_server``, under
the packaged name, so ``openai:qwen2.5-coder-1.5b`` sends the in-process prompt text raw to
``/completions``) and reads with the ``logprob`` detector twice: in process (the default reader,
llama.cpp) and served (``OpenAIVerdicts`` over ``OpenAIChatModel``). Three parts:

* **parity**: 200 questions drawn with a fixed seed from the shared datasets (70 eloq-gold-dev, 65
  squad2-train, 65 subjqa; ``--limit N`` takes the first N of each): the Pearson correlation of
  the two reads' margins and P(out of scope), the share given the same label at the packaged
  head's threshold, how far the margins moved, and each read's median seconds. Also recorded:
  the label the served margin gets under the uncalibrated head that a reader served under another
  name (``openai:qwen``) is given (P(No) >= 0.5): what the two reads disagreed on before the
  served reader took the in-process name. Rows go to ``rows.jsonl`` in the work folder (a killed
  run resumes).
* **prefix**: documents outside the draw with a second question about them: the served (and
  in-process) seconds of a first question about a document nothing has read, of a second question
  about it right after, and of that second question again after a question about another document.
* **concurrency**: checks on documents nothing has read, against the one served detector: 4 one
  after another and then at once from threads, in 3 alternating rounds, then 16 once each way;
  the wall time of the concurrent run against the sequential one (median over the rounds).

Prints the table and writes ``benchmarks/results/served_reader.json`` (figures and question ids
only, never text; a ``--limit`` trial writes ``trial.json`` in the work folder unless ``--out``
says where; the file records the draw it read).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
# llama.cpp's OpenMP threads spin while they wait: the idle in-process reader's would starve the server's
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from _report import cpu_model, report

from scopeguard.data import load_dataset
from scopeguard.detection.detectors.logprob import LogProbDetector
from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
from scopeguard.detection.read.openai import OpenAIVerdicts
from scopeguard.llm.llama_server import llama_cpp_server
from scopeguard.llm.openai_compat import OpenAIChatModel
from scopeguard.models import local_gguf
from scopeguard.runs import RunFolder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "served_reader.json"
MODEL = "qwen2.5-coder-1.5b"
DRAW = {"eloq-gold-dev": 70, "squad2-train": 65, "subjqa": 65}
PARTS = ("parity", "prefix", "concurrency")

Item = tuple[str, str, str, str, str]  # dataset, question id, question, document id, document


class ServedConfig(BaseModel):
    seed: int = 0
    draw: dict[str, int] = DRAW
    model: str = MODEL
    threads: int = 2
    n_ctx: int = 4096


def _items(config: ServedConfig) -> tuple[list[Item], dict[str, list[str]], list[Item]]:
    """The draw (``(dataset, question id, question, doc id, document)``), per document the
    questions asked about it in its dataset (for the prefix part), and one question about each
    document (for the concurrency part)."""
    out: list[Item] = []
    asked: dict[str, list[str]] = {}
    pool: dict[str, Item] = {}
    for name, n in config.draw.items():
        ds = load_dataset(DATA / name)
        for q in ds.questions:
            asked.setdefault(f"{name}/{q.doc_id}", []).append(q.question)
            pool.setdefault(
                f"{name}/{q.doc_id}",
                (name, q.id, q.question, f"{name}/{q.doc_id}", ds.documents[q.doc_id].text),
            )
        rng = np.random.default_rng(config.seed)
        for i in rng.permutation(len(ds.questions))[:n]:
            q = ds.questions[int(i)]
            out.append((name, q.id, q.question, f"{name}/{q.doc_id}", ds.documents[q.doc_id].text))
    return out, asked, list(pool.values())


def _read(detector: LogProbDetector, question: str, document: str) -> dict[str, Any]:
    started = time.perf_counter()
    best, passages = detector.reader.read(question, [document])
    return {
        "margin": best.margin,
        "p": detector.head.p_oos(best.margin),
        "passages": passages,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _pearson(a: list[float], b: list[float]) -> float:
    return float(np.corrcoef(a, b)[0, 1]) if len(a) > 1 else float("nan")


def parity(
    work: Path, config: ServedConfig, items: list[Item], local: LogProbDetector, served: LogProbDetector
) -> list[dict[str, Any]]:
    folder = RunFolder(work, ServedConfig, free=("draw",))  # a trial's draw is the full one's start
    folder.open(config)
    log = folder.log("rows.jsonl")
    done = log.keys(lambda row: row["id"])
    todo = [it for it in items if it[1] not in done]
    print(f"parity: {len(items)} questions, {len(done)} done before, {len(todo)} to read", flush=True)
    for n, (dataset, qid, question, _doc_id, document) in enumerate(todo, 1):
        row: dict[str, Any] = {
            "id": qid,
            "dataset": dataset,
            "local": _read(local, question, document),
            "served": _read(served, question, document),
        }
        log.append(row)
        a, b = row["local"], row["served"]
        print(f"[{n}/{len(todo)}] {dataset} {qid}: margin {a['margin']:+.3f} / {b['margin']:+.3f}, "
              f"{a['seconds']:.1f}s / {b['seconds']:.1f}s", flush=True)  # fmt: skip
    wanted = {it[1] for it in items}
    rows = [row for row in log.rows() if row["id"] in wanted]
    threshold = served.threshold
    groups = {"all": rows, **{d: [r for r in rows if r["dataset"] == d] for d in config.draw}}
    out = []
    for group, part in groups.items():
        if not part:
            continue
        lm, sm = [r["local"]["margin"] for r in part], [r["served"]["margin"] for r in part]
        lp, sp = [r["local"]["p"] for r in part], [r["served"]["p"] for r in part]
        same = [(a >= threshold) == (b >= threshold) for a, b in zip(lp, sp, strict=True)]
        # a reader served under another name gets the uncalibrated head: P(No) >= 0.5, margin >= 0
        unnamed = [(a >= threshold) == (b >= 0) for a, b in zip(lp, sm, strict=True)]
        moved = [abs(a - b) for a, b in zip(lm, sm, strict=True)]
        out.append({
            "part": "parity",
            "questions": group,
            "n": len(part),
            "margin_corr": round(_pearson(lm, sm), 4),
            "p_corr": round(_pearson(lp, sp), 4),
            "same_label": round(sum(same) / len(same), 4),
            "same_label_unnamed": round(sum(unnamed) / len(unnamed), 4),
            "margin_moved_median": round(statistics.median(moved), 4),
            "margin_moved_max": round(max(moved), 4),
            "local_s_median": round(statistics.median(r["local"]["seconds"] for r in part), 2),
            "served_s_median": round(statistics.median(r["served"]["seconds"] for r in part), 2),
        })  # fmt: skip
    return out


def _seconds(detector: LogProbDetector, question: str, document: str) -> float:
    started = time.perf_counter()
    detector.reader.read(question, [document])
    return round(time.perf_counter() - started, 3)


def _ratio(a: list[float], b: list[float]) -> float:
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 3)


def _unread(
    items: list[Item], pool: list[Item], asked: dict[str, list[str]]
) -> tuple[list[Item], list[Item]]:
    """Documents outside the draw (no part read them before), spread over the datasets: those with
    a second question about them (for the prefix part), and the others (for concurrency)."""
    drawn = {it[3] for it in items}
    spread = [it for it in pool if it[3] not in drawn][::7]
    with_second = [it for it in spread if len(asked[it[3]]) > 1]
    return with_second, [it for it in spread if it not in with_second]


def prefix(
    docs: list[Item], asked: dict[str, list[str]], detectors: dict[str, LogProbDetector], n_docs: int
) -> list[dict[str, Any]]:
    """A first question about a document nothing read before, a second right after, and the first
    again after a question about another document (each side on its own documents)."""
    out = []
    for k, (side, det) in enumerate(detectors.items()):
        mine = docs[2 * k * n_docs : (2 * k + 1) * n_docs]
        others = docs[(2 * k + 1) * n_docs : (2 * k + 2) * n_docs]  # read in between, never asked again
        first, after, between = [], [], []
        for (_ds, _qid, q1, doc_id, document), (_, _, other_q, _, other_doc) in zip(
            mine, others, strict=True
        ):
            q2 = next(q for q in asked[doc_id] if q != q1)
            first.append(_seconds(det, q1, document))
            after.append(_seconds(det, q2, document))
            det.reader.read(other_q, [other_doc])
            between.append(_seconds(det, q2, document))
        if not first:
            continue
        out.append({
            "part": "prefix",
            "reader": side,
            "n": len(first),
            "first_s_median": round(statistics.median(first), 2),
            "second_s_median": round(statistics.median(after), 2),
            "second_ratio": _ratio(after, first),
            "after_another_s_median": round(statistics.median(between), 2),
            "after_another_ratio": _ratio(between, first),
        })  # fmt: skip
    return out


def concurrency(
    docs: list[Item], served: LogProbDetector, n: int = 16, rounds: int = 3
) -> list[dict[str, Any]]:
    """Checks on documents nothing has read, against the one served detector: 4 of them one after
    another and then at once from threads, in ``rounds`` alternating rounds (so that a machine
    whose load drifts weighs on both alike), then all ``n`` once each way. Before each run a check
    on another document leaves the server holding none of them (llama-cpp-python's server keeps
    only the last prompt; an engine that keeps many would need new documents for each run)."""
    if len(docs) < n + 1:
        print(f"concurrency: only {len(docs)} unread documents, need {n + 1}; skipped")
        return []
    docs, flush = docs[:n], docs[n]

    def check(it: Item) -> None:
        served.detect(it[2], it[4])

    def run(batch: list[Item], workers: int) -> float:
        check(flush)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as executor:
            list(executor.map(check, batch))
        return time.perf_counter() - started

    out = []
    for size, repeat in ((4, rounds), (n, 1)):
        pairs = [(run(docs[:size], 1), run(docs[:size], size)) for _ in range(repeat)]
        out.append({
            "part": "concurrency",
            "run": f"{size} at once",
            "n": size,
            "rounds": repeat,
            "sequential_s_median": round(statistics.median(a for a, _ in pairs), 2),
            "wall_s_median": round(statistics.median(b for _, b in pairs), 2),
            "ratio_to_sequential": round(statistics.median(b / a for a, b in pairs), 3),
            "ratios": [round(b / a, 3) for a, b in pairs],
        })  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-served-reader"))
    ap.add_argument("--limit", type=int, default=None, help="the first N questions of each dataset's draw")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"which parts to run ({', '.join(PARTS)})")
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefix-docs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None, help="the result file (default: see the docstring)")
    args = ap.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    if unknown := set(parts) - set(PARTS):
        raise SystemExit(f"unknown parts {sorted(unknown)}; valid: {', '.join(PARTS)}")
    missing = [name for name in DRAW if not (DATA / name / "questions.jsonl").is_file()]
    if missing:
        print(f"skipped: the shared datasets {', '.join(missing)} are not in {DATA}")
        return
    config = ServedConfig(model=args.model, threads=args.threads)
    if args.limit is not None:
        config = config.model_copy(update={"draw": {k: min(v, args.limit) for k, v in DRAW.items()}})
    items, asked, pool = _items(config)
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    local = LogProbDetector(
        reader=LlamaCppVerdicts(config.model, n_ctx=config.n_ctx, n_threads=config.threads)
    )
    path = local_gguf(config.model)
    table: list[dict[str, Any]] = []
    with llama_cpp_server(
        path, n_ctx=config.n_ctx, n_threads=config.threads, alias=config.model, log=args.work / "server.log"
    ) as base_url:
        scorer = OpenAIVerdicts(OpenAIChatModel(config.model, base_url=base_url, timeout=900))
        served = LogProbDetector(reader=scorer)
        print(f"served: {scorer!r}, form {scorer.form}; in process: {local.scorer!r}", flush=True)
        if "parity" in parts:
            table += parity(args.work, config, items, local, served)
        with_second, others = _unread(items, pool, asked)
        if "prefix" in parts:
            # in process, a document another run pre-read into the default states folder is no first
            # read: this side keeps its states in the work folder
            cold = LlamaCppVerdicts(config.model, n_ctx=config.n_ctx, n_threads=config.threads,
                                    state_dir=args.work / "local-states")  # fmt: skip
            sides = {"served": served, "local": LogProbDetector(reader=cold)}
            table += prefix(with_second, asked, sides, args.prefix_docs)
        if "concurrency" in parts:
            table += concurrency(others, served)
    report(
        table,
        {
            "cpu": cpu_model(),
            "threads": config.threads,
            "model": config.model,
            "server": "llama-cpp-python's llama_cpp.server (one request at a time, logits_all for log-probs)",
            "served_form": scorer.form,
            "seed": config.seed,
            "draw": config.draw,
            "threshold": served.threshold,
            "parts": parts,
            "seconds_this_run": round(time.time() - started, 1),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        args.out or (RESULT if args.limit is None else args.work / "trial.json"),
    )


if __name__ == "__main__":
    main()
