"""LoRA-tuning the reader, measured the way held-out sets judge it: runs of ``train_reader`` side by
side (an optimisation sweep, or one fold per left-out dataset), each set's AUROC, accuracy and
false refusals at the reader's own threshold before and after, and the worst left-out score.

    # a learning-rate sweep on small runs (validation = held-out documents; --eval sets never trained on)
    python benchmarks/studies/reader_tuning.py sweep --base qwen2.5-coder-0.5b \\
        --train ../shared/data/squad2-train ../shared/data/eloq-gold-dev ../shared/data/subjqa \\
        --eval benchmarks/data/near-miss benchmarks/data/implied \\
        --runs lr3e-5:lr=3e-5 lr1e-4:lr=1e-4 lr3e-4:lr=3e-4 --set batch=8 max_questions=480 --work /tmp/tune

    # leave one dataset out: one run per dataset, trained on the others, scored on it; with
    # --sizes, one such fold set per number of training questions (a learning curve)
    python benchmarks/studies/reader_tuning.py lodo --base qwen2.5-coder-0.5b --train A B C --set lr=1e-4 \\
        --sizes 200 800 --work /tmp/lodo

    # a finished run's reader at a threshold fitted on its validation documents (not at Yes/No's 0):
    # each set's margins read again, the threshold that maximises the validation sets' mean accuracy
    python benchmarks/studies/reader_tuning.py threshold --work /tmp/lodo --runs n200-without-subjqa

Each run is a ``train-reader`` run folder under ``--work``: a killed benchmark resumes every run
where it stopped (``--resume`` is implied), and a finished run is read back, not trained again.
Writes ``--out`` (JSON) and prints the table. Timings are the machine's: the JSON names it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _report
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/studies/: the other studies

from _report import report, settings

from scopeguard.detection.tune import DocumentStates, TuneConfig, train_reader
from scopeguard.detection.tune.card import CURVE_FILE, machine

RESULTS = Path(__file__).resolve().parent / "results"


def _run(
    name: str, config: TuneConfig, work: Path, threads: int | None, documents: DocumentStates
) -> dict[str, Any]:
    folder = work / name
    resume = (folder / "checkpoint" / "state.pt").is_file()
    if (folder / "reader.json").is_file():
        logging.info("%s: finished earlier, read back", name)
        curve = json.loads((folder / CURVE_FILE).read_text())
        first, last = curve["validation"][0], curve["validation"][-1]
        keep = [k for k in last if ":" in k]
        return {"before": {k: first[k] for k in keep}, "after": {k: last[k] for k in keep}, "curve": curve}
    report = train_reader(config, folder, resume=resume, threads=threads, progress=False, documents=documents)
    assert report is not None
    curve = json.loads((folder / CURVE_FILE).read_text())
    return {"before": report.before, "after": report.after, "curve": curve, "seconds": report.seconds}


def _read_back(work: Path, name: str) -> dict[str, Any]:
    """A finished or started run's own saved configuration (what it was trained with)."""
    path = work / name / "config.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _llama_scores(specs: dict[str, str], datasets: list[str]) -> dict[str, Any]:
    """Each detector spec (``logprob@local:FOLDER``, ``default``) read with llama.cpp on whole
    ``datasets``: accuracy, false refusals, AUROC, p50 latency, and accuracy by question kind."""
    from scopeguard.data import load_dataset
    from scopeguard.detection.detectors import detector_reads, get_detector
    from scopeguard.evaluation.detection import detection_metrics, run_detector

    out: dict[str, Any] = {}
    for label, spec in specs.items():
        name, _, llm = spec.partition("@")
        option = "reader" if detector_reads(name) else "llm"
        detector = get_detector(name, **({option: llm} if llm else {}))
        for folder in datasets:
            data = load_dataset(folder)
            y_true, verdicts = run_detector(detector, data, progress=False)
            metrics = detection_metrics(y_true, verdicts)
            kinds: dict[str, list[int]] = {}
            for q, y, v in zip(data.questions, y_true, verdicts, strict=True):
                tally = kinds.setdefault(str(q.metadata.get("kind", "all")), [0, 0])
                tally[0] += int(v.label == y)
                tally[1] += 1
            keep = ("n", "accuracy", "false_refusal_rate", "oos_recall", "auroc", "latency_ms_p50")
            out[f"{label}:{Path(folder).name}"] = {
                **{k: metrics[k] for k in keep if k in metrics},
                "correct_by_kind": {k: f"{a}/{b}" for k, (a, b) in sorted(kinds.items())},
            }
            logging.info("%s on %s: %s", label, Path(folder).name, out[f"{label}:{Path(folder).name}"])
    return out


def fitted_threshold(margins: dict[str, Any], labels: dict[str, Any]) -> float:
    """The margin threshold that maximises the mean of the sets' accuracies (each set weighs the
    same): 0, the midpoints between the sorted margins of all sets, and one below and one above
    them all (everything out of scope, everything in scope)."""
    import numpy as np

    if not margins:
        raise SystemExit("threshold: the run has no validation documents to fit a threshold on")
    pooled = np.sort(np.concatenate([np.asarray(m, dtype=float) for m in margins.values()]))
    candidates = np.concatenate([[0.0, pooled[0] - 1.0, pooled[-1] + 1.0], (pooled[1:] + pooled[:-1]) / 2])

    def score(t: float) -> float:
        return float(
            np.mean([np.mean((np.asarray(margins[k]) > t) == (np.asarray(labels[k]) > 0)) for k in margins])
        )

    return float(max(candidates, key=lambda t: (score(t), -abs(t))))


def _threshold(work: Path, names: list[str], threads: int | None) -> dict[str, Any]:
    """Each finished run's margins on its validation and evaluation sets, read again through its
    adapter; each set's metrics at the Yes/No threshold (0) and at one fitted on validation."""
    import numpy as np

    from scopeguard.detection.tune.loop import margin_metrics
    from scopeguard.detection.tune.model import load_tunable
    from scopeguard.detection.tune.train import prepare_run

    if threads:
        import torch

        torch.set_num_threads(threads)
    out: dict[str, Any] = {}
    for name in names:
        folder = work / name
        if not (folder / "reader.json").is_file():
            raise SystemExit(f"threshold: {folder} holds no finished run (no reader.json)")
        config = TuneConfig(**json.loads((folder / "config.json").read_text()))
        reader, _, _ = load_tunable(
            str(folder),
            rank=config.rank,
            alpha=config.alpha,
            dropout=0.0,
            targets=config.targets,
            template=config.template,
            top_layers=config.top_layers,
            adapt=config.adapt,
            dtype=config.dtype,
        )
        run = prepare_run(config, work / f"{name}.threshold", reader, DocumentStates())
        margins: dict[str, dict[str, Any]] = {"validation": {}, "evaluation": {}}
        labels: dict[str, dict[str, Any]] = {"validation": {}, "evaluation": {}}
        for kind, sets in (("validation", run.examples.validation), ("evaluation", run.examples.evaluation)):
            for key, items in sets.items():
                if items:
                    margins[kind][key] = run.read(items)
                    labels[kind][key] = np.array([e.label for e in items])
                    logging.info("%s: %s:%s read (%d)", name, kind, key, len(items))
        t = fitted_threshold(margins["validation"], labels["validation"])
        row: dict[str, Any] = {"threshold": t, "sets": {}}
        for kind in margins:
            for key, m in margins[kind].items():
                row["sets"][f"{kind}:{key}"] = {
                    "at_0": margin_metrics(m, labels[kind][key]),
                    "at_fitted": margin_metrics(m - t, labels[kind][key]),
                }
        out[name] = row
    return out


def _rows(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for name, row in runs.items():
        for key, after in row["after"].items():
            before = row["before"].get(key, {})
            rows.append(
                {
                    "run": name,
                    "set": key,
                    "n": int(after["n"]),
                    "auroc_before": round(before.get("auroc", float("nan")), 3),
                    "auroc_after": round(after["auroc"], 3),
                    "accuracy_before": round(before.get("accuracy", float("nan")), 3),
                    "accuracy_after": round(after["accuracy"], 3),
                    "false_refusals_after": round(after["false_refusal_rate"], 3),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["sweep", "lodo", "threshold"])
    parser.add_argument("--base", default="qwen2.5-coder-0.5b")
    parser.add_argument("--train", nargs="+", default=[], help="training dataset folders")
    parser.add_argument("--eval", nargs="*", default=[], help="datasets scored but never trained on")
    parser.add_argument(
        "--runs",
        nargs="*",
        default=[],
        help="sweep: NAME:key=value,key=value ...; threshold: finished runs' names",
    )
    parser.add_argument("--set", nargs="*", default=[], help="settings shared by every run (key=value)")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--sizes", nargs="*", type=int, default=[], help="lodo: training questions per fold (learning curve)"
    )
    parser.add_argument(
        "--left-out", nargs="*", default=[], help="lodo: only these folds (dataset folder names; default all)"
    )
    parser.add_argument("--prefix-cache-mb", type=float, default=4096, help="documents' states kept (MB)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--llama-sets",
        nargs="*",
        default=[],
        help="after training: read these whole datasets with llama.cpp through each tuned reader's GGUF "
        "adapter (logprob at its own threshold), the bare base, and the shipped default",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.mode == "threshold":
        if not args.runs:
            raise SystemExit("threshold: name the finished runs under --work (--runs NAME ...)")
        fitted = _threshold(args.work, args.runs, args.threads)
        rows = [
            {
                "run": name,
                "set": key,
                "n": int(v["at_0"]["n"]),
                "threshold": round(r["threshold"], 3),
                **{
                    f"{m}_at_{w}": round(v[f"at_{w}"][k], 3)
                    for w in ("0", "fitted")
                    for m, k in (("accuracy", "accuracy"), ("false_refusals", "false_refusal_rate"))
                },
                "auroc": round(v["at_0"]["auroc"], 3),
            }
            for name, r in fitted.items()
            for key, v in r["sets"].items()
        ]
        import torch

        result = {"machine": machine("cuda" if torch.cuda.is_available() else "cpu"), "mode": "threshold"}
        report(rows, {**result, "runs": fitted}, args.out or RESULTS / "reader_tuning_threshold.json")
        return
    if not args.train:
        raise SystemExit(f"{args.mode} needs --train")
    shared = {"base": args.base, **settings(args.set, TuneConfig.model_fields)}
    runs: dict[str, TuneConfig] = {}
    if args.mode == "sweep":
        for spec in args.runs or ["base:"]:
            name, _, pairs = spec.partition(":")
            extra = settings([p for p in pairs.split(",") if p], TuneConfig.model_fields)
            runs[name] = TuneConfig(datasets=args.train, evaluate=args.eval, **{**shared, **extra})
    else:
        for size in args.sizes or [None]:
            for left in args.train:
                if args.left_out and Path(left).name not in args.left_out:
                    continue
                rest = [d for d in args.train if d != left]
                name = f"without-{Path(left).name}" if size is None else f"n{size}-without-{Path(left).name}"
                sized = {} if size is None else {"max_questions": size}
                runs[name] = TuneConfig(datasets=rest, evaluate=[left, *args.eval], **{**shared, **sized})
    documents = DocumentStates(args.prefix_cache_mb)  # the base's document states, shared by the runs
    rows = {name: _run(name, cfg, args.work, args.threads, documents) for name, cfg in runs.items()}
    import torch

    result: dict[str, Any] = {
        "machine": machine("cuda" if torch.cuda.is_available() else "cpu"),  # where the runs trained
        "mode": args.mode,
        "runs": {name: {"config": _read_back(args.work, name), **row} for name, row in rows.items()},
    }
    if args.llama_sets:
        specs = {name: f"logprob@local:{args.work / name}" for name in runs}
        specs.update({f"bare {args.base}": f"logprob@local:{args.base}", "shipped default": "default"})
        result["llama_cpp"] = _llama_scores(specs, args.llama_sets)
    if args.mode == "lodo":
        left_out = {
            name: row["after"][f"evaluation:{Path(cfg.evaluate[0]).name}"]
            for (name, row), cfg in zip(rows.items(), runs.values(), strict=True)
        }
        before = {
            name: row["before"][f"evaluation:{Path(cfg.evaluate[0]).name}"]
            for (name, row), cfg in zip(rows.items(), runs.values(), strict=True)
        }
        curve: dict[str, dict[str, float]] = {}
        for size in args.sizes or [None]:
            tag = "all" if size is None else str(size)
            names = [n for n in runs if (size is None or n.startswith(f"n{size}-"))]
            curve[tag] = {
                "worst_left_out_accuracy": min(left_out[n]["accuracy"] for n in names),
                "worst_left_out_auroc": min(left_out[n]["auroc"] for n in names),
                "worst_left_out_accuracy_before": min(before[n]["accuracy"] for n in names),
                "worst_left_out_auroc_before": min(before[n]["auroc"] for n in names),
                "max_left_out_false_refusals": max(left_out[n]["false_refusal_rate"] for n in names),
            }
            c = curve[tag]
            print(
                f"{tag} training questions: worst left-out accuracy "
                f"{c['worst_left_out_accuracy_before']:.3f} -> {c['worst_left_out_accuracy']:.3f}, "
                f"AUROC {c['worst_left_out_auroc_before']:.3f} -> {c['worst_left_out_auroc']:.3f}"
            )
        result["learning_curve"] = curve
    report(_rows(rows), result, args.out or RESULTS / f"reader_tuning_{args.mode}.json")


if __name__ == "__main__":
    main()
