"""Fakes for the calibration tests: an invented corpus, a scripted LLM that writes ELOQ-shaped
questions about each document, and scripted detectors that count their reads (no model, no
dataset text)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scopeguard.detection.detectors import registry as detector_registry
from scopeguard.llm import registry as llm_registry
from scopeguard.testing import ScriptedChatModel, ScriptedDetector, eloq_reply, invented_document

TOPICS = ("ferry", "library", "bridge", "school", "market", "museum")
_TOPIC = re.compile(r"discussed the (\S+) plan")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def calibrate_args(
    corpus: Path,
    out: str | Path,
    *options: str,
    llm: str | None = "calibfake",
    detector: str = "calib-scripted",
) -> list[str]:
    """``scopeguard calibrate CORPUS --out OUT`` with the scripted detector (and LLM) and ``options``."""
    args = ["calibrate", str(corpus), "--out", str(out), "-d", detector, *options]
    return args if llm is None else [*args, "--llm", llm]


_REPHRASE = re.compile(r'^A question about a document: "(.+)"\n')


def rephrased(question: str) -> str:
    """What the scripted writer makes of ``question`` when asked to rephrase it."""
    return "In plain words, " + question[0].lower() + question[1:]


def script(prompt: str) -> str:
    """eloq_reply, with each in-scope question naming its own document's topic (the questions of
    two documents then differ, as real ones do); a rephrasing prompt gets :func:`rephrased`."""
    asked = _REPHRASE.match(prompt)
    if asked:
        return json.dumps({"questions": [rephrased(asked.group(1))]})
    reply = eloq_reply(prompt)
    topic = _TOPIC.search(prompt)
    return reply.replace("Alderby", f"Alderby's {topic.group(1)}") if topic else reply


def is_in_scope_question(question: str) -> bool:
    return "spending plan" in question  # eloq_reply's in-scope questions ask about the plan


def fake_score(question: str) -> float:
    """A detector's P(out of scope): in-scope questions spread over [0.05, 0.55], out-of-scope ones
    over [0.40, 1.00], by a hash of the question (deterministic, overlapping)."""
    u = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return round(0.05 + 0.5 * u, 6) if is_in_scope_question(question) else round(0.40 + 0.6 * u, 6)


class IdentifiedDetector(ScriptedDetector):
    """A scripted detector with an identity (its ``head``), as the default detector has."""

    def __init__(self, script: Callable[[str], Any], *, head: str = "h1", **kw: Any) -> None:
        super().__init__(script, **kw)
        self.head = head

    def identity(self) -> dict[str, str]:
        return {"detector": self.name, "head": self.head}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A documents.jsonl of six invented documents of about 180 words."""
    rows = [{"doc_id": t, "text": invented_document(t), "topic": "council"} for t in TOPICS]
    return write_jsonl(tmp_path / "corpus" / "documents.jsonl", rows)


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> ScriptedChatModel:
    """The scripted LLM, also registered as the spec ``calibfake`` (for the CLI)."""
    model = ScriptedChatModel(script, model="fake-calib")
    monkeypatch.setitem(llm_registry._BACKENDS, "calibfake", lambda arg, **_: model)
    return model


@pytest.fixture
def detector(monkeypatch: pytest.MonkeyPatch) -> IdentifiedDetector:
    """The scripted detector, also registered as ``calib-scripted`` (for the CLI)."""
    det = IdentifiedDetector(fake_score, name="calib-scripted")
    monkeypatch.setitem(detector_registry._DETECTORS, "calib-scripted", lambda **_: det)
    return det


@pytest.fixture
def no_llm(monkeypatch: pytest.MonkeyPatch) -> ScriptedChatModel:
    """An LLM that fails the test if anything asks it to write, registered as ``nollm``."""
    model = ScriptedChatModel(lambda p: AssertionError(f"no generation expected: {p[:80]!r}"), model="no")
    monkeypatch.setitem(llm_registry._BACKENDS, "nollm", lambda arg, **_: model)
    return model
