"""Detectors looked up by name.

Entries are lazy (``"module:factory"``) so that asking for ``fast`` never imports torch
transformers for ``probe``. ``get_detector(name, **kwargs)`` builds one; an unknown name
raises :class:`~scopeguard.errors.ConfigurationError` listing the valid names.
``get_detector(name, calibration=DIR)`` labels its verdicts by a calibration profile
(:mod:`scopeguard.detection.profile`).

A detector that reads with a model (``default``, ``logprob``) says so in its entry
(``register_detector(name, factory, reader=True)``): it takes its reading model as ``reader=``
(a spec such as ``"local"``, ``"local:FOLDER"``, ``"transformers:NAME"``, ``"openai:MODEL"``, or a
verdict scorer), and every caller (``Guard``, ``check``, ``eval-detector``, ``calibrate``,
``serve``, ``doctor``) asks :func:`detector_reads` instead of knowing the names. ``reader=`` to a
detector whose entry does not read raises :class:`~scopeguard.errors.ConfigurationError`. An
``llm`` is never a reading model: it answers, or judges for the ``judge`` detector.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError

if TYPE_CHECKING:
    from scopeguard.detection.profile import CalibrationProfile

__all__ = [
    "DetectorEntry",
    "available_detectors",
    "detector_options",
    "detector_reads",
    "detector_takes",
    "get_detector",
    "register_detector",
    "renamed_options",
]

Factory = Callable[..., Detector]


@dataclass(frozen=True)
class DetectorEntry:
    """A registered detector: its factory (or a lazy ``"module:attr"`` path) and whether it reads
    with a model, which it then takes as ``reader=``."""

    factory: str | Factory
    reader: bool = False


_PACKAGE = "scopeguard.detection.detectors"
# a bare factory (as a test may set one) is an entry that takes no reader
_DETECTORS: dict[str, DetectorEntry | str | Factory] = {
    "judge": DetectorEntry(f"{_PACKAGE}.judge:JudgeDetector"),
    "lexical": DetectorEntry(f"{_PACKAGE}.lexical:LexicalDetector"),
    "fast": DetectorEntry(f"{_PACKAGE}.fast:FastDetector"),
    "default": DetectorEntry(f"{_PACKAGE}.default:DefaultDetector", reader=True),
    "logprob": DetectorEntry(f"{_PACKAGE}.logprob:LogProbDetector", reader=True),
    "cascade": DetectorEntry(f"{_PACKAGE}.cascade:CascadeDetector"),
    "nli": DetectorEntry(f"{_PACKAGE}.nli:NLIDetector"),
    "probe": DetectorEntry(f"{_PACKAGE}.probe:ProbeDetector"),
}


def register_detector(name: str, factory: str | Factory, *, reader: bool = False) -> None:
    """Register a detector factory (or a lazy ``"module:attr"`` path) under ``name``; ``reader``:
    it reads with a model, which it takes as ``reader=`` (see the module docstring)."""
    if not name:
        raise ConfigurationError("detector name must not be empty")
    _DETECTORS[name] = DetectorEntry(factory, reader=reader)


def available_detectors() -> list[str]:
    return sorted(_DETECTORS)


def _entry(name: str) -> DetectorEntry:
    try:
        entry = _DETECTORS[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown detector {name!r}; valid names: {', '.join(available_detectors())}"
        ) from None
    return entry if isinstance(entry, DetectorEntry) else DetectorEntry(entry)


def detector_reads(name: str) -> bool:
    """Whether the detector registered as ``name`` reads with a model (its entry says so): it takes
    that model as ``reader=``. An unknown name raises :class:`~scopeguard.errors.ConfigurationError`."""
    return _entry(name).reader


def _readers() -> str:
    return ", ".join(n for n in available_detectors() if detector_reads(n)) or "none"


def renamed_options(detector: str, given: Mapping[str, Any], renamed: Mapping[str, str]) -> None:
    """Raise :class:`~scopeguard.errors.ConfigurationError` for the first of ``given`` (options a
    detector's constructor caught with ``**``): one of ``renamed`` names its new name, any other
    is an option the detector does not take. Nothing given: nothing raised."""
    for option in given:
        if option in renamed:
            raise ConfigurationError(
                f"detector {detector!r} takes {renamed[option]}=, not {option}= (renamed in 0.1.0: "
                "every detector that reads takes its reading model as reader=)"
            )
        raise ConfigurationError(f"detector {detector!r} does not take the option {option!r}")


def _factory(name: str) -> Factory:
    factory = _entry(name).factory
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory  # type: ignore[return-value]


def detector_takes(name: str, option: str) -> bool:
    """Whether the detector registered as ``name`` names ``option`` among its arguments.

    A catch-all ``**kwargs`` does not count: the guard passes its ``llm`` only to detectors that
    declare one (``judge``), never to one that would reject or misuse it. Whether a detector takes
    a reading model is its entry's to say: :func:`detector_reads`.
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

    ``reader``: the reading model of a detector whose entry reads (:func:`detector_reads`); to any
    other, a :class:`~scopeguard.errors.ConfigurationError` naming those that take one.
    """
    if not isinstance(name, str):
        if kwargs:
            raise ConfigurationError(
                f"options ({', '.join(kwargs)}) apply to a detector built by name, not to the "
                f"{type(name).__name__} given"
            )
        return _calibrated(name, calibration)
    if "reader" in kwargs and not detector_reads(name):
        raise ConfigurationError(
            f"detector {name!r} reads with no model: it takes no reader (the detectors that do: {_readers()})"
        )
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


def detector_options(
    detector: str,
    *,
    model: object = None,
    llm: str | None = None,
    reader: str | None = None,
    read: str | None = None,
) -> dict[str, Any]:
    """The options that --model, --llm, --reader and --read (the commands' and ``serve``'s) give
    ``detector``: --reader goes to the registry, which refuses it for a detector that does not read;
    --read only to a detector that takes it (default); --llm only to a detector that takes an LLM
    (judge), and to one that reads it names --reader, the reading model's option."""
    options: dict[str, Any] = {} if model is None else {"model": model}
    if reader is not None:
        options["reader"] = reader
    if read is not None:
        if not detector_takes(detector, "read"):
            raise ConfigurationError(f"--read applies to the default detector, not to {detector!r}")
        options["read"] = read
    if llm is not None:
        if detector_takes(detector, "llm"):
            options["llm"] = llm
        elif detector_reads(detector):
            raise ConfigurationError(
                f"--llm is the judge's LLM: detector {detector!r} takes its reading model as --reader SPEC"
            )
        else:
            raise ConfigurationError(f"--llm does not apply to --detector {detector} (the judge takes it)")
    return options
