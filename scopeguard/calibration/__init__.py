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
  keyed by the detector's identity, so that a rerun resumes;
- with a query log (``questions=``) and ``select=N``: ``DIR/to_label.jsonl``, the questions chosen
  for a person to label, and ``DIR/labels.jsonl``, their labels (``scopeguard review DIR``).

    from scopeguard.calibration import calibrate
    profile = calibrate("docs.jsonl", "calibration/", budget=0.05)
"""

from scopeguard.calibration._choose import GENERATED_SHIFT, GENERATED_SHIFT_SET, learned_shift, shifted
from scopeguard.calibration._config import CalibrationConfig
from scopeguard.calibration._labels import (
    TEST_POINT,
    UPPER_SHARE,
    UPPER_WIDTH,
    Choice,
    LabelledScore,
    choose_to_label,
    weighted_point,
)
from scopeguard.calibration._questions import generated_set
from scopeguard.calibration._rephrase import rephrase_in_scope
from scopeguard.calibration._review import label_estimate, update_profile
from scopeguard.calibration._rules import RULES, Combined, Evidence, Generated, LogLabels, ThresholdRule
from scopeguard.calibration._run import CalibrationRun, calibrate, run_calibration

__all__ = [
    "GENERATED_SHIFT",
    "GENERATED_SHIFT_SET",
    "RULES",
    "TEST_POINT",
    "UPPER_SHARE",
    "UPPER_WIDTH",
    "CalibrationConfig",
    "CalibrationRun",
    "Choice",
    "Combined",
    "Evidence",
    "Generated",
    "LabelledScore",
    "LogLabels",
    "ThresholdRule",
    "calibrate",
    "choose_to_label",
    "generated_set",
    "label_estimate",
    "learned_shift",
    "rephrase_in_scope",
    "run_calibration",
    "shifted",
    "update_profile",
    "weighted_point",
]
