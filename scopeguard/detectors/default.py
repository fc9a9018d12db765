"""The shipped ``default`` detector: one read of each document, signals from it, one learned head.

1. **Read.** The packaged Qwen2.5-Coder-1.5B (llama.cpp) reads the instruction, the document and
   the question, and is asked "Does the document contain the answer?" (``answerability_verdict``).
   From that one decode come the Yes/No log-probabilities (``margin`` = log P(No) - log P(Yes))
   and the hidden state at the verdict position of one layer (the paper's probe, ELOQ section
   4.2.1, read from the same pass through llama.cpp's eval callback: no second read).
2. **Optionally, a second question against the same document state.** ``answerability_inference``
   asks whether a careful reader could answer from what the document states or clearly implies; it
   shares everything with the first prompt but its last line, so it costs only those tokens
   (``inference_margin``). A head may use it; the packaged one does not (it did not help any
   left-out dataset).
3. **Head.** A logistic regression over the chosen signals gives P(out of scope); a threshold
   gives the label. Which signals, which layer and how much regularisation were chosen by the
   worst leave-one-dataset-out score over the shared datasets, not by their mean
   (``benchmarks/reader_generalisation.py``); the packaged head's card
   (``scopeguard/_assets/default_head.md``) lists the data and the figures, and
   ``scopeguard train-detector --detector default`` reproduces it.

There is no word-overlap stage any more: the cascade it fed read 99.9% of the questions anyway,
and the overlap features lower the left-out SQuAD score (0.743 with the margin alone, 0.726 with
them). ``Verdict.uncovered`` still lists the question's content words the documents lack, from
plain stems, only when the label is out of scope.

Each retrieved document (or passage of a long one) is read on its own; the question counts as
answered when any passage answers it (the lowest P(out of scope) wins), and reading stops at a
passage that answers it clearly.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.calibration import (
    LogisticHead,
    choose_threshold,
    dataset_oof,
    fit_logistic,
    grouped_oof,
    head_file,
    operating_point,
    read_head_file,
    write_head_file,
)
from scopeguard.detectors._text import STOPWORDS, content_stem_set, stem, tokenize
from scopeguard.detectors.base import BaseDetector
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.types import Document, Label, Verdict

__all__ = [
    "INFERENCE_TEMPLATE",
    "READ_FEATURES",
    "SCALAR_PENALTY",
    "STOP_BELOW_P",
    "DefaultDetector",
    "DefaultHead",
    "balanced_weights",
    "default_head_path",
    "fit_default_head",
    "model_card",
    "penalties",
    "signal_matrix",
]

logger = logging.getLogger(__name__)

HEAD_FILE = "default_head.json"
INFERENCE_TEMPLATE = "answerability_inference"
#: the signals a head may use: the verdict margin, the inference probe's margin, a hidden state
READ_FEATURES = ("margin", "inference_margin", "hidden")
#: P(out of scope) at or below which a passage answers the question clearly: stop reading
STOP_BELOW_P = 0.05
#: the L2 penalty on the scalar signals relative to the hidden state's (held back by ``l2``)
SCALAR_PENALTY = 0.01


def default_head_path() -> Path:
    """The head shipped in the package (``scopeguard/_assets/default_head.json``)."""
    return Path(str(resources.files("scopeguard") / "_assets" / HEAD_FILE))


@dataclass(frozen=True)
class DefaultHead:
    """Which signals to read, and the fitted logistic head over them (with its threshold)."""

    verdict_model: str
    signals: tuple[str, ...]  # a subset of READ_FEATURES, in the head's column order
    head: LogisticHead
    threshold: float
    layer: int | None = None  # the hidden state's layer (transformers numbering), if "hidden"
    template: str = "answerability_verdict"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [s for s in self.signals if s not in READ_FEATURES]
        if bad or not self.signals:
            raise ModelError(f"default head: signals must be among {READ_FEATURES}, got {self.signals}")
        if ("hidden" in self.signals) != (self.layer is not None):
            raise ModelError("default head: a layer is needed exactly when the head reads a hidden state")
        if not 0.0 < self.threshold < 1.0:
            raise ModelError(f"default head: threshold must be in (0, 1), got {self.threshold}")

    @property
    def probes(self) -> tuple[str, ...]:
        """The verdict templates read after the main one."""
        return (INFERENCE_TEMPLATE,) if "inference_margin" in self.signals else ()

    @property
    def layers(self) -> tuple[int, ...]:
        return () if self.layer is None else (self.layer,)

    def row(self, margin: float, inference_margin: float | None, hidden: np.ndarray | None) -> np.ndarray:
        """One question's feature row in the head's column order."""
        parts: list[np.ndarray] = []
        for name in self.signals:
            if name == "margin":
                parts.append(np.array([margin]))
            elif name == "inference_margin":
                if inference_margin is None:
                    raise ModelError("default head: the inference probe was not read")
                parts.append(np.array([inference_margin]))
            else:
                if hidden is None:
                    raise ConfigurationError(
                        f"this default head reads the hidden state of layer {self.layer}, and the "
                        "reading model returned none: read with a llama.cpp model (local:...), or "
                        "use detector='logprob', or fit a head without it "
                        "(train-detector --detector default --signals margin,inference_margin)"
                    )
                parts.append(np.asarray(hidden, dtype=np.float64).ravel())
        return np.concatenate(parts)

    def scorer(self, spec: str | None = None) -> Any:
        """A :class:`~scopeguard.verdicts.VerdictScorer` for ``spec`` (default: the packaged model
        this head was fitted on) that reads the hidden states the head needs."""
        from scopeguard.verdicts import verdict_scorer

        extra = {"layers": self.layers} if self.layers else {}
        return verdict_scorer(spec or f"local:{self.verdict_model}", **extra)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "default_read",
            "verdict_model": self.verdict_model,
            "template": self.template,
            "signals": list(self.signals),
            "layer": self.layer,
            "head": self.head.to_dict(),
            "threshold": self.threshold,
            "info": self.info,
        }

    def save(self, path: str | Path) -> Path:
        """Write the head (JSON) and its card (``<name>.md`` beside it); returns the JSON file."""
        out = write_head_file(path, HEAD_FILE, self.to_dict())
        out.with_suffix(".md").write_text(model_card(self), encoding="utf-8")
        return out

    @classmethod
    def load(cls, path: str | Path) -> DefaultHead:
        raw = read_head_file(path, HEAD_FILE, "default head")
        p = head_file(path, HEAD_FILE)
        if raw.get("kind") != "default_read":
            raise ModelError(
                f"{p}: a {raw.get('kind', 'unknown')!r} head, not the reading head this version's "
                "default detector uses; refit it with `scopeguard train-detector --detector default`"
            )
        try:
            layer = raw.get("layer")
            return cls(
                verdict_model=str(raw["verdict_model"]),
                signals=tuple(str(s) for s in raw["signals"]),
                head=LogisticHead.from_dict(raw["head"]),
                threshold=float(raw["threshold"]),
                layer=None if layer is None else int(layer),
                template=str(raw.get("template", "answerability_verdict")),
                info=dict(raw.get("info", {})),
            )
        except ModelError as exc:
            raise ModelError(f"{p}: {exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{p}: not a valid default head ({type(exc).__name__}: {exc})") from None


class DefaultDetector(BaseDetector):
    """One read, several signals, one head (see the module docstring).

    Args:
        model: a head file or folder from ``train-detector --detector default`` (default: the
            packaged head).
        reader_llm: the reading model (an LLM spec, a chat model or a verdict scorer; default: the
            model the head was fitted on, the packaged Qwen2.5-Coder-1.5B through llama.cpp). A
            head with a hidden state needs a scorer that returns it (llama.cpp's, built here
            with the head's layer); a head fitted on another model warns.
        reader_kwargs: options for :class:`~scopeguard.detectors.logprob.LogProbDetector`
            (``chunk_tokens``, ``max_chunks``).
        threshold: overrides the head's threshold on P(out of scope).
    """

    name = "default"
    stages = ("read",)

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        reader_llm: Any = None,
        reader_kwargs: dict[str, Any] | None = None,
        threshold: float | None = None,
    ) -> None:
        self.head = DefaultHead.load(model if model is not None else default_head_path())
        if reader_llm is None:  # the packaged reading model: fail now, with the pip line, if it cannot run
            from scopeguard._optional import require

            require(
                "llama_cpp",
                extra="local",
                feature="the default detector's reading stage",
                package="llama-cpp-python",
            )
        self.threshold = self.head.threshold if threshold is None else float(threshold)
        if not 0.0 < self.threshold < 1.0:
            raise ConfigurationError(f"threshold must be in (0, 1), got {self.threshold}")
        self._llm = reader_llm
        self._reader_kwargs = dict(reader_kwargs or {})
        self._reader: Any = None

    @property
    def reader(self) -> Any:
        """The reading stage (a :class:`~scopeguard.detectors.logprob.LogProbDetector`), built lazily."""
        if self._reader is None:
            from scopeguard.detectors.logprob import LogProbDetector

            llm = self._llm  # a spec (or None: the packaged model) gets the head's layers
            scorer = self.head.scorer(llm) if llm is None or isinstance(llm, str) else llm
            self._reader = LogProbDetector(llm=scorer, **self._reader_kwargs)
            if self._reader.scorer.name != self.head.verdict_model:
                logger.warning(
                    "default head was fitted on %s; reading with %s",
                    self.head.verdict_model,
                    self._reader.scorer.name,
                )
        return self._reader

    def load(self) -> None:
        """Load the reading model now (otherwise on the first question)."""
        self.reader.load()

    def preread(self, documents: Sequence[Document | str], *, progress: bool | None = None) -> int:
        """Read ``documents`` ahead of the questions and keep the model's state after each (on disk
        with llama.cpp), so that a later question costs only its own tokens; see
        :meth:`LogProbDetector.preread`. Returns the passages read."""
        return int(self.reader.preread(documents, progress=progress))

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        reader = self.reader
        best: tuple[float, float, float | None] | None = None
        n = 0
        for scores in reader.read_passages(question, documents, self.head.probes):
            main, inference = scores[0], (scores[1].margin if len(scores) > 1 else None)
            p = float(self.head.head.predict(self.head.row(main.margin, inference, main.hidden))[0])
            n += 1
            if best is None or p < best[0]:
                best = (p, main.margin, inference)
            if p <= STOP_BELOW_P:  # clearly answered here: the rest cannot change that
                break
        assert best is not None  # as_documents guarantees at least one document
        p, margin, inference = best
        label: Label = "out_of_scope" if p >= self.threshold else "in_scope"
        p_no = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, margin))))
        where = f" (best of {n} passages read)" if n > 1 else ""
        rationale = (
            f"{reader.scorer.name} answers 'does the document contain the answer?' with P(No)={p_no:.2f}"
        )
        if inference is not None:
            p_inf = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, inference))))
            rationale += f", 'could a careful reader answer it?' with P(No)={p_inf:.2f}"
        rationale += f"{where}; P(out of scope) {p:.2f}"
        uncovered = _uncovered_words(question, documents) if label == "out_of_scope" else ()
        if uncovered:
            rationale += "; not in the documents: " + ", ".join(repr(u) for u in uncovered)
        return Verdict(
            label=label,
            score=p,
            rationale=rationale,
            uncovered=uncovered,
            stage="read",
            llm_calls=n * (1 + len(self.head.probes)),
        )


def _uncovered_words(question: str, documents: Sequence[Document]) -> tuple[str, ...]:
    """The question's content words whose stems no document has (shown next to a refusal)."""
    doc_stems: set[str] = set().union(*(content_stem_set(d.text) for d in documents))
    words = (t for t in tokenize(question) if t not in STOPWORDS and stem(t) not in doc_stems)
    return tuple(dict.fromkeys(words))


# -- fitting ----------------------------------------------------------------------------------
def balanced_weights(datasets: Sequence[str], labels: np.ndarray) -> np.ndarray:
    """Weights under which each dataset, and each class within it, counts the same."""
    names = np.asarray(datasets)
    y = np.asarray(labels)
    w = np.zeros(len(y))
    for name in set(names.tolist()):
        for label in (0, 1):
            m = (names == name) & (y == label)
            if m.any():
                w[m] = 1.0 / m.sum()
    return w * (len(w) / w.sum())


def signal_matrix(signals: Any, names: Sequence[str], layer: int | None) -> tuple[np.ndarray, list[str]]:
    """The feature matrix of :class:`~scopeguard.signals.Signals` for a head's ``names``."""
    cols: list[np.ndarray] = []
    columns: list[str] = []
    for name in names:
        if name == "margin":
            cols.append(signals.column("margin")[:, None])
            columns.append("margin")
        elif name == "inference_margin":
            if INFERENCE_TEMPLATE not in signals.probes:
                raise ConfigurationError("the signals hold no inference probe: extract with probes=...")
            cols.append(np.asarray(signals.probes[INFERENCE_TEMPLATE], dtype=np.float64)[:, None])
            columns.append("inference_margin")
        elif name == "hidden":
            if signals.hidden is None or layer not in signals.layers:
                raise ConfigurationError(f"the signals hold no hidden state of layer {layer}")
            h = np.asarray(signals.hidden[:, signals.layers.index(layer), :], dtype=np.float64)
            cols.append(h)
            columns.extend(f"h{layer}_{i}" for i in range(h.shape[1]))
        else:
            raise ConfigurationError(f"unknown signal {name!r}; valid: {', '.join(READ_FEATURES)}")
    return np.hstack(cols), columns


def penalties(columns: Sequence[str]) -> list[float]:
    """Per-column L2 scales: 1 for a hidden state's dimensions, :data:`SCALAR_PENALTY` for the rest
    (a joint L2 would shrink the margin as hard as any one of 1,536 hidden dimensions)."""
    return [1.0 if c.startswith("h") and "_" in c else SCALAR_PENALTY for c in columns]


def fit_default_head(
    signals: Any,
    *,
    verdict_model: str,
    names: Sequence[str] = ("margin", "hidden"),
    layer: int | None = None,
    l2: float = 300.0,
    dataset_of: dict[str, str] | None = None,
    max_false_refusal: float | None = None,
    folds: int = 5,
    seed: int = 0,
    info: dict[str, Any] | None = None,
) -> tuple[DefaultHead, dict[str, Any]]:
    """Fit the reading head on :class:`~scopeguard.signals.Signals`; returns it and its report.

    Each dataset, and each class within it, weighs the same; ``l2`` holds the hidden state back
    (the scalar signals get :data:`SCALAR_PENALTY` of it). The report has document-grouped
    cross-validation over all the data (``cv``, overall and per dataset) and, with two datasets
    or more, leave-one-dataset-out (``lodo``: each dataset scored by a head fitted on the
    others), both at the threshold chosen on the out-of-fold scores: the most accurate one whose
    false-refusal rate (in-scope questions called out of scope) stays at most ``max_false_refusal``
    on every dataset (``None``: the most accurate). ``dataset_of`` maps signal
    dataset names to the groups left out together (e.g. both SQuAD files as ``squad2``).
    """
    names = tuple(names)
    layer = layer if "hidden" in names else None
    x, columns = signal_matrix(signals, names, layer)
    if not np.isfinite(x).all():
        raise ConfigurationError("fit_default_head: some questions lack a signal (NaN): read them all first")
    y = np.asarray(signals.labels, dtype=int)
    if len(set(y.tolist())) < 2:
        raise ConfigurationError("the datasets need both in-scope and out-of-scope questions")
    datasets = [(dataset_of or {}).get(d, d) for d in signals.datasets]
    w = balanced_weights(datasets, y)

    scales = penalties(columns)

    def fp(tr: np.ndarray, te: np.ndarray) -> np.ndarray:
        return fit_logistic(x[tr], y[tr], columns, weights=w[tr], l2=l2, penalty=scales).predict(x[te])

    p_cv = grouped_oof(len(y), signals.groups, fp, folds=folds, seed=seed)
    threshold = _threshold(p_cv, y, w, datasets, max_false_refusal)
    report: dict[str, Any] = {
        "signals": list(names),
        "layer": layer,
        "l2": l2,
        "threshold": threshold,
        "cv": _points(p_cv, y, datasets, threshold),
    }
    if len(set(datasets)) > 1:
        p_lodo = dataset_oof(datasets, fp)
        report["lodo"] = _points(p_lodo, y, datasets, threshold)["per_dataset"]
    final = fit_logistic(x, y, columns, weights=w, l2=l2, penalty=scales)
    head = DefaultHead(
        verdict_model=verdict_model,
        signals=names,
        head=final,
        threshold=threshold,
        layer=layer,
        info={**(info or {}), **report},
    )
    return head, {**report, "out_of_fold": {"p": p_cv, "pred": p_cv >= threshold}}


def _threshold(
    p: np.ndarray, y: np.ndarray, w: np.ndarray, datasets: Sequence[str], max_false_refusal: float | None
) -> float:
    """The out-of-fold threshold (see :func:`fit_default_head`), kept within [0.05, 0.95]."""
    best = choose_threshold(p, y, w)
    if max_false_refusal is not None:
        names = np.asarray(datasets)

        def worst_fr(t: float) -> float:
            return max(
                float((p[(names == n) & (y == 0)] >= t).mean())
                for n in set(datasets)
                if ((names == n) & (y == 0)).any()
            )

        if worst_fr(best) > max_false_refusal:
            candidates = [t for t in np.unique(p) if worst_fr(float(t)) <= max_false_refusal]
            if candidates:
                accuracy = [float((w * ((p >= t) == (y == 1))).sum() / w.sum()) for t in candidates]
                best = float(candidates[int(np.argmax(accuracy))])
            else:
                best = float(p.max())
    return float(min(0.95, max(0.05, best)))


def _points(p: np.ndarray, y: np.ndarray, datasets: Sequence[str], threshold: float) -> dict[str, Any]:
    names = np.asarray(datasets)
    per = {
        name: operating_point(p[names == name], y[names == name], threshold).to_dict()
        for name in sorted(set(datasets))
    }
    return {"overall": operating_point(p, y, threshold).to_dict(), "per_dataset": per}


def _limits(max_docs: Any) -> str:
    if isinstance(max_docs, list):
        return ", ".join("all" if m is None else str(m) for m in max_docs)
    return "all" if max_docs is None else str(max_docs)


def model_card(head: DefaultHead) -> str:
    """The head's card: what it reads, what it was fitted on, and how it did out of fold."""
    info = head.info
    lines = [
        "# scopeguard default head",
        "",
        f"- Reading model: `{head.verdict_model}` (prompt `{head.template}`"
        + (f", then `{INFERENCE_TEMPLATE}` on the same document state" if head.probes else "")
        + ")",
        f"- Signals: {', '.join(head.signals)}"
        + (f"; hidden state of layer {head.layer} at the verdict position" if head.layer else ""),
        f"- Logistic head, L2 {info.get('l2', '?')}, threshold {head.threshold:.3f} on P(out of scope)",
        f"- Data: {', '.join(info.get('datasets', [])) or '?'} ({info.get('n', '?')} questions; "
        f"documents per dataset: {_limits(info.get('max_docs'))})",
        "- Each dataset, and each class within it, weighs the same in the fit.",
    ]
    if info.get("selection"):
        lines.append(f"- Chosen by: {info['selection']}")
    lines += [
        "",
        "| "
        + " | ".join(
            (
                "dataset",
                "n",
                "CV accuracy",
                "CV AUROC",
                "CV false refusals",
                "LODO accuracy",
                "LODO AUROC",
                "LODO false refusals",
            )
        )
        + " |",
    ]
    lines.append("|---|---|---|---|---|---|---|---|")
    cv = info.get("cv", {}).get("per_dataset", {})
    lodo = info.get("lodo", {})
    for name in sorted(cv):
        c, lo = cv[name], lodo.get(name, {})

        def f(d: dict[str, Any], k: str) -> str:
            v = d.get(k)
            return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

        lines.append(
            f"| {name} | {c.get('n')} | {f(c, 'accuracy')} | {f(c, 'auroc')} | {f(c, 'false_refusal_rate')} "
            f"| {f(lo, 'accuracy')} | {f(lo, 'auroc')} | {f(lo, 'false_refusal_rate')} |"
        )
    lines += [
        "",
        "CV: document-grouped, out of fold, on all the data. LODO: fitted on the other datasets, "
        "scored on this one. Both at the head's threshold.",
        "",
    ]
    return "\n".join(lines)
