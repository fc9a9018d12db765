"""The server's configuration: one typed record, filled from a file, ``SCOPEGUARD_*`` variables
and the command line (each overriding the one before)."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from scopeguard.errors import ConfigurationError

logger = logging.getLogger(__name__)

ENV_PREFIX = "SCOPEGUARD_"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ServeConfig(BaseModel):
    """What ``scopeguard serve`` runs; every field is also ``SCOPEGUARD_<FIELD>`` and a key of the
    config file (TOML or JSON). Secrets are :class:`~pydantic.SecretStr`: they never print."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(
        default="127.0.0.1", description="Address to bind; another than loopback needs api_key."
    )
    port: int = Field(default=8000, ge=0, le=65535, description="Port to bind (0: a free one).")
    detector: str = Field(default="default", description="Detector name (see `scopeguard detectors`).")
    reader: str | None = Field(
        default=None,
        description="The reading model of a detector that reads (default, logprob): local, "
        "local:NAME_OR_FOLDER (a GGUF or a tuned reader), transformers:NAME or openai:MODEL "
        "(default: the model its head was fitted on).",
    )
    read: Literal["passages", "set"] | None = Field(
        default=None,
        description="How the default detector reads a check's documents: passages (each on its own, "
        "the default) or set (the question read once against them all: faster on many pre-read "
        "chunks, ranks a little worse).",
    )
    policy: str = Field(default="clarify", description="Policy for out-of-scope questions.")
    calibration: Path | None = Field(
        default=None,
        description="A calibration profile (scopeguard calibrate's folder, or its profile.json): the "
        "detector's verdicts are labelled by its threshold and hedge band; one made for another "
        "detector stops the start.",
    )
    upstream: str | None = Field(default=None, description="Base URL of the OpenAI-compatible LLM (…/v1).")
    upstream_model: str | None = Field(
        default=None, description="Model name sent upstream (default: the request's)."
    )
    upstream_api_key: SecretStr | None = Field(default=None, description="Key for the upstream LLM.")
    api_key: SecretStr | None = Field(
        default=None, description="Clients must send `Authorization: Bearer KEY`."
    )
    on_error: Literal["fail_closed", "fail_open"] = Field(
        default="fail_closed", description="A failed or undecided check: refuse (fail_closed) or answer."
    )
    deadline: float = Field(
        default=30.0, gt=0, description="Seconds for one request's check and upstream reply."
    )
    stream_idle_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a streamed reply may wait for the upstream's next chunk; then the stream "
        "ends with an error event (stream_idle_timeout).",
    )
    stream_deadline: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a streamed reply may take in all, from the request's arrival; then the "
        "stream ends with an error event (stream_deadline_exceeded).",
    )
    queue_size: int = Field(
        default=1024,
        ge=1,
        description="Most requests held at once, whatever the estimate (a memory guard); more get 429.",
    )
    admission_headroom: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="Admit a request while its expected finish (the work ahead of it at the measured "
        "rate, plus its own) is within this share of the deadline; else 429 at once.",
    )
    workers: int = Field(default=8, ge=1, description="Threads running checks (the reading model has one).")
    max_body_bytes: int = Field(default=2_000_000, ge=1024, description="Largest request body (413 above).")
    max_documents: int = Field(default=64, ge=1, description="Most documents in one request (422 above).")
    max_document_chars: int = Field(default=100_000, ge=1, description="Longest document, in characters.")
    max_batch: int = Field(default=64, ge=1, description="Most items in one /v1/check/batch request.")
    preload: bool = Field(default=True, description="Load the detector's models at start (/readyz waits).")
    speculative: bool = Field(
        default=False,
        description="Start the upstream LLM's answer (the proxy; /v1/answer's own LLM) beside the check and "
        "hold it until the verdict: released in scope, cancelled out of scope or on a failed check. Saves "
        "the check's time on answered requests; dropped answers' tokens are paid for "
        "(scopeguard_speculative_discarded_*).",
    )
    preread: Path | None = Field(
        default=None,
        description="A corpus to pre-read at start (a dataset folder, a JSONL file or a folder of .txt/.md "
        "files, each document as it will be retrieved): read in the background through the reading "
        "queue, between checks, while the server answers; /readyz and /metrics say how far it got.",
    )

    @model_validator(mode="before")
    @classmethod
    def _retired_options(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "retry_after" in data:  # before deadline-aware admission
            logger.warning("retry_after is no longer a setting: a 429's Retry-After is computed; ignored")
            data = {k: v for k, v in data.items() if k != "retry_after"}
        return data

    @model_validator(mode="after")
    def _exposed_needs_key(self) -> ServeConfig:
        if not is_loopback(self.host) and self.api_key is None:
            raise ValueError(
                f"refusing to bind {self.host}: a non-loopback address needs an API key "
                "(--api-key or SCOPEGUARD_API_KEY)"
            )
        if self.policy == "defuse" and self.upstream is None:
            raise ValueError("the defuse policy re-asks the LLM: set --upstream")
        if self.preread is not None and not self.preread.exists():
            raise ValueError(f"the corpus to pre-read, {self.preread}, does not exist")
        return self


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from scopeguard._optional import require

        return require("tomli", extra="serve", feature="a TOML config file")
    return tomllib


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the config file {path}: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else _toml().loads(text)
    except ValueError as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ConfigurationError(
            f"the config file {path} is not valid {path.suffix or 'TOML'}: {exc}"
        ) from None
    section = data.get("serve", data) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise ConfigurationError(f"the config file {path} must hold a table of settings")
    return section


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServeConfig:
    """Defaults, then the file at ``path`` (TOML, or JSON by suffix; a ``[serve]`` table or the top
    level), then ``SCOPEGUARD_<FIELD>`` variables of ``environ`` (default ``os.environ``), then
    ``overrides`` (the command line's options, ``None`` meaning not given)."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = _read_file(Path(path)) if path is not None else {}
    for name in ServeConfig.model_fields:
        if (raw := env.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = raw
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    try:
        return ServeConfig(**values)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigurationError(f"invalid serve configuration: {problems}") from None
