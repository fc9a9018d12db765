"""Out-of-scope detectors: protocol, registry and the shipped methods."""

from scopeguard.detection.detectors.base import BaseDetector, Detector, Prereader
from scopeguard.detection.detectors.registry import (
    available_detectors,
    detector_reads,
    detector_takes,
    get_detector,
    register_detector,
)

__all__ = [
    "BaseDetector",
    "Detector",
    "Prereader",
    "available_detectors",
    "detector_reads",
    "detector_takes",
    "get_detector",
    "register_detector",
]
