"""The ``logprob`` detector's head: Platt scaling of one verdict model's margin, and a threshold.

Fitted with document-grouped CV by ``scopeguard train-detector --detector logprob``; the packaged
head belongs to the packaged Qwen2.5-Coder-1.5B (``scopeguard/_assets/logprob_head.json``). A
model with no head of its own gets :func:`identity_head`: the uncalibrated P(No | Yes or No).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from scopeguard.detection.head.calibration import LogisticHead, load_head_file, write_head_file
from scopeguard.detection.read.reader import TEMPLATE

__all__ = ["HEAD_FILE", "LogProbHead", "default_head_path", "identity_head"]

HEAD_FILE = "logprob_head.json"


def default_head_path() -> Path:
    """The calibration shipped in the package (``scopeguard/_assets/logprob_head.json``)."""
    return Path(str(resources.files("scopeguard") / "_assets" / HEAD_FILE))


@dataclass(frozen=True)
class LogProbHead:
    """Calibration of one verdict model: Platt scaling of the margin and a threshold."""

    model: str
    calibration: LogisticHead
    threshold: float = 0.5
    template: str = TEMPLATE
    info: dict[str, Any] = field(default_factory=dict)

    def p_oos(self, margin: float) -> float:
        return float(self.calibration.predict([margin])[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "logprob",
            "model": self.model,
            "template": self.template,
            "calibration": self.calibration.to_dict(),
            "threshold": self.threshold,
            "info": self.info,
        }

    def save(self, path: str | Path) -> Path:
        return write_head_file(path, HEAD_FILE, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> LogProbHead:
        return load_head_file(path, HEAD_FILE, "log-prob head", cls._from_dict)

    @classmethod
    def _from_dict(cls, raw: dict[str, Any]) -> LogProbHead:
        return cls(
            model=str(raw["model"]),
            calibration=LogisticHead.from_dict(raw["calibration"]),
            threshold=float(raw.get("threshold", 0.5)),
            template=str(raw.get("template", TEMPLATE)),
            info=dict(raw.get("info", {})),
        )


def identity_head(model: str) -> LogProbHead:
    """No calibration: P(out of scope) = P(No | Yes or No), threshold 0.5."""
    return LogProbHead(model=model, calibration=LogisticHead(("margin",), (0.0,), (1.0,), (1.0,), 0.0))
