"""A persistent cache of LLM replies (JSONL append log) and a chat model that records every call.

Each reply is keyed by the prompt, the model name, the sampling settings and an occurrence number
(the k-th identical request in a run gets the k-th cached reply, so repeated sampling stays diverse
and a resumed run replays exactly). Every reply gets a stable id (``r-`` + 12 hex digits) that
provenance records refer to. A kill while appending leaves at most one torn last line, which is
cut off on load (:func:`scopeguard.runs.repair_torn_tail`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from scopeguard.generation.accounting import Usage
from scopeguard.llm._wrapper import WrappedChatModel
from scopeguard.llm.base import ChatModel, Completion, Prompt, SamplingArgs, to_messages
from scopeguard.runs import append_jsonl, repair_torn_tail

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["CachedReply", "RecordingChatModel", "ReplyCache", "SamplingArgs", "UsageLedger"]

logger = logging.getLogger(__name__)

_R = TypeVar("_R", bound="RecordingChatModel")


@dataclass(frozen=True)
class CachedReply:
    id: str
    texts: tuple[str, ...]
    finish_reasons: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int
    cached: bool

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def truncated(self) -> bool:
        """Whether the first reply stopped at the token cap (the one the generator parses)."""
        return bool(self.finish_reasons) and self.finish_reasons[0] == "length"

    @property
    def truncated_count(self) -> int:
        """How many of the replies (samples) stopped at the token cap."""
        return sum(reason == "length" for reason in self.finish_reasons)


class ReplyCache:
    """Replies by key, persisted to ``path`` (a JSONL log); ``path=None`` keeps them in memory only.

    With a path, memory holds only each key's byte offset in the log and a hit reads its line back,
    so a run over many thousands of documents does not keep every reply in memory. A torn last
    line (a killed write) is cut off when the cache is opened, so it is never glued to the next entry.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}  # path=None only
        self._offsets: dict[str, int] = {}
        self._reader: BinaryIO | None = None
        if self.path is not None and self.path.is_file():
            repair_torn_tail(self.path)
            offset = 0
            with self.path.open("rb") as fh:
                for line in fh:
                    try:
                        self._offsets[json.loads(line)["key"]] = offset
                    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                        logger.warning("reply cache %s: ignoring an invalid line", self.path)
                    offset += len(line)

    def __len__(self) -> int:
        return len(self._offsets) if self.path is not None else len(self._entries)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if self.path is None:
                return self._entries.get(key)
            offset = self._offsets.get(key)
            if offset is None:
                return None
            if self._reader is None:
                self._reader = self.path.open("rb")
            self._reader.seek(offset)
            entry: dict[str, Any] = json.loads(self._reader.readline())
            return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        entry = {"key": key, **entry}
        with self._lock:
            if self.path is None:
                self._entries[key] = entry
                return
            offset = append_jsonl(self.path, entry)
            self._offsets[key] = offset

    def close(self) -> None:
        with self._lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None


@dataclass
class UsageLedger:
    """Usage by step and the ids of the replies used, for one document."""

    by_step: dict[str, Usage] = field(default_factory=dict)
    reply_ids: list[str] = field(default_factory=list)

    def add(self, step: str, reply: CachedReply) -> None:
        usage = Usage(
            calls=1,
            cached=int(reply.cached),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            billed_prompt_tokens=0 if reply.cached else reply.prompt_tokens,
            billed_completion_tokens=0 if reply.cached else reply.completion_tokens,
            truncated=reply.truncated_count,
        )
        self.by_step[step] = self.by_step.get(step, Usage()) + usage
        self.reply_ids.append(reply.id)

    @property
    def total(self) -> Usage:
        return Usage.total(self.by_step.values())


def _prompt_json(prompt: Prompt) -> Any:
    return prompt if isinstance(prompt, str) else [m.model_dump() for m in to_messages(prompt)]


class RecordingChatModel(WrappedChatModel):
    """Wraps a :class:`ChatModel`: serves repeated requests from a :class:`ReplyCache` and books
    every call (cached or not) on a :class:`UsageLedger` under ``step``.

    It is itself a ``ChatModel``, so it can be handed to a detector (the judge filter); use
    :meth:`for_step` to get a view booking on another ledger or step.
    """

    def __init__(
        self,
        llm: ChatModel,
        cache: ReplyCache,
        ledger: UsageLedger | None = None,
        *,
        step: str = "llm",
        _occurrences: Counter[str] | None = None,
        _lock: threading.Lock | None = None,
    ) -> None:
        self.llm = llm
        self.cache = cache
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.step = step
        self._occurrences: Counter[str] = _occurrences if _occurrences is not None else Counter()
        self._lock = _lock or threading.Lock()

    def for_step(self: _R, step: str, ledger: UsageLedger | None = None) -> _R:
        return self._view(self.llm, ledger if ledger is not None else self.ledger, step)

    def constrained(self: _R, schema: Mapping[str, Any]) -> _R:
        """A view whose replies follow the JSON ``schema`` where the backend can hold them to it
        (llama.cpp; see :func:`scopeguard.llm._json_schema.with_json_schema`), on the same cache,
        ledger and step. The schema is part of the cache key (through the wrapped model's name)."""
        from scopeguard.llm._json_schema import with_json_schema

        return self._view(with_json_schema(self.llm, schema), self.ledger, self.step)

    def sharing(self: _R, llm: ChatModel, *, step: str = "llm") -> _R:
        """A recording wrapper of another model (a judge) sharing this one's cache and occurrence count.

        Both count identical requests together, so a resumed run replays the same reply to each.
        """
        return self._view(llm, UsageLedger(), step)

    def _view(self: _R, llm: ChatModel, ledger: UsageLedger, step: str) -> _R:
        """A copy of this wrapper (of the same class, sharing its cache, occurrence count and lock)
        around ``llm``, booking on ``ledger`` under ``step``."""
        view = copy.copy(self)
        view.llm, view.ledger, view.step = llm, ledger, step
        return view

    def _on_miss(self, key: str, prompt: Prompt, sampling: dict[str, Any]) -> None:
        """Called when the cache cannot answer a request (``key``), before it goes to the wrapped
        model. Nothing here; a subclass may raise to stop the request there instead
        (:class:`scopeguard.generation.batch.DeferringChatModel` notes it for a Batch API job)."""

    def _key(
        self, prompt: Prompt, n: int, temperature: float, max_tokens: int | None, seed: int | None
    ) -> str:
        material = json.dumps(
            [self.llm.name, _prompt_json(prompt), n, temperature, max_tokens, seed], ensure_ascii=False
        )
        base = hashlib.sha256(material.encode("utf-8")).hexdigest()
        with self._lock:
            self._occurrences[base] += 1
            occurrence = self._occurrences[base]
        return hashlib.sha256(f"{base}:{occurrence}".encode()).hexdigest()

    def _book(
        self, key: str, completion: Completion | None, entry: dict[str, Any] | None = None
    ) -> CachedReply:
        if entry is not None:
            # a reply a Batch API job fetched (scopeguard.generation.batch) was paid for: booked as
            # new on the document that uses it
            cached = not entry.get("batch")
        elif completion is not None:
            entry = {
                "id": "r-" + key[:12],
                "model": completion.model or self.llm.name,
                "texts": list(completion.texts),
                "finish_reasons": list(completion.finish_reasons),
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
            }
            self.cache.put(key, entry)
            cached = False
        else:
            raise ValueError("either a completion or a cached entry is needed")
        reply = CachedReply(
            id=entry["id"],
            texts=tuple(entry["texts"]),
            finish_reasons=tuple(entry.get("finish_reasons", ())),
            prompt_tokens=int(entry.get("prompt_tokens", 0)),
            completion_tokens=int(entry.get("completion_tokens", 0)),
            cached=cached,
        )
        self.ledger.add(self.step, reply)
        return reply

    def _lookup(self, prompt: Prompt, args: SamplingArgs) -> tuple[str, CachedReply | None, dict[str, Any]]:
        """The request's cache key, its reply where the cache has one (booked), and the sampling
        settings to send it with otherwise (after :meth:`_on_miss`); shared by :meth:`call` and
        :meth:`acall`."""
        sampling: dict[str, Any] = {
            "n": args.get("n", 1),
            "temperature": args.get("temperature", 0.0),
            "max_tokens": args.get("max_tokens"),
            "seed": args.get("seed"),
        }
        key = self._key(prompt, **sampling)
        hit = self.cache.get(key)
        if hit is not None:
            return key, self._book(key, None, hit), {}
        self._on_miss(key, prompt, sampling)
        return key, None, sampling

    @staticmethod
    def _completion(reply: CachedReply, model: str) -> Completion:
        return Completion(
            texts=reply.texts,
            model=model,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            finish_reasons=reply.finish_reasons,
            requests=0 if reply.cached else 1,
        )

    def call(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> CachedReply:
        """The reply to ``prompt``: the cached one where this request was made before (the k-th
        identical request gets the k-th reply), else the wrapped model's, cached and booked."""
        key, reply, send = self._lookup(prompt, sampling)
        return reply if reply is not None else self._book(key, self.llm.complete(prompt, **send))

    async def acall(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> CachedReply:
        """:meth:`call`, awaiting the wrapped model."""
        key, reply, send = self._lookup(prompt, sampling)
        return reply if reply is not None else self._book(key, await self.llm.acomplete(prompt, **send))

    def complete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        return self._completion(self.call(prompt, **sampling), self.llm.name)

    async def acomplete(self, prompt: Prompt, **sampling: Unpack[SamplingArgs]) -> Completion:
        return self._completion(await self.acall(prompt, **sampling), self.llm.name)
