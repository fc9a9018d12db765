"""The trainable classification head shared by the learned detectors (``nli`` and ``probe``).

A two-layer MLP (``in -> 128 -> 1``, ReLU, dropout 0.1 after the first layer) on standardised
features, trained in float32 with ``BCEWithLogitsLoss`` (one sigmoid, at inference), Adam
(lr 1e-4), batch 8, 10 epochs, keeping the best validation checkpoint: the settings of ELOQ
(SIGIR 2025) appendix C, without the reference code's double sigmoid and bf16 classifier.

The head predicts P(out of scope). A head folder holds ``head.safetensors`` (the MLP weights and
the standardisation statistics) and ``head.json`` (a :class:`HeadConfig`: the feature
extractor's identity, the training settings and the training metrics). A missing, corrupt or
mismatched file raises :class:`~scopeguard.errors.ModelError` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scopeguard import _progress
from scopeguard._optional import require
from scopeguard.data import atomic_open, atomic_write_text
from scopeguard.errors import ConfigurationError, ModelError

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "HeadConfig",
    "Standardizer",
    "TrainSettings",
    "TrainedHead",
    "train_head",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "head.json"
WEIGHTS_FILE = "head.safetensors"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class TrainSettings:
    """Training settings; the defaults are the paper's (ELOQ appendix C) except ``standardize``:
    scopeguard standardises the features (per-feature mean and std of the training split), the
    paper feeds them raw. :meth:`paper` is the paper's settings exactly."""

    epochs: int = 10
    lr: float = 1e-4
    batch_size: int = 8
    hidden: int = 128
    dropout: float = 0.1
    weight_decay: float = 0.0
    seed: int = 0
    standardize: bool = True

    @classmethod
    def paper(cls, **overrides: Any) -> TrainSettings:
        """ELOQ appendix C: 2-layer MLP, dropout 0.1, Adam 1e-4, batch 8, 10 epochs, raw features."""
        return cls(**{"standardize": False, **overrides})

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1 or self.hidden < 1:
            raise ConfigurationError("epochs, batch_size and hidden must be positive integers")
        if self.lr <= 0 or not 0.0 <= self.dropout < 1.0 or self.weight_decay < 0:
            raise ConfigurationError("lr must be > 0, dropout in [0, 1), weight_decay >= 0")


class HeadConfig(BaseModel):
    """What ``head.json`` holds: enough to rebuild the feature extractor and the MLP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    detector: str
    features: dict[str, Any]
    input_dim: int
    hidden: int
    dropout: float
    threshold: float = 0.5
    positive_label: str = "out_of_scope"
    training: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, float] = Field(default_factory=dict)


@dataclass(frozen=True)
class Standardizer:
    """Per-feature mean and standard deviation, fitted on the training split only."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> Standardizer:
        x = np.asarray(x, dtype=np.float64)
        std = x.std(axis=0)
        std = np.where(std < 1e-6, 1.0, std)
        return cls(mean=x.mean(axis=0).astype(np.float32), std=std.astype(np.float32))

    @classmethod
    def identity(cls, dim: int) -> Standardizer:
        """Leaves features as they are (``TrainSettings(standardize=False)``)."""
        return cls(mean=np.zeros(dim, dtype=np.float32), std=np.ones(dim, dtype=np.float32))

    def transform(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x, dtype=np.float32) - self.mean) / self.std).astype(np.float32)


def _torch() -> Any:
    return require("torch", extra="probe", feature="training and running a learned detector head")


def _build_mlp(input_dim: int, hidden: int, dropout: float) -> Any:
    nn = _torch().nn
    return nn.Sequential(nn.Linear(input_dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 1))


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """A head this small trains fastest on one thread (several only contend on a busy machine)."""
    torch = _torch()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _seed_everything(seed: int) -> Any:
    torch = _torch()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


class TrainedHead:
    """A fitted MLP with its standardiser and config; ``predict_proba`` gives P(out of scope)."""

    def __init__(self, mlp: Any, standardizer: Standardizer, config: HeadConfig) -> None:
        self.mlp = mlp.eval()
        self.standardizer = standardizer
        self.config = config

    @property
    def threshold(self) -> float:
        return self.config.threshold

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        torch = _torch()
        x = np.atleast_2d(np.asarray(features, dtype=np.float32))
        if x.shape[1] != self.config.input_dim:
            raise ModelError(
                f"feature size {x.shape[1]} does not match the head's input size {self.config.input_dim}"
            )
        with torch.no_grad(), _one_thread():
            logits = self.mlp(torch.from_numpy(self.standardizer.transform(x))).squeeze(-1)
            return np.asarray(torch.sigmoid(logits).numpy(), dtype=np.float64).reshape(-1)

    def with_updates(self, **updates: Any) -> TrainedHead:
        return TrainedHead(self.mlp, self.standardizer, self.config.model_copy(update=updates))

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write ``head.safetensors`` and ``head.json`` into ``directory`` (created if needed)."""
        to_bytes = require("safetensors.torch", extra="probe", feature="saving a head").save
        torch = _torch()
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {
            f"mlp.{k}": v.detach().to(torch.float32).contiguous() for k, v in self.mlp.state_dict().items()
        }
        tensors["standardizer.mean"] = torch.from_numpy(self.standardizer.mean.copy())
        tensors["standardizer.std"] = torch.from_numpy(self.standardizer.std.copy())
        with atomic_open(out / WEIGHTS_FILE, "wb") as fh:
            fh.write(to_bytes(tensors))
        atomic_write_text(out / CONFIG_FILE, self.config.model_dump_json(indent=2))
        return out

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, detector: str | None = None) -> TrainedHead:
        """Load a head folder; raises :class:`ModelError` naming the missing or corrupt file."""
        root = Path(directory)
        cfg_path, weights_path = root / CONFIG_FILE, root / WEIGHTS_FILE
        if not root.is_dir():
            raise ModelError(f"head folder not found: {root}")
        for p in (cfg_path, weights_path):
            if not p.is_file():
                raise ModelError(f"head file missing: {p}")
        try:
            config = HeadConfig.model_validate(json.loads(cfg_path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, UnicodeDecodeError, ValidationError) as exc:
            raise ModelError(f"corrupt head config {cfg_path}: {str(exc).splitlines()[0]}") from None
        if config.format_version != FORMAT_VERSION:
            raise ModelError(f"{cfg_path}: unsupported head format version {config.format_version}")
        if detector is not None and config.detector != detector:
            raise ModelError(
                f"{cfg_path}: this head was trained for detector {config.detector!r}, not {detector!r}"
            )
        load_file = require("safetensors.torch", extra="probe", feature="loading a head").load_file
        try:
            tensors = load_file(str(weights_path))
            mlp = _build_mlp(config.input_dim, config.hidden, config.dropout)
            mlp.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("mlp.")}, strict=True)
            std = Standardizer(
                mean=tensors["standardizer.mean"].numpy().astype(np.float32),
                std=tensors["standardizer.std"].numpy().astype(np.float32),
            )
        except Exception as exc:  # safetensors, torch and KeyError all signal a bad file
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ModelError(f"corrupt or mismatched head weights {weights_path}: {msg}") from None
        if std.mean.shape != (config.input_dim,) or std.std.shape != (config.input_dim,):
            raise ModelError(
                f"{weights_path}: standardisation stats do not match input_dim {config.input_dim}"
            )
        return cls(mlp, std, config)


def _evaluate(mlp: Any, x: Any, y: Any, loss_fn: Any) -> tuple[float, float]:
    torch = _torch()
    mlp.eval()
    with torch.no_grad():
        logits = mlp(x).squeeze(-1)
        loss = float(loss_fn(logits, y))
        acc = float(((logits > 0).float() == y).float().mean())
    return loss, acc


@_one_thread()
def train_head(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_val: np.ndarray | None,
    y_val: np.ndarray | None,
    *,
    detector: str,
    features: dict[str, Any],
    settings: TrainSettings | None = None,
    progress: bool | None = None,
) -> TrainedHead:
    """Fit the MLP on ``x_train`` (labels 1 = out of scope) and keep the best validation epoch
    (on one thread, as :func:`_one_thread` says).

    Best = highest validation accuracy, ties broken by lower validation loss. Without a
    validation split the last epoch is kept.
    """
    torch = _torch()
    from tqdm.auto import tqdm

    s = settings or TrainSettings()
    x_train = np.asarray(x_train, dtype=np.float32)
    y_train = np.asarray(y_train, dtype=np.float32).reshape(-1)
    if x_train.ndim != 2 or len(x_train) != len(y_train) or len(x_train) == 0:
        raise ConfigurationError(f"bad training data: features {x_train.shape}, labels {y_train.shape}")
    if not np.isin(y_train, (0.0, 1.0)).all():
        raise ConfigurationError("training labels must be 0 (in scope) or 1 (out of scope)")
    has_val = x_val is not None and y_val is not None and len(x_val) > 0
    generator = _seed_everything(s.seed)
    standardizer = Standardizer.fit(x_train) if s.standardize else Standardizer.identity(x_train.shape[1])
    xt = torch.from_numpy(standardizer.transform(x_train))
    yt = torch.from_numpy(y_train)
    if has_val:
        xv = torch.from_numpy(standardizer.transform(np.asarray(x_val, dtype=np.float32)))
        yv = torch.from_numpy(np.asarray(y_val, dtype=np.float32).reshape(-1))
    mlp = _build_mlp(x_train.shape[1], s.hidden, s.dropout).to(torch.float32)
    opt = torch.optim.Adam(mlp.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    best: tuple[float, float] | None = None
    best_state: dict[str, Any] = {}
    best_epoch = s.epochs
    metrics: dict[str, float] = {}
    show = _progress.show_progress(progress)
    for epoch in tqdm(range(1, s.epochs + 1), desc=f"train {detector} head", disable=not show, leave=False):
        mlp.train()
        order = torch.randperm(len(xt), generator=generator)
        for start in range(0, len(order), s.batch_size):
            idx = order[start : start + s.batch_size]
            opt.zero_grad()
            loss = loss_fn(mlp(xt[idx]).squeeze(-1), yt[idx])
            loss.backward()
            opt.step()
        if has_val:
            v_loss, v_acc = _evaluate(mlp, xv, yv, loss_fn)
            if best is None or (v_acc, -v_loss) > best:
                best = (v_acc, -v_loss)
                best_state = {k: v.clone() for k, v in mlp.state_dict().items()}
                best_epoch = epoch
    if has_val:
        mlp.load_state_dict(best_state)
        metrics["val_loss"], metrics["val_accuracy"] = _evaluate(mlp, xv, yv, loss_fn)
        metrics["n_val"] = float(len(xv))
    metrics["train_loss"], metrics["train_accuracy"] = _evaluate(mlp, xt, yt, loss_fn)
    metrics["n_train"] = float(len(xt))
    metrics["best_epoch"] = float(best_epoch)
    logger.info("trained %s head: %s", detector, metrics)
    config = HeadConfig(
        detector=detector,
        features=features,
        input_dim=int(x_train.shape[1]),
        hidden=s.hidden,
        dropout=s.dropout,
        training=asdict(s),
        metrics=metrics,
    )
    return TrainedHead(mlp, standardizer, config)
