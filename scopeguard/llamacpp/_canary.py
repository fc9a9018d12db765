"""Whether llama.cpp's extra buffer types are safe on this machine, decided before loading.

On some CPUs llama.cpp's fast path crashes the process: with AMX (Intel Sapphire Rapids class
cloud VMs) a model loaded into the ``AMX`` extra buffer type dies by SIGSEGV on the first decode
of two or more tokens. A segfault cannot be caught in-process, so the first load of a model file
on a machine runs a *canary* in a child process: it loads the model with extra buffers, reads a
short prompt, loads it again without them, reads the same prompt, and prints both last-token
logits' agreement, with three timed reads of a longer prompt each way. Extra buffers are used only
when the child exited cleanly, the logits agree and the extra buffers read at least
:data:`MIN_GAIN` faster (median of the timed reads: on AVX2/AVX-512 EPYC the repacked path read
0.92x as fast, `benchmarks/results/llama_loader.json`); a child that crashed, failed, timed out or
disagreed, or a fast path that is not faster, means the plain parameters.

The verdict is cached per (CPU model and flags, llama.cpp build, model file, LoRA adapter: its
sha256, since an adapter changes what the model computes; the child reads with it) under
``$SCOPEGUARD_CACHE/llama-loader/``, so later processes read it without forking. Where the
canary cannot run (the cache is not writable, no child process can be started) the safe
parameters are used, never the risky ones. ``SCOPEGUARD_LLAMA_EXTRA_BUFFERS=on|off`` forces
either way (``auto``, the default, decides as above); ``scopeguard doctor --recheck`` runs the
canary again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from scopeguard._gguf import _sha256
from scopeguard._paths import cache_dir
from scopeguard.data import atomic_write_json
from scopeguard.errors import ConfigurationError
from scopeguard.llamacpp._system import cpu_features, cpu_name, llama_cpp_build

__all__ = ["ENV_VAR", "CanaryResult", "LoaderDecision", "extra_buffers_decision", "run_canary"]

logger = logging.getLogger(__name__)

ENV_VAR = "SCOPEGUARD_LLAMA_EXTRA_BUFFERS"
CANARY_TIMEOUT_S = 300.0
#: extra buffers must read at least this much faster than the plain path to be used
MIN_GAIN = 0.10
_ON = ("on", "1", "true", "yes")
_OFF = ("off", "0", "false", "no")
_MEMO: dict[str, LoaderDecision] = {}
_MEMO_LOCK = threading.Lock()


class CanaryResult(BaseModel):
    """What the canary child did."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    returncode: int | None  # None: timed out or never started
    signal: str | None = None  # "SIGSEGV" when the child died by a signal
    seconds: float
    detail: str  # the child's report, or why it failed (the end of its stderr)
    max_logit_diff: float | None = None
    #: the timed reads' seconds with and without extra buffers (None: the child timed none)
    extra_reads_s: tuple[float, ...] | None = None
    plain_reads_s: tuple[float, ...] | None = None

    def speedup(self) -> float | None:
        """How many times faster the extra buffers read (median over median), if timed."""
        if not self.extra_reads_s or not self.plain_reads_s:
            return None
        extra = statistics.median(self.extra_reads_s)
        return statistics.median(self.plain_reads_s) / extra if extra > 0 else None


class LoaderDecision(BaseModel):
    """Whether llama.cpp loads ``model`` with extra buffer types here, and why."""

    model_config = ConfigDict(frozen=True)

    extra_buffers: bool
    source: Literal["forced", "cached", "canary", "fallback"]
    reason: str
    model: str
    adapter: str | None = None  # the GGUF LoRA adapter read over the model, if any
    cpu: str
    cpu_features: tuple[str, ...]
    llama_cpp: str
    key: str
    checked_at: str | None = None
    canary: CanaryResult | None = None


Canary = Callable[[Path], CanaryResult]


def _forced() -> bool | None:
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw in _ON:
        return True
    if raw in _OFF:
        return False
    raise ConfigurationError(f"{ENV_VAR} must be 'auto', 'on' or 'off', got {raw!r}")


def _key(path: Path, adapter: Path | None = None) -> tuple[str, dict[str, object]]:
    version, system_info = llama_cpp_build()
    st = path.stat()
    material: dict[str, object] = {
        "cpu": cpu_name(),
        "cpu_features": list(cpu_features()),
        "llama_cpp": version,
        "system_info": system_info,
        "model": str(path.resolve()),
        "model_size": st.st_size,
        "model_mtime_ns": st.st_mtime_ns,
        "rule": "agree-and-faster",  # verdicts kept before the speed rule are not reused
    }
    if adapter is not None:  # absent for a bare model: the keys of bare models stay as they were
        material["adapter_sha256"] = _adapter_sha256(str(adapter.resolve()), *_stamp(adapter))
    digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]
    return digest, material


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=32)
def _adapter_sha256(path: str, size: int, mtime_ns: int) -> str:
    return _sha256(Path(path))


def decision_file(key: str) -> Path:
    return cache_dir("llama-loader", f"{key}.json")


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
        return True
    except OSError:
        return False


def _tail(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _python_executable() -> bool:
    name = Path(sys.executable or "").name.lower()
    return name.startswith(("python", "pypy")) and Path(sys.executable).is_file()


def run_canary(
    model_path: Path,
    *,
    adapter: Path | None = None,
    command: Sequence[str] | None = None,
    timeout: float = CANARY_TIMEOUT_S,
) -> CanaryResult:
    """Run the canary for ``model_path`` (with the LoRA ``adapter`` applied) in a child process
    (``command`` replaces the child, for tests); never raises."""
    if command is None and not _python_executable():
        # embedded interpreters (uWSGI, some app servers) have no Python binary to start a child with
        return CanaryResult(
            passed=False,
            returncode=None,
            seconds=0.0,
            detail=f"could not start: no Python at {sys.executable!r}",
        )
    child = [sys.executable, "-m", "scopeguard.llamacpp._child", str(model_path)]
    argv = list(command) if command else child + ([] if adapter is None else [str(adapter)])
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    start = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return CanaryResult(
            passed=False,
            returncode=None,
            seconds=time.monotonic() - start,
            detail=f"timed out after {timeout:g}s",
        )
    except OSError as exc:  # no fork/exec here: the caller falls back without caching
        return CanaryResult(passed=False, returncode=None, seconds=0.0, detail=f"could not start: {exc}")
    seconds = round(time.monotonic() - start, 2)
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        return CanaryResult(
            passed=False,
            returncode=proc.returncode,
            signal=name,
            seconds=seconds,
            detail=f"the child died by {name}" + (f": {_tail(proc.stderr)}" if proc.stderr.strip() else ""),
        )
    lines = proc.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        report = {}
    if proc.returncode != 0 or not isinstance(report, dict) or "agree" not in report:
        return CanaryResult(
            passed=False,
            returncode=proc.returncode,
            seconds=seconds,
            detail=f"the child exited with code {proc.returncode}: {_tail(proc.stderr or proc.stdout)}",
        )
    return CanaryResult(
        passed=bool(report["agree"]),
        returncode=0,
        seconds=seconds,
        detail=str(report.get("detail", "")),
        max_logit_diff=report.get("max_logit_diff"),
        extra_reads_s=_times(report.get("extra_reads_s")),
        plain_reads_s=_times(report.get("plain_reads_s")),
    )


def _times(raw: object) -> tuple[float, ...] | None:
    if not isinstance(raw, list) or not raw:
        return None
    try:
        return tuple(float(x) for x in raw)
    except (TypeError, ValueError):
        return None


def _read_cached(path: Path) -> LoaderDecision | None:
    try:
        return LoaderDecision.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def extra_buffers_decision(
    model_path: str | Path,
    *,
    adapter: str | Path | None = None,
    recheck: bool = False,
    canary: Canary | None = None,
) -> LoaderDecision:
    """Whether to load ``model_path`` (with the GGUF LoRA ``adapter``) with llama.cpp's extra
    buffer types on this machine.

    In order: ``$SCOPEGUARD_LLAMA_EXTRA_BUFFERS`` (forced); this process's earlier answer; the
    cached verdict for this CPU, llama.cpp build, model file and adapter; else the canary is run
    (``canary`` replaces :func:`run_canary`) and its verdict cached. ``recheck`` ignores what was
    cached.
    """
    path = Path(model_path)
    lora = None if adapter is None else Path(adapter)
    key, material = _key(path, lora)
    safe = LoaderDecision(
        extra_buffers=False,
        source="fallback",
        reason="",
        model=str(path.resolve()),
        adapter=None if lora is None else str(lora.resolve()),
        cpu=cpu_name(),
        cpu_features=cpu_features(),
        llama_cpp=str(material["llama_cpp"]),
        key=key,
    )
    forced = _forced()
    if forced is not None:
        state = "on" if forced else "off"
        return safe.model_copy(
            update={"extra_buffers": forced, "source": "forced", "reason": f"{ENV_VAR}={state}"}
        )
    with _MEMO_LOCK:
        if not recheck and key in _MEMO:
            return _MEMO[key]
        stored = decision_file(key)
        cached = None if recheck else _read_cached(stored)
        if cached is not None:
            decision = cached.model_copy(update={"source": "cached"})
        elif not _writable(stored.parent):
            why = f"no canary: its verdict cannot be kept ({stored.parent} is not writable)"
            decision = safe.model_copy(update={"reason": why})
        else:
            decision = _run_and_store(
                path, stored, canary or functools.partial(run_canary, adapter=lora), safe
            )
        _MEMO[key] = decision
        return decision


def _run_and_store(path: Path, stored: Path, canary: Canary, safe: LoaderDecision) -> LoaderDecision:
    logger.warning(
        "checking once whether llama.cpp's extra buffer types are safe for %s on this CPU (a child process)",
        path.name,
    )
    result = canary(path)
    if result.returncode is None and result.detail.startswith("could not start"):
        return safe.model_copy(
            update={"reason": f"the canary {result.detail}: safe parameters", "canary": result}
        )
    use = result.passed
    speedup = result.speedup()
    if result.passed and speedup is not None and speedup < 1 + MIN_GAIN:
        use = False
        reason = (
            f"the canary passed, but extra buffers read {speedup:.2f}x as fast as the plain path "
            f"(median of {len(result.extra_reads_s or ())} reads; {1 + MIN_GAIN:.2f}x needed): plain path"
        )
    elif result.passed:
        faster = "" if speedup is None else f"; extra buffers read {speedup:.2f}x as fast"
        reason = f"the canary passed ({result.detail}{faster})"
    else:
        reason = f"the canary failed ({result.detail}): extra buffers off"
        logger.warning("llama.cpp's extra buffer types are off for %s: %s", path.name, result.detail)
    decision = safe.model_copy(
        update={
            "extra_buffers": use,
            "source": "canary",
            "reason": reason,
            "checked_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "canary": result,
        }
    )
    try:
        atomic_write_json(stored, decision.model_dump(mode="json"))
    except OSError as exc:
        logger.warning("could not keep the canary's verdict in %s: %s", stored, exc)
    return decision
