"""Document-grouped k-fold CV accuracy of the learned detectors on a dataset (the dev set by default).

Configurations: nli with mpnet (CLS and mean pooling) and probe (Qwen2.5-Coder-0.5B, Gemma 3
270M; GGUF through llama.cpp). Each runs twice: with the paper's head settings ("faithful":
10 epochs, Adam 1e-4, batch 8) and with settings fixed in advance for a tiny training set
("improved": 100 epochs, Adam 1e-3, weight decay 1e-2; not tuned on this data). Also measured
per configuration, in a child process: cold feature extraction time per question (empty cache,
document + question, median) and peak RSS. Features are cached, so re-runs are quick; a run
replaces its configurations in the JSON file and keeps the others.

    python benchmarks/learned_detectors.py [--data DIR] [--configs nli-cls,probe-qwen] [--max-docs N]

``--max-docs N`` keeps the questions of N documents (chosen by content hash, the order in which
the probe extracts them) when the full set is too slow for the machine. Writes
benchmarks/results/learned_detectors.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "eloq-gold-dev"
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "nli-mpnet-cls": ("nli", {"embedding_model": "mpnet", "pooling": "cls"}),
    "nli-mpnet-mean": ("nli", {"embedding_model": "mpnet", "pooling": "mean"}),
    "probe-qwen2.5-coder-0.5b": ("probe", {"llm": "qwen2.5-coder-0.5b", "n_threads": 1}),
    "probe-gemma3-270m": ("probe", {"llm": "gemma3-270m", "n_threads": 1}),
    # timing only (--timing-only): the same model through transformers (dequantised, float32)
    "probe-qwen2.5-coder-0.5b-transformers": (
        "probe",
        {"llm": "qwen2.5-coder-0.5b", "backend": "transformers", "n_threads": 1},
    ),
}
SETTINGS = {
    "faithful": {"epochs": 10, "lr": 1e-4, "batch_size": 8, "weight_decay": 0.0},
    "improved": {"epochs": 100, "lr": 1e-3, "batch_size": 8, "weight_decay": 1e-2},
}


def _subset(data: Path, max_docs: int | None) -> Any:
    from scopeguard.data import Dataset, load_dataset

    ds = load_dataset(data)
    if not max_docs:
        return ds
    keep = sorted(ds.documents.values(), key=lambda d: d.content_hash)[:max_docs]
    ids = {d.id for d in keep}
    return Dataset(
        documents={k: v for k, v in ds.documents.items() if k in ids},
        questions=tuple(q for q in ds.questions if q.doc_id in ids),
    )


def _run_config(
    name: str, data: str, max_docs: int | None, folds: int, seed: int, timing: int, cv: bool
) -> dict[str, Any]:
    from scopeguard.detection.head.training import cross_validate
    from scopeguard.detection.read import get_extractor
    from scopeguard.evaluation.detection import detection_metrics

    detector, kw = CONFIGS[name]
    ds = _subset(Path(data), max_docs)
    out: dict[str, Any] = {"config": name, "detector": detector, "extractor": kw, "n": len(ds.questions)}
    # cold extraction time: an empty cache, the first `timing` questions (each with its document)
    with tempfile.TemporaryDirectory() as tmp:
        ex = get_extractor(detector, cache_root=tmp, **kw)
        pairs = [(q.question, ds.documents[q.doc_id]) for q in ds.questions]
        seen: set[str] = set()
        firsts = [p for p in pairs if not (p[1].id in seen or seen.add(p[1].id))][:timing]  # type: ignore[func-returns-value]
        ex.batch_features(firsts[:1], progress=False)  # load the model outside the timing
        times = []
        for p in firsts[1:]:
            t = time.perf_counter()
            ex.batch_features([p], progress=False)
            times.append(time.perf_counter() - t)
        out["extract_s_per_question_cold_median"] = statistics.median(times) if times else None
    y_true = [q.label for q in ds.questions]
    for label, settings in SETTINGS.items() if cv else ():
        t = time.perf_counter()
        verdicts = cross_validate(ds, detector, folds=folds, seed=seed, progress=False, **settings, **kw)
        out[label] = {
            "settings": settings,
            "wall_s": time.perf_counter() - t,
            **detection_metrics(y_true, verdicts),
        }
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _child(args: tuple[Any, ...], queue: Any) -> None:
    try:
        queue.put(_run_config(*args))
    except Exception as exc:  # report and carry on with the next configuration
        queue.put({"config": args[0], "error": f"{type(exc).__name__}: {exc}"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-docs", type=int, default=None)
    ap.add_argument("--timing-questions", type=int, default=3)
    ap.add_argument("--timing-only", default="", help="configs to time without cross-validation")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "learned_detectors.json"))
    args = ap.parse_args()
    timing_only = [c.strip() for c in args.timing_only.split(",") if c.strip()]
    names = [c.strip() for c in args.configs.split(",") if c.strip()] + timing_only
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown config(s) {unknown}; valid: {', '.join(CONFIGS)}")
    ctx = mp.get_context("spawn")
    results = []
    for name in names:  # one child per configuration: its own peak RSS, one model at a time
        queue = ctx.Queue()
        proc = ctx.Process(
            target=_child,
            args=(
                (
                    name,
                    args.data,
                    args.max_docs,
                    args.folds,
                    args.seed,
                    args.timing_questions,
                    name not in timing_only,
                ),
                queue,
            ),
        )
        proc.start()
        res = queue.get()
        proc.join()
        results.append(res)
        print(json.dumps(res)[:300], flush=True)
    previous: list[dict[str, Any]] = []
    if Path(args.out).is_file():  # keep the other configurations of an earlier run
        previous = [r for r in json.loads(Path(args.out).read_text())["results"] if r["config"] not in names]
    results = previous + results
    report = {
        "benchmark": "learned_detectors",
        "data": args.data,
        "max_docs": args.max_docs,
        "folds": args.folds,
        "seed": args.seed,
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
        },
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    cols = ("config", "n", "acc faithful", "acc improved", "auroc impr", "s/q cold", "RSS MB")
    print(f"{cols[0]:40}" + "".join(f"{c:>13}" for c in cols[1:]))
    for r in results:
        if "error" in r:
            print(f"{r['config']:40} error: {r['error']}")
            continue
        sq = r["extract_s_per_question_cold_median"]
        cv = "faithful" in r
        cells = (
            r["n"],
            f"{r['faithful']['accuracy']:.3f}" if cv else "-",
            f"{r['improved']['accuracy']:.3f}" if cv else "-",
            f"{r['improved']['auroc']:.3f}" if cv else "-",
            "n/a" if sq is None else f"{sq:.2f}",
            f"{r['peak_rss_mb']:.0f}",
        )
        print(f"{r['config']:40}" + "".join(f"{c:>13}" for c in cells))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
