"""Heads: from the read's signals to P(out of scope) and a label (see :mod:`scopeguard.detection`).

- ``calibration``: logistic heads, Platt scaling, thresholds, operating points, document-grouped
  folds and leave-one-dataset-out predictions (numpy only);
- ``default``, ``logprob``, ``fast``: the scoring detectors' heads, their files and cards;
- ``fitting``: ``fit_detector`` (``scopeguard train-detector --detector default|logprob|fast``);
- ``mlp``, ``training``: the paper baselines' MLP head and its training (``nli``, ``probe``).
"""

__all__: list[str] = []
