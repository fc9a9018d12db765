"""``train_reader``: LoRA on the reading model, trained on the verdict, checkpointed and resumable.

One optimizer update sees ``batch`` examples (gradient accumulation over micro-batches: one prompt
at a time on the CPU, where padding only costs, ``micro_batch`` prompts on CUDA). The learning rate
warms up linearly over the first ``warmup`` share of the updates and then follows a cosine to
zero; gradients are clipped to ``max_grad_norm`` and their norm logged with every update. Every
``eval_every`` updates (and before the first and after the last) the margins of the validation
documents (held out of each training dataset) and of the evaluation-only datasets are read:
loss, AUROC, accuracy and false refusals at the reader's own threshold (margin 0) make the
validation curve in the run folder.

The run folder (``out``) holds ``config.json`` (a resumed run must have the same settings),
``checkpoint/`` (adapter, optimizer, schedule, random state and the curve; written atomically
every ``checkpoint_minutes`` and at the end) and, when done, the tuned reader
(:mod:`scopeguard.detection.read.adapter`): ``peft/``, ``adapter.gguf`` where the base is a GGUF
model, ``reader.json``, ``card.md`` and ``curve.json``. The order of the examples is a function of
the seed and the epoch alone, so a killed run resumed from its checkpoint gives the same adapter
as one that was never stopped.
"""

from __future__ import annotations

import logging
import math
import os
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from scopeguard._progress import progress_meter, show_progress
from scopeguard.data import atomic_write_json
from scopeguard.detection.head.calibration import auroc
from scopeguard.detection.read.adapter import GGUF_ADAPTER, PEFT_DIR
from scopeguard.detection.read.reader import TEMPLATE
from scopeguard.detection.tune.card import CURVE_FILE, machine, render_card
from scopeguard.detection.tune.examples import Example, ExampleSet, build_examples
from scopeguard.detection.tune.model import ADAPT_MODES, DTYPES, TunableReader, _torch, load_tunable
from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.runs import RunFolder

__all__ = ["DEFAULT_TARGETS", "DocumentStates", "TuneConfig", "TuneReport", "train_reader"]

logger = logging.getLogger(__name__)

DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
CHECKPOINT = "checkpoint"
#: a run stops as diverged when more than half of this many recent updates were non-finite
_DIVERGED_WINDOW = 20


class TuneConfig(BaseModel):
    """Everything that decides what a tuning run computes (saved as the run's ``config.json``)."""

    datasets: list[str]
    evaluate: list[str] = Field(default_factory=list)
    base: str = "qwen2.5-coder-0.5b"
    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    targets: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGETS))
    top_layers: int = 0  # adapt only the top N decoder blocks (0: all)
    adapt: str = "all"  # "question": the adapter reads from the question on (ADAPT_MODES)
    lr: float = 5e-5
    warmup: float = 0.06
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    epochs: int = 1
    batch: int = 8
    micro_batch: int = 0  # 0: 1 on the CPU, 8 on CUDA
    dtype: str = "auto"  # the base's weights (DTYPES): "auto" is bfloat16 on CUDA, float32 on the CPU
    max_questions: int | None = None
    max_tokens: int = 768
    val_fraction: float = 0.1
    val_questions: int = 48
    eval_every: int = 25
    same_source: dict[str, str] = Field(default_factory=dict)
    template: str = TEMPLATE
    seed: int = 0

    def check(self) -> None:
        if not self.datasets:
            raise ConfigurationError("train-reader needs at least one dataset")
        for name, value in (("rank", self.rank), ("batch", self.batch), ("epochs", self.epochs)):
            if value < 1:
                raise ConfigurationError(f"{name} must be >= 1, got {value}")
        if not 0 < self.lr < 1:
            raise ConfigurationError(f"lr must be in (0, 1), got {self.lr}")
        if not 0 <= self.warmup < 1:
            raise ConfigurationError(f"warmup is a share of the updates in [0, 1), got {self.warmup}")
        if self.max_tokens < 64:
            raise ConfigurationError(f"max_tokens must be at least 64, got {self.max_tokens}")
        if self.adapt not in ADAPT_MODES:
            raise ConfigurationError(f"adapt must be one of {', '.join(ADAPT_MODES)}, got {self.adapt!r}")
        if self.dtype not in DTYPES:
            raise ConfigurationError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.eval_every < 1:
            raise ConfigurationError(f"eval_every must be >= 1, got {self.eval_every}")


class TuneReport(BaseModel):
    """What a finished run wrote and how its reader did (first and last point of the curve)."""

    out: Path
    updates: int
    examples_seen: int
    seconds: float
    #: updates not applied because their loss or gradient was not finite
    skipped: int = 0
    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    curve: list[dict[str, Any]]
    counts: dict[str, dict[str, int]]


def _schedule(update: int, total: int, warmup: float) -> float:
    """The learning rate's factor at ``update`` (0-based): linear warm-up, then a cosine to zero."""
    n_warm = max(1, round(warmup * total)) if warmup > 0 else 0
    if update < n_warm:
        return (update + 1) / n_warm
    span = max(1, total - n_warm)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (update - n_warm) / span)))


def _bce(margin: Any, label: Any) -> Any:
    """Logistic loss of the margin (log P(No) - log P(Yes)) against label 1 = out of scope (No)."""
    torch = _torch()
    return torch.nn.functional.softplus(torch.where(label > 0, -margin, margin))


def _metrics(margins: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    pred = margins > 0
    loss = np.logaddexp(0.0, np.where(labels > 0, -margins, margins)).mean()
    inside = labels == 0
    return {
        "n": float(len(labels)),
        "loss": float(loss),
        "auroc": float(auroc(margins, labels)) if 0 < labels.sum() < len(labels) else float("nan"),
        "accuracy": float((pred == (labels > 0)).mean()),
        "false_refusal_rate": float(pred[inside].mean()) if inside.any() else float("nan"),
        "oos_recall": float(pred[~inside].mean()) if (~inside).any() else float("nan"),
    }


class DocumentStates:
    """The bare base's keys and values after each prompt's instruction and document, for a
    question-side adapter (``adapt="question"``): read once, kept within ``limit_mb`` (least
    recently used out; a document dropped is read again when next needed, with the same result).
    They are the base model's, whatever the adapter, so runs on the same base may share one
    (as the benchmarks' folds do)."""

    def __init__(self, limit_mb: float = 4096) -> None:
        self.limit = int(limit_mb * 2**20)
        self.bytes = 0
        self._states: OrderedDict[tuple[str, tuple[int, ...]], Any] = OrderedDict()

    def get(self, base: str, ids: tuple[int, ...], read: Any) -> Any:
        key = (base, ids)
        state = self._states.get(key)
        if state is not None:
            self._states.move_to_end(key)
            return state
        state = read(ids)
        self._states[key] = state
        self.bytes += _nbytes(state)
        while self.bytes > self.limit and len(self._states) > 1:
            _, old = self._states.popitem(last=False)
            self.bytes -= _nbytes(old)
        return state


def _nbytes(state: Sequence[tuple[Any, Any]]) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in state)


class _Run:
    """One tuning run's state between updates (see the module docstring)."""

    def __init__(
        self,
        config: TuneConfig,
        out: Path,
        examples: ExampleSet,
        reader: TunableReader,
        *,
        documents: DocumentStates | None = None,
    ) -> None:
        self.config, self.out, self.examples, self.reader = config, out, examples, reader
        torch = _torch()
        self.micro = config.micro_batch or (8 if reader.device.startswith("cuda") else 1)
        self.per_epoch = max(1, len(examples.train) // config.batch)
        self.total = self.per_epoch * config.epochs
        self.optimizer = torch.optim.AdamW(reader.trainable(), lr=config.lr, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda u: _schedule(u, self.total, config.warmup)
        )
        self.update = 0
        self.curve: list[dict[str, Any]] = []
        self.train_log: list[dict[str, Any]] = []
        self.seconds = 0.0
        self.ids: dict[str, list[int]] = {}
        self.splits: dict[str, int] = {}  # tokens the bare base reads (adapt="question")
        self.lower: dict[str, Any] = {}  # the frozen blocks' output per prompt, read once
        self.documents = documents or DocumentStates()

    def prefix(self, ids: tuple[int, ...]) -> Any:
        """The bare base's state after ``ids`` (the instruction and a document; read once)."""
        return self.documents.get(self.config.base, ids, self.reader.prefix_state)

    def margins(self, chunk: Sequence[Example]) -> Any:
        """The margins of ``chunk`` (with gradients where enabled): through the kept output of the
        frozen lower blocks where the adapter starts above them, else a whole forward pass."""
        reader = self.reader
        if reader.adapt == "question":
            torch = _torch()
            values = []
            for e in chunk:
                ids, split = self.ids[e.qid], self.splits[e.qid]
                values.append(reader.suffix_margin(self.prefix(tuple(ids[:split])), ids[split:]))
            return torch.stack(values)
        if reader.split and len(chunk) == 1:
            e = chunk[0]
            if e.qid not in self.lower:
                self.lower[e.qid] = reader.lower(self.ids[e.qid])
            return reader.upper_margin(self.lower[e.qid])[None]
        return reader.margins([self.ids[e.qid] for e in chunk])

    def read(self, examples: Sequence[Example]) -> np.ndarray:
        """The margins of ``examples``, no gradients, in evaluation mode."""
        torch = _torch()
        model = self.reader.model
        was_training = model.training
        model.eval()
        got: dict[int, float] = {}
        try:
            with torch.no_grad():
                order = sorted(range(len(examples)), key=lambda i: len(self.ids[examples[i].qid]))
                for start in range(0, len(order), self.micro):
                    chunk = order[start : start + self.micro]
                    values = self.margins([examples[i] for i in chunk]).float().cpu().tolist()
                    got.update(zip(chunk, values, strict=True))
        finally:
            model.train(was_training)
        return np.asarray([got[i] for i in range(len(examples))], dtype=np.float64)

    # -- checkpoint ---------------------------------------------------------------------------
    def save(self) -> None:
        torch = _torch()
        folder = self.out / CHECKPOINT
        folder.mkdir(parents=True, exist_ok=True)
        state = {
            "update": self.update,
            "lora": self.reader.lora_state(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "curve": self.curve,
            "train_log": self.train_log,
            "seconds": self.seconds,
        }
        tmp = folder / "state.pt.tmp"
        torch.save(state, tmp)
        os.replace(tmp, folder / "state.pt")
        atomic_write_json(self.out / CURVE_FILE, {"validation": self.curve, "train": self.train_log})
        logger.info("checkpoint at update %d of %d", self.update, self.total)

    def load(self) -> bool:
        torch = _torch()
        path = self.out / CHECKPOINT / "state.pt"
        if not path.is_file():
            return False
        state = torch.load(path, map_location="cpu", weights_only=False)
        self.reader.load_lora_state(state["lora"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self.update = int(state["update"])
        self.curve = list(state["curve"])
        self.train_log = list(state["train_log"])
        self.seconds = float(state["seconds"])
        logger.info("resuming %s at update %d of %d", self.out, self.update, self.total)
        return True

    # -- steps --------------------------------------------------------------------------------
    def order(self, epoch: int) -> list[Example]:
        rng = np.random.default_rng([self.config.seed, 7919, epoch])
        train = self.examples.train
        return [train[int(i)] for i in rng.permutation(len(train))]

    def evaluate(self) -> dict[str, Any]:
        row: dict[str, Any] = {"update": self.update, "examples_seen": self.update * self.config.batch}
        for kind, sets in (
            ("validation", self.examples.validation),
            ("evaluation", self.examples.evaluation),
        ):
            for name, items in sets.items():
                if not items:
                    continue
                margins = self.read(items)
                labels = np.array([e.label for e in items])
                row[f"{kind}:{name}"] = _metrics(margins, labels)
        val = [v for k, v in row.items() if k.startswith("validation:")]
        if val:
            row["validation_loss"] = float(np.mean([v["loss"] for v in val]))
            row["validation_worst_auroc"] = float(np.nanmin([v["auroc"] for v in val]))
        self.curve.append(row)
        logger.info(
            "update %d: validation loss %.4f, worst AUROC %.3f",
            self.update,
            row.get("validation_loss", float("nan")),
            row.get("validation_worst_auroc", float("nan")),
        )
        return row

    def step(self, batch: list[Example]) -> dict[str, Any]:
        torch = _torch()
        self.reader.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for start in range(0, len(batch), self.micro):
            chunk = batch[start : start + self.micro]
            margins = self.margins(chunk)
            labels = torch.tensor([e.label for e in chunk], device=margins.device)
            weights = torch.tensor([e.weight for e in chunk], device=margins.device, dtype=margins.dtype)
            loss = (weights * _bce(margins, labels)).sum() / len(batch)
            loss.backward()
            total += float(loss.detach())
        norm = torch.nn.utils.clip_grad_norm_(self.reader.trainable(), self.config.max_grad_norm)
        lr = self.optimizer.param_groups[0]["lr"]
        finite = math.isfinite(total) and bool(torch.isfinite(norm))
        if finite:
            self.optimizer.step()
            self.scheduler.step()
        else:  # one NaN step would make every weight NaN: leave the adapter as it was
            self.optimizer.zero_grad(set_to_none=True)
            with warnings.catch_warnings():  # the schedule moves on with the batches all the same
                warnings.simplefilter("ignore", UserWarning)
                self.scheduler.step()
        self.update += 1
        row = {"update": self.update, "loss": total, "grad_norm": float(norm), "lr": float(lr)}
        if not finite:
            row["skipped"] = True
            logger.warning("update %d: non-finite loss or gradient, not applied", self.update)
        self.train_log.append(row)
        self._check_divergence()
        return row

    def _check_divergence(self) -> None:
        """A run whose updates keep coming out non-finite learns nothing: stop it with the numbers."""
        recent = self.train_log[-_DIVERGED_WINDOW:]
        bad = sum(1 for r in recent if r.get("skipped"))
        if len(recent) == _DIVERGED_WINDOW and bad > _DIVERGED_WINDOW // 2:
            raise ModelError(
                f"training diverged: {bad} of the last {len(recent)} updates had a non-finite loss or "
                f"gradient (update {self.update}, lr {self.config.lr:g}); lower lr, or set dtype=float32"
            )


def train_reader(
    config: TuneConfig,
    out: str | os.PathLike[str],
    *,
    resume: bool = False,
    checkpoint_minutes: float = 5.0,
    stop_after: int | None = None,
    device: str | None = None,
    threads: int | None = None,
    progress: bool | None = None,
    prefix_cache_mb: float = 4096,
    documents: DocumentStates | None = None,
) -> TuneReport | None:
    """Tune a reader (see the module docstring); the report, or ``None`` when ``stop_after``
    updates ended the run early (its checkpoint kept, for ``resume=True``). ``prefix_cache_mb``:
    the memory kept for the documents' states with ``adapt="question"`` (a document not kept is
    read again when next needed; the result is the same); ``documents``: a :class:`DocumentStates`
    to keep them in instead (shared by runs on the same base)."""
    config.check()
    torch = _torch()
    if threads:
        torch.set_num_threads(threads)
    root = Path(out)
    folder = RunFolder(root, TuneConfig)
    if (root / CHECKPOINT / "state.pt").is_file() and not resume:
        raise ConfigurationError(
            f"{root} holds a started run: pass --resume to continue it, or use a new --out"
        )
    folder.open(config)
    reader, base_name, _ = load_tunable(
        config.base,
        rank=config.rank,
        alpha=config.alpha,
        dropout=config.dropout,
        targets=config.targets,
        template=config.template,
        top_layers=config.top_layers,
        adapt=config.adapt,
        device=device,
        dtype=config.dtype,
        seed=config.seed,
    )
    cache: dict[tuple[str, str], tuple[list[int], int]] = {}

    def count(question: str, passage: str) -> int:
        key = (question, passage)
        if key not in cache:
            cache[key] = reader.prompt(question, passage)
        return len(cache[key][0])

    examples = build_examples(
        config.datasets,
        count_tokens=count,
        evaluate=config.evaluate,
        max_questions=config.max_questions,
        max_tokens=config.max_tokens,
        val_fraction=config.val_fraction,
        val_questions=config.val_questions,
        same_source=config.same_source,
        seed=config.seed,
    )
    run = _Run(config, root, examples, reader, documents=documents or DocumentStates(prefix_cache_mb))
    for items in (examples.train, *examples.validation.values(), *examples.evaluation.values()):
        for e in items:
            run.ids[e.qid], run.splits[e.qid] = cache[(e.question, e.passage)]
    started = time.strftime("%Y-%m-%d")
    if not (resume and run.load()):
        run.evaluate()
    last_save = time.monotonic()
    bar = progress_meter(total=run.total, initial=run.update, desc="train-reader", enabled=progress)
    recent: list[float] = []
    t0 = time.monotonic()
    done_here = 0
    try:
        while run.update < run.total:
            epoch, within = divmod(run.update, run.per_epoch)
            order = run.order(epoch)
            batch = order[within * config.batch : (within + 1) * config.batch]
            t = time.monotonic()
            row = run.step(batch)
            run.seconds += time.monotonic() - t
            done_here += 1
            recent = [*recent[-19:], row["loss"]]
            bar.update(1)
            bar.set_postfix_str(f"loss {np.mean(recent):.4f} |g| {row['grad_norm']:.2f} lr {row['lr']:.1e}")
            if run.update % config.eval_every == 0 or run.update == run.total:
                run.evaluate()
            if not show_progress(progress) and run.update % 10 == 0:
                rate = (time.monotonic() - t0) / done_here
                logger.info(
                    "update %d/%d: loss (last 20) %.4f, grad norm %.2f, %.1f s an update, ETA %.0f min",
                    run.update,
                    run.total,
                    np.mean(recent),
                    row["grad_norm"],
                    rate,
                    rate * (run.total - run.update) / 60,
                )
            if time.monotonic() - last_save >= checkpoint_minutes * 60 or run.update == run.total:
                run.save()
                last_save = time.monotonic()
            if stop_after is not None and done_here >= stop_after and run.update < run.total:
                run.save()
                return None
    finally:
        bar.close()
    return _finish(config, run, root, base_name, started, device=reader.device)


def _finish(
    config: TuneConfig, run: _Run, root: Path, base_name: str, started: str, *, device: str
) -> TuneReport:
    from scopeguard.detection.tune.export import gguf_base_info, write_gguf_adapter, write_reader_json
    from scopeguard.models import available_ggufs, local_gguf

    reader = run.reader
    reader.model.save_pretrained(str(root / PEFT_DIR))
    gguf_written = False
    if base_name in available_ggufs() or base_name.endswith(".gguf"):
        info = gguf_base_info(local_gguf(base_name))
        peft_config = reader.model.peft_config["default"]
        write_gguf_adapter(
            reader.lora_state(),
            root / GGUF_ADAPTER,
            architecture=info["architecture"],
            alpha=float(peft_config.lora_alpha),
            n_head=info["n_head"],
            n_head_kv=info["n_head_kv"],
        )
        gguf_written = True
    peft_config = reader.model.peft_config["default"]
    first, last = run.curve[0], run.curve[-1]
    keep = [k for k in last if ":" in k]
    report = TuneReport(
        out=root,
        updates=run.update,
        examples_seen=run.update * config.batch,
        seconds=run.seconds,
        skipped=sum(1 for row in run.train_log if row.get("skipped")),
        before={k: first[k] for k in keep if k in first},
        after={k: last[k] for k in keep},
        curve=run.curve,
        counts=run.examples.counts(),
    )
    where = machine(device)
    write_reader_json(
        root,
        base=base_name,
        rank=int(peft_config.r),
        alpha=float(peft_config.lora_alpha),
        targets=sorted(peft_config.target_modules),
        template=config.template,
        gguf=gguf_written,
        machine=where,
        trained=started,
        updates=run.update,
        adapt=reader.adapt,
    )
    (root / "card.md").write_text(render_card(config, report, where, started), encoding="utf-8")
    atomic_write_json(root / CURVE_FILE, {"validation": run.curve, "train": run.train_log})
    return report
