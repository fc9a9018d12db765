"""Do verdicts read from compact saved states agree with fresh reads? (#60 item 2)

    python benchmarks/state_agreement.py [--work /tmp/scopeguard-state-agreement] [--kv q8_0,f16]

Draws 200 questions with a fixed seed from the shared datasets (70 eloq-gold-dev, 65 squad2-train,
65 subjqa) and scores each with the packaged ``default`` detector's head (its P(out of scope) and
threshold, the reader's verdict margin) in two ways:

* **fresh**: the reference, today's read: an f16 KV cache, no kept state of any kind (the whole
  prompt decoded from nothing);
* **state, per KV type** (``--kv``): the document pre-read by one reader (``Guard.preread``'s path)
  into a states folder, then a *new* reader with that KV type restoring the saved state from the
  folder and reading only the question (f16's, the baseline, on every 10th question).

It reports, per KV type, the Pearson correlation of the margins and of P(out of scope) with the
fresh read's, the share of questions given the same label at the head's threshold, how far the
margins moved, and the bytes per token of the saved states (file sizes over the tokens each holds).
The bar: correlation >= 0.99, the same label on >= 99% of the questions, <= 16 KB a token.

Each question's figures are appended to ``rows.jsonl`` in the work folder, so a killed run resumes
where it stopped; the states folders live there too. Prints the table and writes
``benchmarks/results/state_agreement.json`` (figures and question ids only, never text).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import cpu_model, report

from scopeguard.data import load_dataset
from scopeguard.detection.detectors.default import DefaultDetector
from scopeguard.detection.head.default import DefaultHead, default_head_path
from scopeguard.detection.read.llama_states import saved_states_summary
from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
from scopeguard.runs import RunFolder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULT = ROOT / "benchmarks" / "results" / "state_agreement.json"
MODEL = "qwen2.5-coder-1.5b"
DRAW = {"eloq-gold-dev": 70, "squad2-train": 65, "subjqa": 65}


class AgreementConfig(BaseModel):
    seed: int = 0
    draw: dict[str, int] = DRAW
    model: str = MODEL
    kv: list[str] = ["q8_0", "f16"]
    #: read a KV type's state path on every n-th question of the draw (f16's, the baseline, on a sample)
    kv_every: dict[str, int] = {"q8_0": 1, "f16": 10}
    threads: int = 2


def _questions(config: AgreementConfig) -> list[tuple[str, str, str, str]]:
    """``(dataset, question id, question, document)``, drawn with the config's seed."""
    out = []
    for name, n in config.draw.items():
        ds = load_dataset(DATA / name)
        rng = np.random.default_rng(config.seed)
        for i in rng.permutation(len(ds.questions))[:n]:
            q = ds.questions[int(i)]
            out.append((name, q.id, q.question, ds.documents[q.doc_id].text))
    return out


def _detector(config: AgreementConfig, **kw: Any) -> DefaultDetector:
    scorer = LlamaCppVerdicts(config.model, n_threads=config.threads, **kw)
    return DefaultDetector(reader=scorer)


def _timed(detector: DefaultDetector, question: str, document: str) -> dict[str, float]:
    started = time.perf_counter()
    read = detector.reading(question, [document])
    return {
        "p": read.p_out_of_scope,
        "margin": read.margin,
        "passages": read.passages,
        "seconds": round(time.perf_counter() - started, 3),
    }


def measure(work: Path, config: AgreementConfig) -> list[dict[str, Any]]:
    """Every question's fresh and state-path figures (resumed from ``work/rows.jsonl``)."""
    folder = RunFolder(work, AgreementConfig, free=("draw",))  # a trial's draw is the full one's start
    config = folder.open(config)
    log = folder.log("rows.jsonl")
    done = log.keys(lambda row: row["id"])
    head = DefaultHead.load(default_head_path())
    layers = {"layers": head.layers}
    fresh = _detector(config, kv_type="f16", state_cache_mb=0, persist_states=False, **layers)
    # one writer per KV type pre-reads each document into its folder (a document read before is found there)
    writers = {
        kv: _detector(config, kv_type=kv, state_dir=work / f"states-{kv}", state_disk_mb=1e6)
        for kv in config.kv
    }
    items = _questions(config)
    todo = [it for it in items if it[1] not in done]
    print(f"{len(items)} questions, {len(done)} done before, {len(todo)} to read", flush=True)
    order = {it[1]: i for i, it in enumerate(items)}
    for n, (dataset, qid, question, document) in enumerate(todo, 1):
        fresh.reader.scorer.forget()  # type: ignore[attr-defined]  # nothing of the last question kept
        row: dict[str, Any] = {"id": qid, "dataset": dataset, "fresh": _timed(fresh, question, document)}
        for kv, writer in writers.items():
            if order[qid] % config.kv_every.get(kv, 1):
                continue
            started = time.perf_counter()
            writer.preread([document], progress=False)
            preread = round(time.perf_counter() - started, 3)
            # a new reader, as in a new process: finds the instruction's and the document's states on disk
            reader = _detector(config, kv_type=kv, state_dir=work / f"states-{kv}", **layers)
            row[kv] = {**_timed(reader, question, document), "preread_seconds": preread}
            del reader
            gc.collect()
        log.append(row)
        print(f"[{n}/{len(todo)}] {dataset} {qid}: " + ", ".join(
            f"{k} p={v['p']:.3f} m={v['margin']:+.3f}" for k, v in row.items() if isinstance(v, dict)
        ), flush=True)  # fmt: skip
    wanted = {it[1] for it in items}
    return [row for row in log.rows() if row["id"] in wanted]


def _pearson(a: list[float], b: list[float]) -> float:
    return float(np.corrcoef(a, b)[0, 1]) if len(a) > 1 else float("nan")


def summarise(
    rows: list[dict[str, Any]], config: AgreementConfig, work: Path, threshold: float
) -> list[dict[str, Any]]:
    out = []
    for kv in config.kv:
        saved = saved_states_summary(work / f"states-{kv}")
        per_token = saved.bytes_per_token(kv)
        groups = {"all": rows, **{d: [r for r in rows if r["dataset"] == d] for d in config.draw}}
        for group, part in groups.items():
            part = [r for r in part if kv in r]
            if not part:
                continue
            fm = [r["fresh"]["margin"] for r in part]
            sm = [r[kv]["margin"] for r in part]
            fp = [r["fresh"]["p"] for r in part]
            sp = [r[kv]["p"] for r in part]
            same = [(a >= threshold) == (b >= threshold) for a, b in zip(fp, sp, strict=True)]
            moved = [abs(a - b) for a, b in zip(fm, sm, strict=True)]
            out.append({
                "kv_type": kv,
                "questions": group,
                "n": len(part),
                "margin_corr": round(_pearson(fm, sm), 4),
                "p_corr": round(_pearson(fp, sp), 4),
                "same_label": round(sum(same) / len(same), 4),
                "labels_changed": len(same) - sum(same),
                "margin_moved_median": round(statistics.median(moved), 4),
                "margin_moved_max": round(max(moved), 4),
                "p_moved_max": round(max(abs(a - b) for a, b in zip(fp, sp, strict=True)), 4),
                "kb_per_token": None if per_token is None or group != "all" else round(per_token / 1024, 2),
                "fresh_read_s_median": round(statistics.median(r["fresh"]["seconds"] for r in part), 2),
                "state_read_s_median": round(statistics.median(r[kv]["seconds"] for r in part), 2),
            })  # fmt: skip
            if group == "all":  # the bar of #60 item 2
                row = out[-1]
                row["meets_bar"] = bool(
                    row["margin_corr"] >= 0.99 and row["same_label"] >= 0.99
                    and per_token is not None and per_token <= 16 * 1024
                )  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/scopeguard-state-agreement"))
    ap.add_argument("--kv", default="q8_0,f16", help="the KV types whose saved states are compared")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="read at most this many questions (a trial)")
    args = ap.parse_args()
    missing = [name for name in DRAW if not (DATA / name / "questions.jsonl").is_file()]
    if missing:
        print(f"skipped: the shared datasets {', '.join(missing)} are not in {DATA}")
        return
    config = AgreementConfig(kv=args.kv.split(","), threads=args.threads)
    if args.limit is not None:  # a trial: the first questions of each dataset's draw
        config = config.model_copy(update={"draw": {k: min(v, args.limit) for k, v in DRAW.items()}})
    started = time.time()
    rows = measure(args.work, config)
    head = DefaultHead.load(default_head_path())
    table = summarise(rows, config, args.work, head.threshold)
    saved = {kv: saved_states_summary(args.work / f"states-{kv}") for kv in config.kv}
    report(
        table,
        {
            "cpu": cpu_model(),
            "threads": config.threads,
            "model": config.model,
            "seed": config.seed,
            "draw": config.draw,
            "threshold": head.threshold,
            "reference": "fresh read, f16 KV cache, no kept state",
            "saved_states": {
                kv: {"files": s.files, "bytes": s.bytes, "kv_types": s.kv_types} for kv, s in saved.items()
            },
            "seconds_this_run": round(time.time() - started, 1),
            # the reads' own time over all the runs that made these rows (a resumed run's too)
            "seconds_reading": round(
                sum(
                    v.get("seconds", 0) + v.get("preread_seconds", 0)
                    for r in rows
                    for v in r.values()
                    if isinstance(v, dict)
                )
            ),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        },
        RESULT if args.limit is None else args.work / "trial.json",
    )


if __name__ == "__main__":
    main()
