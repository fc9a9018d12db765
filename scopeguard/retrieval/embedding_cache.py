"""On-disk cache of embeddings, keyed by model and content hash.

Layout: ``<root>/<model-slug>/shard-*.npz``; each shard holds ``keys`` (SHA-256 of the prompt and
text) and ``vectors``. Shards are written atomically (temp file + rename) after every encoded
chunk, so a killed job loses at most the chunk in flight and a re-run encodes only what is missing.
The root is ``cache_dir("embeddings")``: ``$SCOPEGUARD_CACHE/embeddings`` when ``SCOPEGUARD_CACHE``
is set, else ``~/.cache/scopeguard/embeddings``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scopeguard._paths import cache_dir
from scopeguard.data import atomic_open

__all__ = ["EmbeddingCache", "text_key"]

logger = logging.getLogger(__name__)


def text_key(text: str, *, prompt: str = "", variant: str = "") -> str:
    """The cache key of one text: SHA-256 over the prompt, the encoding variant and the text."""
    h = hashlib.sha256()
    for part in (prompt, variant, text):
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


def _slug(model_id: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[-60:].strip("_") or "model"
    return f"{readable}-{hashlib.sha256(model_id.encode('utf-8')).hexdigest()[:10]}"


class EmbeddingCache:
    """Embeddings of one model, stored in shards under ``root``; loaded lazily on first use."""

    def __init__(self, model_id: str, root: str | os.PathLike[str] | None = None) -> None:
        self.model_id = model_id
        self.directory = Path(root).expanduser() if root is not None else cache_dir("embeddings")
        self.directory = self.directory / _slug(model_id)
        self._vectors: dict[str, npt.NDArray[np.float32]] | None = None

    def _load(self) -> dict[str, npt.NDArray[np.float32]]:
        if self._vectors is None:
            self._vectors = {}
            for shard in sorted(self.directory.glob("shard-*.npz")):
                try:
                    with np.load(shard, allow_pickle=False) as data:
                        keys, vecs = data["keys"], data["vectors"]
                except OSError as exc:  # unreadable now (permissions, a disk error): its texts re-encoded
                    logger.warning("ignoring unreadable embedding cache shard %s: %s", shard, exc)
                    continue
                except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
                    # torn or damaged since it was written (its members carry a CRC-32): removed
                    logger.warning("removed the damaged embedding cache shard %s: %s", shard, exc)
                    shard.unlink(missing_ok=True)
                    continue
                for key, vec in zip(keys.tolist(), vecs, strict=True):
                    self._vectors[str(key)] = vec.astype(np.float32, copy=False)
            logger.debug("embedding cache %s: %d vectors", self.directory, len(self._vectors))
        return self._vectors

    def __len__(self) -> int:
        return len(self._load())

    def get(self, keys: Sequence[str]) -> list[npt.NDArray[np.float32] | None]:
        """The cached vector of each key, or ``None`` where it is missing."""
        vectors = self._load()
        return [vectors.get(k) for k in keys]

    def put(self, keys: Sequence[str], vectors: npt.NDArray[np.floating]) -> None:
        """Store ``vectors`` (one row per key) as a new shard, atomically."""
        if len(keys) == 0:
            return
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(keys):
            raise ValueError(f"expected {len(keys)} vectors, got an array of shape {arr.shape}")
        with atomic_open(self.directory / f"shard-{uuid.uuid4().hex}.npz", "wb") as fh:
            np.savez(fh, keys=np.asarray(list(keys), dtype=str), vectors=arr)
        store = self._load()
        for key, vec in zip(keys, arr, strict=True):
            store[key] = vec
