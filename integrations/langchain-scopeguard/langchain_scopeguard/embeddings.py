"""``SentenceTransformerEmbeddings``: LangChain embeddings over a local sentence-transformers model.

``langchain-huggingface`` does the same but pins an older ``huggingface_hub``; this adapter
only needs ``scopeguard[embeddings]`` and loads from a local path (offline) or a hub name.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.embeddings import Embeddings

from scopeguard._optional import require

__all__ = ["SentenceTransformerEmbeddings"]


class SentenceTransformerEmbeddings(Embeddings):
    """Normalised sentence embeddings.

    ``SentenceTransformerEmbeddings(scopeguard.models.minilm_path())`` runs offline.
    """

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 32) -> None:
        st = require("sentence_transformers", extra="embeddings", feature="SentenceTransformerEmbeddings")
        self.model_name = model
        self.batch_size = batch_size
        self._model: Any = st.SentenceTransformer(model, device=device)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return [list(map(float, v)) for v in vectors]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)
