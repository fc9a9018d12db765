"""``scopeguard preread``: a corpus read ahead of the questions, states kept on disk (real SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli._app import app

runner = CliRunner()

DOCS = [
    {
        "id": "lib",
        "text": "The town of Brindlewick opened a new public library on Saturday. It holds 40,000 books.",
    },
    {
        "id": "ferry",
        "text": "A storm closed the harbour of Kessling for two days and delayed the island ferry.",
    },
]


def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


@pytest.mark.slow
@pytest.mark.integration
def test_preread_writes_one_state_per_document(tmp_path: Path, smollm2: Path) -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    states = tmp_path / "states"
    args = ["preread", str(corpus(tmp_path)), "--detector", "logprob", "--reader", f"local:{smollm2}"]
    res = runner.invoke(app, [*args, "--state-dir", str(states), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert f"pre-read 2 passages of 2 documents into {states}" in res.output
    assert len(list(states.iterdir())) == 3  # the instruction's state and one per document
    again = runner.invoke(app, [*args, "--state-dir", str(states), "--no-progress"])
    assert again.exit_code == 0 and len(list(states.iterdir())) == 3  # found, not written twice


def test_preread_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    res = runner.invoke(app, ["preread", str(corpus(tmp_path)), "--detector", "fast"])
    assert res.exit_code == 2 and "--detector must be default or logprob" in res.output
    res = runner.invoke(app, ["preread", str(tmp_path / "missing"), "--detector", "logprob"])
    assert res.exit_code == 2 and "missing" in res.output
    res = runner.invoke(
        app,
        [
            "preread",
            str(corpus(tmp_path)),
            "--detector",
            "logprob",
            "--reader",
            "openai:gpt-4o-mini",
            "--state-dir",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 2 and "--state-dir applies to llama.cpp readers" in res.output
    res = runner.invoke(app, ["preread", str(corpus(tmp_path)), "--llm", "local"])  # the old name
    assert res.exit_code == 2 and "--reader SPEC, not --llm" in res.output
