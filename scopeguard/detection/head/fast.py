"""The ``fast`` detector's head: a logistic regression on the fast read's two features.

P(out of scope) = sigmoid(w . (x - mean) / scale + b) on standardised ``coverage`` and
``alignment`` (:mod:`scopeguard.detection.read.fast`); the packaged head is
``scopeguard/_assets/fast_head.json``, fitted by ``scopeguard train-detector --detector fast``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from scopeguard.detection.head.calibration import load_head_file, write_head_file
from scopeguard.detection.read.fast import FEATURES
from scopeguard.errors import ModelError

__all__ = ["HEAD_FILE", "FastHead", "default_head_path"]

HEAD_FILE = "fast_head.json"


def default_head_path() -> Path:
    """The head shipped in the package (``scopeguard/_assets/fast_head.json``)."""
    return Path(str(resources.files("scopeguard") / "_assets" / HEAD_FILE))


@dataclass(frozen=True)
class FastHead:
    """A logistic regression on standardised features: P(oos) = sigmoid(w . (x - mean) / scale + b)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float = 0.5
    encoder: str = "minilm"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.features)
        if not n or any(len(v) != n for v in (self.mean, self.scale, self.coef)):
            raise ModelError("fast head: features, mean, scale and coef must have the same non-zero length")
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ModelError(f"fast head: unknown feature(s) {unknown}; valid: {', '.join(FEATURES)}")
        if any(s <= 0 for s in self.scale):
            raise ModelError("fast head: scale values must be positive")

    def predict(self, values: dict[str, float]) -> float:
        z = self.intercept + sum(
            c * (values[f] - m) / s
            for f, m, s, c in zip(self.features, self.mean, self.scale, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    @classmethod
    def load(cls, path: str | Path) -> FastHead:
        """Read a head from a JSON file, or from ``fast_head.json`` inside a folder."""
        return load_head_file(path, HEAD_FILE, "fast head", cls._from_dict)

    @classmethod
    def _from_dict(cls, raw: dict[str, Any]) -> FastHead:
        return cls(
            features=tuple(raw["features"]),
            mean=tuple(float(v) for v in raw["mean"]),
            scale=tuple(float(v) for v in raw["scale"]),
            coef=tuple(float(v) for v in raw["coef"]),
            intercept=float(raw["intercept"]),
            threshold=float(raw.get("threshold", 0.5)),
            encoder=str(raw.get("encoder", "minilm")),
            info=dict(raw.get("info", {})),
        )

    def save(self, path: str | Path) -> Path:
        body = {
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "threshold": self.threshold,
            "encoder": self.encoder,
            "info": self.info,
        }
        return write_head_file(path, HEAD_FILE, body)
