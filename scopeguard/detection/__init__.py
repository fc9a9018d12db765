"""Out-of-scope detection, one wing whose folders follow the data: read -> signals -> head -> detectors.

- :mod:`~scopeguard.detection.read`: what a model makes of (question, document). One backend per
  engine (``llamacpp``, ``transformers``, ``openai``), each giving the Yes/No verdict log-probs
  and, where the engine exposes them, hidden states of chosen layers from the same pass; the
  :class:`~scopeguard.detection.read.reader.Reader` that cuts documents into passages, reads each
  once and keeps its state; the fast read (word coverage, MiniLM alignment); the paper
  baselines' feature extractors (sentence embeddings, the probe's hidden state); the feature cache.
- :mod:`~scopeguard.detection.signals`: the read of every question of a dataset, cached and
  resumable, as the columns a head fits on.
- :mod:`~scopeguard.detection.head`: heads over signals: logistic calibration and grouped /
  leave-one-dataset-out validation (``calibration``), the ``default`` / ``logprob`` / ``fast``
  heads with their files and cards, fitting them (``fitting``), and the paper baselines' MLP
  heads (``mlp``, ``training``).
- :mod:`~scopeguard.detection.detectors`: the named detectors in the registry (``default``,
  ``logprob``, ``fast``, ``judge``, ``lexical``, ``cascade``, ``nli``, ``probe``): a read and a
  head, put together behind the :class:`~scopeguard.detection.detectors.base.Detector` protocol.

Each folder imports only from those before it (``tests/test_layers.py`` checks it).
"""

__all__: list[str] = []
