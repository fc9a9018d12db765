"""Tuning the reader: LoRA adapters trained on the verdict, exported for transformers and llama.cpp.

``train_reader(TuneConfig(datasets=[...], base="qwen2.5-coder-0.5b"), "readers/mine")`` (or
``scopeguard train-reader DATA... --base NAME --out DIR``) trains a LoRA adapter on the verdict
margin the detectors read, validating on held-out documents as it goes, and writes a tuned
reader's folder (:mod:`scopeguard.detection.read.adapter`) that any reading model option takes:
``local:readers/mine`` (llama.cpp, GGUF adapter) or ``transformers:readers/mine`` (PEFT).
"""

from scopeguard.detection.tune.examples import Example, ExampleSet, build_examples
from scopeguard.detection.tune.export import gguf_base_info, write_gguf_adapter, write_reader_json
from scopeguard.detection.tune.train import (
    DEFAULT_TARGETS,
    DocumentStates,
    TuneConfig,
    TuneReport,
    train_reader,
)

__all__ = [
    "DEFAULT_TARGETS",
    "DocumentStates",
    "Example",
    "ExampleSet",
    "TuneConfig",
    "TuneReport",
    "build_examples",
    "gguf_base_info",
    "train_reader",
    "write_gguf_adapter",
    "write_reader_json",
]
