"""One document, in the configured mode: the paper's Algorithm 1 (:mod:`.paper`) or an offline mode
(:mod:`.offline`)."""

from __future__ import annotations

from scopeguard.detection.detectors.base import Detector
from scopeguard.errors import ConfigurationError
from scopeguard.generation._context import DocumentContext
from scopeguard.generation.cache import RecordingChatModel
from scopeguard.generation.checkpoint import DocumentRecord
from scopeguard.generation.config import OFFLINE_MODES, GenerationConfig
from scopeguard.generation.offline import Screen, generate_offline, get_screens
from scopeguard.generation.paper import generate_paper
from scopeguard.types import Document

__all__ = ["generate_document"]


async def generate_document(
    doc: Document,
    llm: RecordingChatModel,
    *,
    config: GenerationConfig,
    judge: Detector | None = None,
    order: int = 0,
    screens: tuple[Screen, ...] | None = None,
) -> DocumentRecord:
    """Run the configured mode on one document (Algorithm 1 for ``faithful`` and ``efficient``, see
    :mod:`scopeguard.generation.offline` for the offline modes); ``llm`` books calls on its ledger
    (one per document).

    ``config.mode`` must be resolved (not ``auto``): see :meth:`GenerationConfig.resolved`.
    ``screens``: the offline modes' screens, as a :class:`~scopeguard.generation.Generator` looked
    them up once when it was built; ``None`` looks up ``config.screens`` here (an unknown name
    raises :class:`~scopeguard.errors.ConfigurationError` naming the valid ones).
    """
    if config.mode == "auto":
        raise ConfigurationError("mode 'auto' must be resolved first: use config.resolved(llm)")
    if screens is None:
        screens = get_screens(config.screens)
    ctx = DocumentContext(doc, order, llm, judge, config)
    if config.mode in OFFLINE_MODES:
        return await generate_offline(ctx, screens)
    return await generate_paper(ctx)
