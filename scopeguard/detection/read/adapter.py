"""A tuned reader's folder: a base model and the LoRA adapter trained on the verdict.

``scopeguard train-reader`` writes (see :mod:`scopeguard.detection.tune`)::

    OUT/reader.json      base model, adapter files, LoRA rank and alpha, their sha256
    OUT/adapter.gguf     the GGUF LoRA adapter, applied by llama.cpp over the base GGUF (unmerged)
    OUT/peft/            the PEFT adapter (transformers, vLLM's --enable-lora)
    OUT/card.md          what it was trained on and how it did

Wherever a reading model is named, the folder names the tuned reader: ``local:OUT`` reads with
llama.cpp (base GGUF + ``adapter.gguf``), ``transformers:OUT`` with transformers (base + PEFT).
The adapter's identity (:attr:`TunedReader.key`, from the GGUF file's sha256) joins the model's
name, so every cache that depends on the weights (kept document states, signal caches, the
loader's canary verdict) keeps a tuned reader's entries apart from the base model's.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from scopeguard.errors import ConfigurationError, ModelError

__all__ = [
    "GGUF_ADAPTER",
    "PEFT_DIR",
    "READER_FILE",
    "GgufReading",
    "TunedReader",
    "file_sha256",
    "gguf_reading",
    "tuned_reader",
]

READER_FILE = "reader.json"
GGUF_ADAPTER = "adapter.gguf"
PEFT_DIR = "peft"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file (memoised by path, size and modification time)."""
    p = Path(path)
    stat = p.stat()
    return _sha256(str(p.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class TunedReader:
    """A tuned reader's folder (see the module docstring).

    ``base``: the base model as any model option takes it (a packaged name such as
    ``qwen2.5-coder-0.5b``, a ``.gguf`` path, a Hugging Face name). ``gguf`` / ``peft``: the
    adapter files (either may be absent: an adapter of a hub model with no GGUF base has no GGUF
    form). ``rank`` / ``alpha``: the LoRA's (scale alpha / rank).
    """

    folder: Path
    base: str
    gguf: Path | None
    peft: Path | None
    rank: int
    alpha: float
    meta: dict[str, Any]

    @property
    def adapt(self) -> str:
        """Where the adapter acts: ``"all"`` tokens, or ``"question"`` (from the question on, the
        documents read by the bare base; see :func:`scopeguard.detection.read.reader.question_cut`)."""
        return str(self.meta.get("adapt", "all"))

    @property
    def template(self) -> str:
        """The verdict prompt it was trained on."""
        return str(self.meta.get("template", "answerability_verdict"))

    @property
    def key(self) -> str:
        """``lora-`` and 12 hex digits of the GGUF adapter's sha256 (of the PEFT weights' without one)."""
        if self.gguf is not None:
            return "lora-" + file_sha256(self.gguf)[:12]
        assert self.peft is not None
        return "lora-" + file_sha256(self.peft / "adapter_model.safetensors")[:12]

    def require_gguf(self) -> Path:
        if self.gguf is None:
            raise ModelError(
                f"{self.folder} holds no GGUF adapter ({GGUF_ADAPTER}): read it with transformers "
                f"('transformers:{self.folder}'), or train it on a GGUF base"
            )
        return self.gguf

    def require_peft(self) -> Path:
        if self.peft is None:
            raise ModelError(f"{self.folder} holds no PEFT adapter ({PEFT_DIR}/): read it with 'local:'")
        return self.peft


def tuned_reader(location: str | os.PathLike[str]) -> TunedReader | None:
    """The tuned reader in folder ``location``, ``None`` when it is no such folder; a
    :class:`ModelError` naming the problem when its ``reader.json`` or adapter files are broken."""
    folder = Path(location)
    info = folder / READER_FILE
    if not info.is_file():
        return None
    try:
        meta = json.loads(info.read_text(encoding="utf-8"))
        base = str(meta["base"])
        rank = int(meta["rank"])
        alpha = float(meta["alpha"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"{info}: not a tuned reader's description ({exc})") from None
    if meta.get("adapt", "all") not in ("all", "question"):
        got = meta.get("adapt")
        raise ModelError(f"{info}: unknown adapt {got!r} (this scopeguard reads 'all' or 'question')")
    gguf = folder / GGUF_ADAPTER
    peft = folder / PEFT_DIR
    has_gguf, has_peft = gguf.is_file(), (peft / "adapter_model.safetensors").is_file()
    if not has_gguf and not has_peft:
        raise ModelError(f"{folder} names a tuned reader but holds neither {GGUF_ADAPTER} nor {PEFT_DIR}/")
    for name, sha in dict(meta.get("sha256") or {}).items():
        path = folder / name
        if path.is_file() and file_sha256(path) != sha:
            raise ModelError(
                f"{path} does not match the sha256 in {info} (changed or truncated after training): "
                "copy the folder again or re-export it"
            )
    return TunedReader(
        folder=folder,
        base=base,
        gguf=gguf if has_gguf else None,
        peft=peft if has_peft else None,
        rank=rank,
        alpha=alpha,
        meta=meta,
    )


@dataclass(frozen=True)
class GgufReading:
    """What llama.cpp reads: ``base`` (as :func:`scopeguard.models.local_gguf` takes it) and the
    GGUF LoRA ``adapter`` over it, whose ``key`` (``lora-`` + 12 hex of its sha256) joins names."""

    base: str
    adapter: Path | None = None
    key: str | None = None
    #: ``"question"``: the adapter reads from the question of ``template``'s prompts on (see
    #: :attr:`TunedReader.adapt`); ``"all"``: every token
    adapt: str = "all"
    template: str = "answerability_verdict"

    @property
    def suffix(self) -> str:
        """``+lora-...`` for a tuned reader (appended to the base's name), else ``""``."""
        return "" if self.key is None else f"+{self.key}"


def gguf_reading(model: str | os.PathLike[str], adapter: str | os.PathLike[str] | None = None) -> GgufReading:
    """The base and GGUF adapter llama.cpp reads for ``model`` with ``adapter``.

    ``model``: a base model (a packaged name, a ``.gguf`` path, a hub file) or a tuned reader's
    folder (its base and ``adapter.gguf``). ``adapter``: a GGUF LoRA adapter file or a tuned
    reader's folder, read over ``model``. A missing adapter, or a tuned reader without a GGUF
    adapter, is a :class:`ModelError`; an adapter given for a tuned reader a
    :class:`ConfigurationError`.
    """
    reader = tuned_reader(model) if Path(model).is_dir() else None
    if reader is not None:
        if adapter is not None:
            raise ConfigurationError(
                f"{model} is a tuned reader with its own adapter: pass the folder alone, or its base "
                f"({reader.base}) with adapter=..."
            )
        return GgufReading(reader.base, reader.require_gguf(), reader.key, reader.adapt, reader.template)
    if adapter is None:
        return GgufReading(str(model))
    path = Path(adapter)
    if path.is_dir():
        tuned = tuned_reader(path)
        if tuned is None:
            raise ModelError(
                f"{path} is a folder without {READER_FILE}: pass a GGUF LoRA adapter file or a tuned "
                f"reader's folder as the adapter of {model}"
            )
        return GgufReading(str(model), tuned.require_gguf(), tuned.key, tuned.adapt, tuned.template)
    if not path.is_file():
        raise ModelError(f"LoRA adapter not found: {path} (for the base model {model})")
    return GgufReading(str(model), path, "lora-" + file_sha256(path)[:12])
