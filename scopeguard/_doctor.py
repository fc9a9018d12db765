"""``scopeguard doctor``: what a user sends when something is slow or dies.

The versions that matter, the CPU features that select llama.cpp's kernels, the loader's decision
on extra buffer types and why (running the one-time canary if this machine has none yet), the
packaged models with their checksum state, and a measured reading speed of the reading model. A
tuned reader's folder as the reading model is checked and timed with its LoRA adapter, listed.
With a calibration profile, the report names it and says whether it was made for the detector
(its name, head weights, reading model and adapter: :func:`check_calibration`).
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scopeguard._paths import cache_dir
from scopeguard.detection.read.adapter import gguf_reading
from scopeguard.detection.read.llama_states import (
    DEFAULT_KV_TYPE,
    get_kv_type,
    saved_states_summary,
    state_disk_budget_mb,
)
from scopeguard.detection.read.scorer import DEFAULT_VERDICT_MODEL
from scopeguard.errors import ScopeGuardError
from scopeguard.llamacpp import (
    LoaderDecision,
    ReadSpeed,
    cpu_features,
    cpu_name,
    extra_buffers_decision,
    llama_cpp_build,
    measure_read_speed,
    supports_sequences,
)
from scopeguard.models import available_ggufs, gguf_status, local_gguf

__all__ = [
    "CalibrationCheck",
    "DoctorReport",
    "PackagedModel",
    "SavedStates",
    "SavedStatesOfType",
    "check_calibration",
    "diagnose",
    "saved_states",
]

_PACKAGES = ("scopeguard", "llama-cpp-python", "torch", "transformers", "sentence-transformers", "numpy")


class PackagedModel(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    state: str  # verified / unverified / not assembled / not installed
    path: str | None


class CalibrationCheck(BaseModel):
    """A calibration profile against the detector it is meant for."""

    model_config = ConfigDict(frozen=True)

    path: str
    detector: str  # the detector checked (as named on the command line)
    summary: str | None = None  # the profile's one line (None: it could not be read)
    matches: bool = False
    error: str | None = None  # why it cannot be used with the detector


class SavedStatesOfType(BaseModel):
    """The saved states of one KV type: files, bytes, the tokens they hold, bytes per token."""

    model_config = ConfigDict(frozen=True)

    files: int
    bytes: int
    tokens: int
    bytes_per_token: float | None  # None: files named before the count joined the name


class SavedStates(BaseModel):
    """The reader's saved-states folder: its files, bytes and budget (``error``: a bad budget),
    the KV type new states are kept in, and the files by KV type (``"?"``: named without one)."""

    model_config = ConfigDict(frozen=True)

    path: str
    files: int
    bytes: int
    budget_mb: float | None
    error: str | None = None
    kv_type: str = DEFAULT_KV_TYPE
    by_kv_type: dict[str, SavedStatesOfType] = {}


def saved_states() -> SavedStates:
    """What ``$SCOPEGUARD_CACHE/llama-states`` holds against its budget, by KV type."""
    folder = cache_dir("llama-states")
    summary = saved_states_summary(folder)
    try:
        budget: float | None = state_disk_budget_mb(None)
        error = None
    except ScopeGuardError as exc:
        budget, error = None, str(exc)
    by_kv = {
        kv: SavedStatesOfType(files=n, bytes=b, tokens=t, bytes_per_token=summary.bytes_per_token(kv))
        for kv, (n, b, t) in summary.kv_types.items()
    }
    return SavedStates(
        path=str(folder),
        files=summary.files,
        bytes=summary.bytes,
        budget_mb=budget,
        error=error,
        by_kv_type=by_kv,
    )


def _states_line(st: SavedStates) -> str:
    budget = f"{st.budget_mb:g} MB budget" if st.budget_mb is not None else f"budget: {st.error}"
    kinds = [f"new states in {st.kv_type}"]
    for kv, k in sorted(st.by_kv_type.items(), key=lambda item: item[0] == "?"):  # the unnamed last
        if kv == "?":
            kinds.append(f"{k.files} older files without a token count")
        else:
            per = "" if k.bytes_per_token is None else f", {k.bytes_per_token / 1024:.1f} KB per token"
            kinds.append(f"{k.files} {kv}{per}")
    return (
        f"saved states    {st.files} files, {st.bytes / 2**20:.1f} MB of the {budget}; {'; '.join(kinds)} "
        f"({st.path}; $SCOPEGUARD_STATE_DISK_MB)"
    )


class DoctorReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    python: str
    platform: str
    packages: dict[str, str | None]
    llama_cpp_system_info: str
    cpu: str
    cpu_cores: int
    cpu_features: tuple[str, ...]
    avx2: bool
    avx512: bool
    amx: bool
    reading_model: str
    adapter: str | None = None  # a tuned reader's GGUF LoRA adapter, read over its base
    adapter_key: str | None = None
    adapter_reads: str | None = None  # "all" tokens, or "question": from the question on
    loader: LoaderDecision | None
    loader_error: str | None = None
    models: list[PackagedModel]
    read_speed: ReadSpeed | None = None
    read_speed_error: str | None = None
    set_reads: bool | None = None  # the bindings join kept states (read="set"); None: no llama.cpp
    calibration: CalibrationCheck | None = None
    saved_states: SavedStates | None = None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check_calibration(
    location: str | os.PathLike[str], detector: str = "default", reader: str | None = None
) -> CalibrationCheck:
    """Whether the calibration profile at ``location`` was made for ``detector`` as it is built by
    name (with ``reader`` as its reading model, for the detectors that read: ``local:`` + a GGUF
    name, path or tuned reader's folder). Never raises for a bad profile: the check says why."""
    from scopeguard.detection.detectors.registry import detector_reads, get_detector
    from scopeguard.detection.profile import PROFILE_FILE, load_profile

    path = Path(location) / PROFILE_FILE if Path(location).is_dir() else Path(location)
    summary = None
    try:
        profile = load_profile(location)
        summary = profile.summary()
        reads = reader is not None and detector_reads(detector)  # the timed model: for a detector that reads
        profile.check(get_detector(detector, **({"reader": f"local:{reader}"} if reads else {})))
    except ScopeGuardError as exc:
        return CalibrationCheck(path=str(path), detector=detector, summary=summary, error=str(exc))
    return CalibrationCheck(path=str(path), detector=detector, summary=summary, matches=True)


def diagnose(
    *,
    speed: bool = True,
    recheck: bool = False,
    model: str = DEFAULT_VERDICT_MODEL,
    calibration: str | os.PathLike[str] | None = None,
    detector: str = "default",
) -> DoctorReport:
    """Collect the report; ``speed`` times a read of the reading ``model`` (a few seconds; a
    tuned reader's folder: its base with its adapter), ``recheck`` runs the extra-buffer canary
    again instead of trusting its cached verdict. ``calibration``: a profile to check against
    ``detector`` reading with ``model`` (:func:`check_calibration`)."""
    features = cpu_features()
    llama_version, system_info = llama_cpp_build()
    models = [
        PackagedModel(name=n, state=s, path=str(p) if p else None)
        for n in available_ggufs()
        for s, p in [gguf_status(n)]
    ]
    decision: LoaderDecision | None = None
    loader_error = speed_error = None
    read_speed: ReadSpeed | None = None
    adapter = key = reads = None
    set_reads: bool | None = None
    if not llama_version:
        loader_error = "llama-cpp-python is not installed: pip install 'scopeguard[local]'"
    else:
        set_reads = supports_sequences()
        try:
            reading = gguf_reading(model)
            adapter, key = reading.adapter, reading.key
            reads = None if adapter is None else reading.adapt
            path = local_gguf(reading.base)
            decision = extra_buffers_decision(path, adapter=adapter, recheck=recheck)
            if speed:
                import llama_cpp  # installed: llama_version says so

                kv = get_kv_type(None).llama_params(llama_cpp)  # timed as the reader reads
                read_speed = measure_read_speed(
                    path, extra_buffers=decision.extra_buffers, tokens=128, repeats=2, adapter=adapter, **kv
                )
        except ScopeGuardError as exc:
            (loader_error, speed_error) = (str(exc), None) if decision is None else (None, str(exc))
    return DoctorReport(
        python=sys.version.split()[0],
        platform=platform.platform(),
        packages={p: _version(p) for p in _PACKAGES},
        llama_cpp_system_info=system_info,
        cpu=cpu_name(),
        cpu_cores=os.cpu_count() or 1,
        cpu_features=features,
        avx2="avx2" in features,
        avx512="avx512f" in features,
        amx=any(f.startswith("amx") for f in features),
        reading_model=model,
        adapter=None if adapter is None else str(adapter),
        adapter_key=key,
        adapter_reads=reads,
        loader=decision,
        loader_error=loader_error,
        models=models,
        read_speed=read_speed,
        read_speed_error=speed_error,
        set_reads=set_reads,
        saved_states=saved_states(),
        calibration=None
        if calibration is None
        else check_calibration(calibration, detector, None if model == DEFAULT_VERDICT_MODEL else model),
    )


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def render(report: DoctorReport) -> str:
    """The report as text, one fact a line."""
    yes = {True: "yes", False: "no"}
    lines = [f"python          {report.python} on {report.platform}"]
    lines += [f"{name:<15} {version or 'not installed'}" for name, version in report.packages.items()]
    lines += [
        f"cpu             {report.cpu}, {report.cpu_cores} cores",
        f"cpu features    AVX2 {yes[report.avx2]}, AVX-512 {yes[report.avx512]}, AMX {yes[report.amx]}"
        f" ({' '.join(report.cpu_features)})",
        f"llama.cpp       {report.llama_cpp_system_info or 'not installed'}",
    ]
    if report.adapter is not None:
        where = (
            "from the question on (documents read by the bare base)"
            if report.adapter_reads == "question"
            else "on every token"
        )
        lines.append(f"adapter         {report.adapter_key} ({report.adapter}), LoRA over the base, {where}")
    if report.loader is not None:
        d = report.loader
        lines.append(
            f"extra buffers   {_on(d.extra_buffers)} for {report.reading_model} ({d.source}): {d.reason}"
        )
    else:
        lines.append(f"extra buffers   unknown: {report.loader_error}")
    for m in report.models:
        lines.append(f"model           {m.name}: {m.state}" + (f" ({m.path})" if m.path else ""))
    if report.read_speed is not None:
        s = report.read_speed
        lines.append(
            f"read speed      {s.tokens_per_s:g} tokens/s ({report.reading_model}, {s.tokens} tokens, "
            f"{s.n_threads} threads, extra buffers {_on(s.extra_buffers)}, KV cache {DEFAULT_KV_TYPE}, "
            f"median of {s.repeats})"
        )
    elif report.read_speed_error:
        lines.append(f"read speed      not measured: {report.read_speed_error}")
    if report.set_reads is not None:
        lines.append(
            "set reads       "
            + (
                'yes: a context holds two sequences in one shared KV cache (DefaultDetector(read="set"))'
                if report.set_reads
                else f"no: llama-cpp-python {report.packages.get('llama-cpp-python')} keeps one sequence a "
                'context; upgrade it to read a question once against its passages (read="set")'
            )
        )
    if (st := report.saved_states) is not None:
        lines.append(_states_line(st))
    if (c := report.calibration) is not None:
        lines.append(f"calibration     {c.path}: {c.summary or 'not readable'}")
        verdict = f"made for {c.detector}" if c.matches else f"NOT usable with {c.detector}: {c.error}"
        lines.append(f"                {verdict}")
    return "\n".join(lines)
