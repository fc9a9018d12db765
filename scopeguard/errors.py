"""Every error scopeguard raises.

Hierarchy::

    ScopeGuardError
    ├── ConfigurationError          bad argument, unknown registry name, bad spec string
    │   └── MissingDependencyError  an optional extra is not installed (names the pip line)
    ├── InputError                  empty question, no documents, unreadable/missing file
    │   ├── DatasetError            malformed dataset folder or record
    │   └── DocumentTooLongError    a document does not fit the model's window
    ├── ModelError                  model weights missing, checksum mismatch, corrupt head
    ├── LLMError                    an LLM call failed
    │   ├── LLMConnectionError      endpoint unreachable / refused
    │   │   └── LLMTimeoutError     endpoint timed out, or the call's deadline ran out
    │   ├── LLMAuthError            the endpoint refused the credentials (401 / 403)
    │   ├── LLMRateLimitError       the endpoint still said 429 after the retries
    │   ├── LLMResponseError        a malformed reply (not JSON, no choices or content), or one
    │   │                           that could not be parsed into what was asked
    │   └── BatchError              a Batch API job ended failed, expired or cancelled
    └── DetectionError              a detector could not produce a verdict

Every class has a ``kind``, one word of :data:`ErrorKind` (``timeout``, ``upstream``, ``auth``,
``rate_limited``, ``bad_reply``, ``too_long``, ``bad_input``, ``config``, ``model``, ``detector``,
``internal``): the error vocabulary a failed-closed verdict (``Verdict.error_kind``), the service's
error bodies, the CLI's JSON and the integrations' metadata report. :func:`error_kind` names any
exception's kind (``internal`` for one scopeguard did not raise).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import ClassVar, Literal

ErrorKind = Literal[
    "timeout",
    "upstream",
    "auth",
    "rate_limited",
    "bad_reply",
    "too_long",
    "bad_input",
    "config",
    "model",
    "detector",
    "internal",
]

__all__ = [
    "BatchError",
    "ConfigurationError",
    "DatasetError",
    "DetectionError",
    "DocumentTooLongError",
    "ErrorKind",
    "InputError",
    "LLMAuthError",
    "LLMConnectionError",
    "LLMError",
    "LLMRateLimitError",
    "LLMResponseError",
    "LLMTimeoutError",
    "MissingDependencyError",
    "ModelError",
    "ScopeGuardError",
    "error_kind",
    "unknown_options_message",
]


class ScopeGuardError(Exception):
    """Root of every error raised by scopeguard."""

    #: the error's word in the one vocabulary (see the module docstring)
    kind: ClassVar[ErrorKind] = "internal"


class ConfigurationError(ScopeGuardError, ValueError):
    """An argument, registry name or spec string is invalid."""

    kind: ClassVar[ErrorKind] = "config"


class MissingDependencyError(ConfigurationError, ImportError):
    """An optional dependency is missing; the message names the ``pip install`` line."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        self.package = package
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs the '{package}' package, which is not installed. "
            f"Install it with: pip install 'scopeguard[{extra}]'"
        )


class InputError(ScopeGuardError, ValueError):
    """User input (question, documents, files) is unusable."""

    kind: ClassVar[ErrorKind] = "bad_input"


class DatasetError(InputError):
    """A dataset folder or one of its records is malformed."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}: " if path and line else (f"{path}: " if path else "")
        super().__init__(where + message)


class DocumentTooLongError(InputError):
    """A document does not fit in the model's context window."""

    kind: ClassVar[ErrorKind] = "too_long"

    def __init__(self, message: str, *, n_tokens: int, limit: int) -> None:
        self.n_tokens = n_tokens
        self.limit = limit
        super().__init__(message)


class ModelError(ScopeGuardError):
    """Model weights or a trained head could not be found, verified or loaded."""

    kind: ClassVar[ErrorKind] = "model"


class LLMError(ScopeGuardError):
    """An LLM call failed."""

    kind: ClassVar[ErrorKind] = "upstream"


class LLMConnectionError(LLMError):
    """The LLM endpoint could not be reached (refused, DNS, timeout) after retries."""

    def __init__(self, message: str, *, endpoint: str | None = None) -> None:
        self.endpoint = endpoint
        super().__init__(message)


class LLMTimeoutError(LLMConnectionError):
    """The LLM endpoint did not answer in time: every attempt timed out, or the deadline of the
    call (``deadline`` seconds, all retries and waits included) ran out."""

    kind: ClassVar[ErrorKind] = "timeout"

    def __init__(self, message: str, *, endpoint: str | None = None, deadline: float | None = None) -> None:
        self.deadline = deadline
        super().__init__(message, endpoint=endpoint)


class LLMAuthError(LLMError):
    """The LLM endpoint refused the credentials (HTTP 401 or 403)."""

    kind: ClassVar[ErrorKind] = "auth"


class LLMRateLimitError(LLMError):
    """The LLM endpoint kept answering 429 (too many requests) after every retry."""

    kind: ClassVar[ErrorKind] = "rate_limited"


class LLMResponseError(LLMError):
    """An LLM reply was malformed (not a chat completion, no choices, no content) or could not be
    parsed into the expected structure. ``reply`` holds (the start of) the offending reply."""

    kind: ClassVar[ErrorKind] = "bad_reply"

    def __init__(self, message: str, *, reply: str | None = None) -> None:
        self.reply = reply
        super().__init__(message)


class BatchError(LLMError):
    """A Batch API job ended without its results (``failed``, ``expired``, ``cancelled``).

    ``batch_id`` and ``status`` name the job; ``state_path`` is the run folder's record of it
    (a re-run on the same folder submits what is still missing as a new job).
    """

    def __init__(
        self,
        message: str,
        *,
        batch_id: str | None = None,
        status: str | None = None,
        state_path: str | None = None,
    ) -> None:
        self.batch_id = batch_id
        self.status = status
        self.state_path = state_path
        super().__init__(message)


class DetectionError(ScopeGuardError):
    """A detector failed to produce a verdict."""

    kind: ClassVar[ErrorKind] = "detector"


def error_kind(exc: BaseException) -> ErrorKind:
    """The :data:`ErrorKind` of ``exc``: a scopeguard error's own, ``timeout`` for Python's
    timeouts, ``internal`` for anything else."""
    if isinstance(exc, ScopeGuardError):
        return exc.kind
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "internal"


def unknown_options_message(owner: str, unknown: Iterable[str], valid: Iterable[str]) -> str:
    """One line: the unknown options (each with its closest valid option, where one is close) and
    the valid ones."""
    choices = sorted(valid)
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, choices, n=1)
        named.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    what = "an unknown option" if len(named) == 1 else "unknown options"
    return f"{owner} got {what} {', '.join(named)}; valid options: {', '.join(choices)}"
