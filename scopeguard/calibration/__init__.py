"""Calibration: a detector's operating point on the user's own corpus (``scopeguard calibrate``).

One global threshold refuses 3% of answerable questions on one corpus and 68% on another. A
calibration reads questions of the corpus (generated on a seeded sample of its documents by the
project's generator, taken from a finished generation folder, or labelled by people), chooses the
threshold that refuses at most a **budget** of answerable questions
(:func:`~scopeguard.detection.profile.budget_threshold`), and the hedge band below it, and writes:

- ``DIR/profile.json``: the :class:`~scopeguard.detection.profile.CalibrationProfile` that
  ``Guard(calibration=DIR)`` applies;
- ``DIR/report.md`` (and ``DIR/report.png`` with ``scopeguard[plots]``): the report card;
- ``DIR/generation/``: the generator's run folder; ``DIR/scores.jsonl``: every question's score,
  keyed by the detector's identity, so that a rerun resumes.

    from scopeguard.calibration import calibrate
    profile = calibrate("docs.jsonl", "calibration/", budget=0.05)
"""

from scopeguard.calibration._config import CalibrationConfig
from scopeguard.calibration._run import CalibrationRun, calibrate, run_calibration

__all__ = ["CalibrationConfig", "CalibrationRun", "calibrate", "run_calibration"]
