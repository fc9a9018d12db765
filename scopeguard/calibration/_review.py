"""What the review page asks of a calibration folder while a person labels its chosen questions:
the running estimate, and the profile once every question has a label."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scopeguard.calibration._config import CalibrationConfig, calibration_folder
from scopeguard.calibration._log import labelled_log
from scopeguard.errors import ConfigurationError

__all__ = ["label_estimate", "update_profile"]


def label_estimate(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The threshold the labels given so far in ``folder`` would set, and what it would refuse and
    catch (weighted as the questions were chosen), as ``{"text", "threshold", "labels"}``;
    ``None`` when no questions were chosen there."""
    given = labelled_log(folder)
    if given is None:
        return None
    answerable = sum(q.label == "in_scope" for q in given.labelled)
    n = len(given.labelled)
    try:
        point = given.point()
    except ConfigurationError:
        return {
            "text": f"{n} labelled ({answerable} answerable): too few answerable labels for a threshold yet",
            "threshold": None,
            "labels": n,
        }
    fr, caught = point.false_refusals, point.caught
    text = (
        f"threshold {point.threshold:.3f}: about {fr.value:.0%} of answerable questions refused "
        f"[{fr.low:.0%}, {fr.high:.0%}]"
        + ("" if caught.value is None else f", {caught.value:.0%} of out-of-scope ones caught")
        + f" ({n} labels)"
    )
    return {"text": text, "threshold": point.threshold, "labels": n}


def update_profile(folder: str | os.PathLike[str]) -> str:
    """Calibrate ``folder`` again with its recorded settings, now with its labels, and say in one
    line what ``profile.json`` holds (the scores are read from the folder, nothing is read again)."""
    from scopeguard.calibration._run import run_calibration

    recorded = calibration_folder(folder).read_config()
    settings = {k: v for k, v in recorded.model_dump().items() if k in CalibrationConfig.model_fields}
    run = run_calibration(
        recorded.corpus,
        Path(folder),
        detector=recorded.detector,
        llm=recorded.llm,
        progress=False,
        **settings,
    )
    if run.profile is None:
        return f"no profile yet: {run.no_profile}"
    return f"profile updated ({Path(folder) / 'profile.json'}): {run.profile.summary()}"
