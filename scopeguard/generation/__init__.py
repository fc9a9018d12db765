"""Test-set generation: ELOQ's guided hallucination over a corpus (out-of-scope + in-scope questions).

    from scopeguard.generation import Generator, GenerationConfig
    summary = Generator("openai:gpt-4o-mini", config=GenerationConfig(mode="efficient")).run("docs/", "out/")

See :mod:`scopeguard.generation.pipeline` for the output folder layout and resume behaviour.
"""

from scopeguard.generation._document import generate_document
from scopeguard.generation.accounting import PRICES_DATE, PRICES_PER_1M, Usage, estimate_cost
from scopeguard.generation.cache import RecordingChatModel, ReplyCache
from scopeguard.generation.checkpoint import CheckpointStore, DocumentRecord, GeneratedQuestion
from scopeguard.generation.config import GenerationConfig
from scopeguard.generation.corpus import (
    Corpus,
    LengthRule,
    SkippedDocument,
    load_generation_corpus,
    truncate_words,
)
from scopeguard.generation.eloq_layout import export_eloq, import_eloq
from scopeguard.generation.pipeline import DEFAULT_WRITER, Generator
from scopeguard.generation.summary import RunSummary

__all__ = [
    "DEFAULT_WRITER",
    "PRICES_DATE",
    "PRICES_PER_1M",
    "CheckpointStore",
    "Corpus",
    "DocumentRecord",
    "GeneratedQuestion",
    "GenerationConfig",
    "Generator",
    "LengthRule",
    "RecordingChatModel",
    "ReplyCache",
    "RunSummary",
    "SkippedDocument",
    "Usage",
    "estimate_cost",
    "export_eloq",
    "generate_document",
    "import_eloq",
    "load_generation_corpus",
    "truncate_words",
]
