"""Out-of-scope detectors: protocol, registry and the shipped methods."""

from scopeguard.detectors.base import BaseDetector, Detector
from scopeguard.detectors.registry import (
    available_detectors,
    detector_takes,
    get_detector,
    register_detector,
)

__all__ = [
    "BaseDetector",
    "Detector",
    "available_detectors",
    "detector_takes",
    "get_detector",
    "register_detector",
]
