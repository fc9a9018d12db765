"""Test helpers shipped with scopeguard, for our tests and for users' own.

:class:`ScriptedChatModel` replays scripted replies (or raises scripted errors) and records
every prompt it was given, so parsing and control flow can be tested without an LLM;
:class:`StreamingScriptedChatModel` also streams each reply word by word, and
:class:`EloqChatModel` answers every prompt of the ELOQ generator (:func:`eloq_reply`).
:class:`ScriptedVerdictScorer` does the same for log-prob verdicts (scripted margins), and
:class:`ScriptedPrefixScorer` keeps what it read as llama.cpp does (for pre-reading).
:class:`FakeOpenAIServer` serves chat completions, files and the Batch API on 127.0.0.1;
:func:`packaged_llama_server` runs a real llama.cpp server with a packaged model for a test;
:func:`running_guard_server` runs ``scopeguard serve`` (uvicorn) in a thread on a free port.
:func:`calibration_profile` makes a calibration profile without calibrating (for ``Guard(calibration=...)``).
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from scopeguard._fake_openai import FakeOpenAIServer
from scopeguard._scripted_llm import (
    EloqChatModel,
    RecordedCall,
    ScriptedChatModel,
    StreamingScriptedChatModel,
    eloq_reply,
    invented_document,
)
from scopeguard._test_servers import packaged_llama_server, running_guard_server
from scopeguard.detection.detectors.base import BaseDetector, Detector
from scopeguard.detection.profile import CalibrationProfile, detector_identity, rate
from scopeguard.detection.read.base import VerdictScore
from scopeguard.detection.read.llama_states import KeptStateStats, saved_states_summary
from scopeguard.detection.read.reader import question_cut
from scopeguard.errors import ConfigurationError
from scopeguard.llm.base import ChatMessage
from scopeguard.retrieval.base import Hit
from scopeguard.types import Document, Label, Verdict

__all__ = [
    "EloqChatModel",
    "FakeOpenAIServer",
    "InMemoryRetriever",
    "RecordedCall",
    "ScriptedChatModel",
    "ScriptedDetector",
    "ScriptedPrefixScorer",
    "ScriptedVerdictScorer",
    "StreamingScriptedChatModel",
    "calibration_profile",
    "eloq_reply",
    "invented_document",
    "packaged_llama_server",
    "running_guard_server",
]


class ScriptedVerdictScorer:
    """A :class:`~scopeguard.detection.read.VerdictScorer` whose margins are scripted.

    ``margin(prompt_text) -> float`` returns log P(No) - log P(Yes) for the rendered prompt (the
    user message); every prompt is recorded in ``prompts``. Token counts are words.
    ``hidden(prompt_text) -> vector``, if given, is the hidden state returned with every score
    (as the one layer ``layers[0]``), as a llama.cpp scorer built with ``layers=`` returns it.
    """

    def __init__(
        self,
        margin: Callable[[str], float],
        *,
        name: str = "scripted-verdicts",
        hidden: Callable[[str], Sequence[float]] | None = None,
        layer: int = 1,
    ) -> None:
        self._margin = margin
        self._name = name
        self._hidden = hidden
        self.layers: tuple[int, ...] = (layer,) if hidden is not None else ()
        self.prompts: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        text = "\n".join(m.content for m in messages)
        self.prompts.append(text)
        m = float(self._margin(text))
        # split the margin symmetrically: P(Yes) + P(No) = 1
        p_no = 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, m))))
        hidden = None
        if self._hidden is not None:
            hidden = np.atleast_2d(np.asarray(self._hidden(text), dtype=np.float32))
        return VerdictScore(
            logp_yes=math.log(max(1e-300, 1 - p_no)), logp_no=math.log(max(1e-300, p_no)), hidden=hidden
        )

    def score_many(
        self, prompts: Sequence[Sequence[ChatMessage]], *, progress: bool | None = None
    ) -> list[VerdictScore]:
        return [self.score(p) for p in prompts]


class ScriptedPrefixScorer(ScriptedVerdictScorer):
    """A :class:`ScriptedVerdictScorer` that keeps what it read, as the llama.cpp scorer does, so that
    pre-reading (``Guard.preread``, ``detector.preread``) can be tested without a model.

    A prompt's text before its question (the instruction and the document) is *read* the first
    time a ``score`` or a ``prime`` needs it: that takes ``read_seconds`` and is recorded in
    ``reads``; after that it is kept and costs nothing. One lock serialises ``score`` and ``prime``
    (llama.cpp is not re-entrant). ``prime(messages, upto=..., create=False)`` only looks up, and
    counts the lookup (and a hit when the prefix is kept) in :meth:`state_stats`, whose ``saved``
    figures are those of ``state_dir``'s state files, if given.
    """

    def __init__(
        self,
        margin: Callable[[str], float],
        *,
        read_seconds: float = 0.0,
        name: str = "scripted-prefix-verdicts",
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(margin, name=name)
        self.read_seconds = read_seconds
        self.state_dir = None if state_dir is None else Path(state_dir)
        #: the prefixes read, in order (each once)
        self.reads: list[str] = []
        self._kept: set[str] = set()
        self._model = threading.Lock()
        self._lookups = self._hits = 0

    def state_stats(self) -> KeptStateStats:
        """The lookups and hits so far, as :meth:`LlamaCppVerdicts.state_stats` reports them."""
        saved = None if self.state_dir is None else saved_states_summary(self.state_dir)
        return KeptStateStats(
            kv_type="f16",
            lookups=self._lookups,
            hits=self._hits,
            memory_states=len(self._kept),
            memory_bytes=0,
            directory=self.state_dir,
            saved=saved,
        )

    def _read(self, prefix: str) -> None:
        if prefix not in self._kept:  # called with the lock held
            time.sleep(self.read_seconds)
            self._kept.add(prefix)
            self.reads.append(prefix)

    def score(self, messages: Sequence[ChatMessage]) -> VerdictScore:
        text = "\n".join(m.content for m in messages)
        cut = question_cut(text)
        with self._model:
            self._read(text if cut is None else text[:cut])
            return super().score(messages)

    def prime(self, messages: Sequence[ChatMessage], *, upto: str, create: bool = True) -> int:
        """Read the prompt's text before ``upto`` and keep it; its length in words (0: ``upto`` is
        not in the prompt, or ``create`` is false and it was not kept)."""
        text = "\n".join(m.content for m in messages)
        if upto not in text:
            return 0
        prefix = text.split(upto, 1)[0]
        with self._model:
            if not create:
                self._lookups += 1
                self._hits += prefix in self._kept
                if prefix not in self._kept:
                    return 0
            self._read(prefix)
        return self.count_tokens(prefix)


# --- calibration profiles ---------------------------------------------------------------------


@overload
def calibration_profile(
    detector: str | Detector = ...,
    *,
    identity: Mapping[str, str] | None = ...,
    threshold: float = ...,
    hedge_from: float | None = ...,
    budget: float = ...,
    folder: None = ...,
) -> CalibrationProfile: ...


@overload
def calibration_profile(
    detector: str | Detector = ...,
    *,
    identity: Mapping[str, str] | None = ...,
    threshold: float = ...,
    hedge_from: float | None = ...,
    budget: float = ...,
    folder: str | os.PathLike[str],
) -> Path: ...


def calibration_profile(
    detector: str | Detector = "scripted",
    *,
    identity: Mapping[str, str] | None = None,
    threshold: float = 0.6,
    hedge_from: float | None = 0.4,
    budget: float = 0.1,
    folder: str | os.PathLike[str] | None = None,
) -> CalibrationProfile | Path:
    """A :class:`~scopeguard.detection.profile.CalibrationProfile` made without calibrating.

    ``detector`` is a detector's name (identity ``{"detector": name}``) or a detector (its name and
    :func:`~scopeguard.detection.profile.detector_identity`); ``identity`` replaces that identity.
    Scores at or above ``threshold`` are out of scope, those in ``[hedge_from, threshold)`` are
    hedged (``hedge_from=None``: no hedge band). The expected rates are plausible placeholders:
    2 false refusals and 30 caught, each of 40 questions. With ``folder`` the profile is saved
    there (``folder/profile.json``) and the folder is returned, ready for
    ``Guard(calibration=folder)`` or ``--calibration folder``.
    """
    name = detector if isinstance(detector, str) else str(detector.name)
    if identity is None:
        identity = {"detector": name} if isinstance(detector, str) else detector_identity(detector)
    profile = CalibrationProfile(
        detector=name,
        identity=dict(identity),
        threshold=threshold,
        hedge_from=hedge_from,
        budget=budget,
        false_refusals=rate(2, 40),
        caught=rate(30, 40),
    )
    if folder is None:
        return profile
    return profile.save(folder).parent


# --- detectors and retrievers ------------------------------------------------------------------

VerdictReply = Verdict | Label | float | None | BaseException
VerdictScript = Mapping[str, VerdictReply] | Iterable[VerdictReply] | Callable[[str], VerdictReply]


class ScriptedDetector(BaseDetector):
    """A :class:`~scopeguard.detection.detectors.Detector` whose verdicts are scripted.

    ``script`` is a mapping ``question -> reply``, a sequence of replies consumed in order, or a
    callable ``question -> reply``. A reply is a :class:`~scopeguard.types.Verdict` (returned as
    is), a label (``"in_scope"``, ``"out_of_scope"``, ``"unknown"``), a score (``>= threshold``
    is out of scope), ``None`` (an ``unknown`` verdict) or an exception instance (raised). Verdicts
    built from a label or score carry ``uncovered`` and ``llm_calls``, and a rationale that starts
    with ``"<name> says"``. Every question asked is recorded in ``questions``; a question missing
    from the mapping, or a sequence that runs out, raises :class:`ConfigurationError`.
    """

    def __init__(
        self,
        script: VerdictScript,
        *,
        name: str = "scripted",
        threshold: float = 0.5,
        uncovered: tuple[str, ...] = (),
        llm_calls: int = 0,
    ) -> None:
        self.name = name
        self.threshold = threshold
        self.uncovered = uncovered
        self.llm_calls = llm_calls
        self.questions: list[str] = []
        self._lock = threading.Lock()
        self._map: Mapping[str, VerdictReply] | None = None
        self._fn: Callable[[str], VerdictReply] | None = None
        self._queue: list[VerdictReply] = []
        if isinstance(script, Mapping):
            self._map = script
        elif callable(script):
            self._fn = script
        else:
            self._queue = list(script)

    @property
    def calls(self) -> int:
        """How many questions the detector was asked."""
        return len(self.questions)

    def _reply(self, question: str) -> VerdictReply:
        with self._lock:
            self.questions.append(question)
            if self._fn is not None:
                return self._fn(question)
            if self._map is not None:
                if question not in self._map:
                    raise ConfigurationError(f"ScriptedDetector has no verdict scripted for {question!r}")
                return self._map[question]
            if not self._queue:
                raise ConfigurationError("ScriptedDetector ran out of scripted verdicts")
            return self._queue.pop(0)

    def _detect(self, question: str, documents: Sequence[Document]) -> Verdict:
        reply = self._reply(question)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, Verdict):
            return reply
        if reply is None or reply == "unknown":
            return Verdict(label="unknown", rationale=f"{self.name} says nothing (scripted)")
        if isinstance(reply, str):
            label: Label = reply
            score = None
        else:
            score = float(reply)
            label = "out_of_scope" if score >= self.threshold else "in_scope"
        return Verdict(
            label=label,
            score=score,
            rationale=f"{self.name} says {label} (scripted)",
            uncovered=self.uncovered,
            llm_calls=self.llm_calls,
        )


def _terms(text: str) -> set[str]:
    return {t for t in re.findall(r"\w+", text.lower()) if len(t) > 2}


class InMemoryRetriever:
    """A tiny :class:`~scopeguard.retrieval.Retriever` over documents held in memory.

    Ranks documents by the number of distinct query words (3+ letters, case-folded) they share,
    ties in index order; a document sharing no word is not a hit. Indexed documents are in
    ``docs``, every query searched in ``queries``. No extras needed.
    """

    def __init__(self, name: str = "in-memory") -> None:
        self._name = name
        self.docs: list[Document] = []
        self.queries: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    def index(self, documents: Sequence[Document]) -> None:
        self.docs = list(documents)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        self.queries.append(query)
        q = _terms(query)
        scored = [(len(q & _terms(d.text)), i, d) for i, d in enumerate(self.docs)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        return [Hit(document=d, score=float(s), rank=r) for r, (s, _, d) in enumerate(ranked, 1)]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]
