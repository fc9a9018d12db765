"""The feature cache every read is kept in (re-exported by :mod:`scopeguard.detection.read.features`
and :mod:`scopeguard.detection.read`): below the extractors, which keep their reads in it, and the
lookup that builds them."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard._paths import cache_dir
from scopeguard.data import atomic_write_sealed, atomic_write_text, unseal

__all__ = ["FeatureCache", "stable_hash"]


def stable_hash(*parts: Any) -> str:
    """SHA-256 of a JSON encoding of ``parts`` (stable across runs and processes)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class FeatureCache:
    """Float32 vectors on disk, one ``.npy`` per key (sealed with its checksum, see
    :func:`~scopeguard.data.atomic_write_sealed`), under a namespace derived from ``identity``."""

    def __init__(self, identity: dict[str, Any], *, root: str | os.PathLike[str] | None = None) -> None:
        self.identity = identity
        base = Path(root) if root is not None else cache_dir("features")
        self.directory = base / stable_hash(identity)[:24]

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            payload = unseal(path.read_bytes())
            return np.asarray(np.load(io.BytesIO(payload), allow_pickle=False), dtype=np.float32)
        except OSError:  # unreadable now (permissions, a disk error): recompute, keep the file
            return None
        except (ValueError, EOFError):  # torn, damaged since written, or foreign: recompute
            path.unlink(missing_ok=True)
            return None

    def put(self, key: str, vector: np.ndarray) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not (self.directory / "identity.json").is_file():
            atomic_write_text(self.directory / "identity.json", json.dumps(self.identity, indent=2))
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(vector, dtype=np.float32), allow_pickle=False)
        atomic_write_sealed(path, buffer.getvalue())  # checked on get: a damaged vector is read again
