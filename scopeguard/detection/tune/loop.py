"""One tuning run's state between updates: the schedule, the loss, the validation points, the
checkpoint, and the documents' kept states for a question-side adapter (see
:mod:`scopeguard.detection.tune.train`)."""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard.data import atomic_write_json
from scopeguard.detection.head.calibration import auroc
from scopeguard.detection.tune.card import CURVE_FILE
from scopeguard.detection.tune.config import TuneConfig
from scopeguard.detection.tune.examples import Example, ExampleSet
from scopeguard.detection.tune.model import TunableReader, _torch
from scopeguard.errors import ModelError

__all__ = ["CHECKPOINT", "DocumentStates", "TuneRun", "margin_metrics"]

logger = logging.getLogger(__name__)

CHECKPOINT = "checkpoint"
#: a run stops as diverged when more than half of this many recent updates were non-finite
_DIVERGED_WINDOW = 20


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


def margin_metrics(margins: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Loss, AUROC, accuracy, false-refusal rate and out-of-scope recall of verdict margins
    (``> 0`` predicts out of scope) against labels (1 = out of scope); ``n`` is the count."""
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


class TuneRun:
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
                row[f"{kind}:{name}"] = margin_metrics(margins, labels)
        val = [v for k, v in row.items() if k.startswith("validation:")]
        if val:
            row["validation_loss"] = float(np.mean([v["loss"] for v in val]))
            row["validation_worst_auroc"] = float(np.nanmin([v["auroc"] for v in val]))
        self.curve.append(row)
        # the curve so far is on disk at every point (a run stopped between checkpoints still shows it)
        atomic_write_json(self.out / CURVE_FILE, {"validation": self.curve, "train": self.train_log})
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
        self.update += 1
        row = {"update": self.update, "loss": total, "grad_norm": float(norm), "lr": float(lr)}
        if math.isfinite(total) and bool(torch.isfinite(norm)):
            self.optimizer.step()
            self.scheduler.step()
        else:  # one NaN step would make every weight NaN: leave the adapter as it was
            row["skipped"] = True
            logger.warning("update %d: non-finite loss or gradient, not applied", self.update)
            self.optimizer.zero_grad(set_to_none=True)
            with warnings.catch_warnings():  # the schedule moves on with the batches all the same
                warnings.simplefilter("ignore", UserWarning)
                self.scheduler.step()
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
