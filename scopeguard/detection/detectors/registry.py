"""Detectors looked up by name.

Entries are lazy (``"module:factory"``) so that asking for ``fast`` never imports torch
transformers for ``probe``. ``get_detector(name, **kwargs)`` builds one; an unknown name
raises :class:`~scopeguard.errors.ConfigurationError` listing the valid names.
``get_detector(name, calibration=DIR)`` labels its verdicts by a calibration profile
(:mod:`scopeguard.detection.profile`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError

if TYPE_CHECKING:
    from scopeguard.detection.profile import CalibrationProfile

__all__ = ["available_detectors", "detector_takes", "get_detector", "register_detector"]

Factory = Callable[..., Detector]

_DETECTORS: dict[str, str | Factory] = {
    "judge": "scopeguard.detection.detectors.judge:JudgeDetector",
    "lexical": "scopeguard.detection.detectors.lexical:LexicalDetector",
    "fast": "scopeguard.detection.detectors.fast:FastDetector",
    "default": "scopeguard.detection.detectors.default:DefaultDetector",
    "logprob": "scopeguard.detection.detectors.logprob:LogProbDetector",
    "cascade": "scopeguard.detection.detectors.cascade:CascadeDetector",
    "nli": "scopeguard.detection.detectors.nli:NLIDetector",
    "probe": "scopeguard.detection.detectors.probe:ProbeDetector",
}


def register_detector(name: str, factory: str | Factory) -> None:
    """Register a detector factory (or a lazy ``"module:attr"`` path) under ``name``."""
    if not name:
        raise ConfigurationError("detector name must not be empty")
    _DETECTORS[name] = factory


def available_detectors() -> list[str]:
    return sorted(_DETECTORS)


def _factory(name: str) -> Factory:
    try:
        factory = _DETECTORS[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown detector {name!r}; valid names: {', '.join(available_detectors())}"
        ) from None
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory  # type: ignore[return-value]


def detector_takes(name: str, option: str) -> bool:
    """Whether the detector registered as ``name`` names ``option`` among its arguments.

    A catch-all ``**kwargs`` does not count: the guard passes its ``llm`` only to detectors that
    declare one (``judge``, ``logprob``), never to one that would reject or misuse it.
    """
    import inspect

    try:
        params = inspect.signature(_factory(name)).parameters
    except (TypeError, ValueError):
        return False
    p = params.get(option)
    return p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)


def get_detector(
    name: str | Detector,
    *,
    calibration: str | os.PathLike[str] | CalibrationProfile | None = None,
    **kwargs: Any,
) -> Detector:
    """Build the detector registered as ``name`` (a detector instance passes through).

    ``calibration``: a profile from ``scopeguard calibrate`` (its folder, its ``profile.json`` or a
    :class:`~scopeguard.detection.profile.CalibrationProfile`): the detector's verdicts are then
    labelled by the profile's threshold and hedge band
    (:class:`~scopeguard.detection.profile.CalibratedDetector`). A profile made for another
    detector raises :class:`~scopeguard.errors.ConfigurationError`.
    """
    if not isinstance(name, str):
        return _calibrated(name, calibration)
    factory = _factory(name)
    try:
        built = factory(**kwargs)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        bad = str(exc).rsplit("argument", 1)[-1].strip()
        raise ConfigurationError(f"detector {name!r} does not take the option {bad}") from None
    return _calibrated(built, calibration)


def _calibrated(detector: Detector, calibration: Any) -> Detector:
    if calibration is None:
        return detector
    from scopeguard.detection.profile import calibrated

    wrapped: Detector = calibrated(detector, calibration)
    return wrapped
