"""The ``scopeguard generate`` command, and resume after a real SIGKILL of a running generation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.data import load_dataset
from scopeguard.generation import import_eloq
from scopeguard.llm import register_backend
from scopeguard.testing import ScriptedChatModel, eloq_reply, invented_document

HELPER = Path(__file__).with_name("run_fake_generation.py")


def _corpus(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i:02d}.txt").write_text(invented_document(f"plan-{i}"), encoding="utf-8")
    (folder / "tiny.txt").write_text("Too short to use.", encoding="utf-8")
    return folder


def test_cli_generate_prints_a_summary_resumes_and_exports(tmp_path: Path) -> None:
    register_backend("fakecli", lambda arg, **_: ScriptedChatModel(eloq_reply, model="fake-cli"))
    corpus = _corpus(tmp_path / "corpus", 2)
    out = tmp_path / "out"
    args = [
        "generate",
        str(corpus),
        "--out",
        str(out),
        "--llm",
        "fakecli",
        "--mode",
        "efficient",
        "--eloq-export",
        str(tmp_path / "eloq"),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "2 done (2 this run, 0 resumed), 1 skipped" in result.output
    # the skipped one is named with the rule that skipped it and the way to keep it
    assert "1 of 3 documents were skipped (empty, or under --min-words 150" in result.output
    assert "8 out-of-scope kept, 2 filtered, 6 in-scope" in result.output
    assert "2 of 2 done documents have both kinds (0 without an out-of-scope question" in result.output
    assert len(import_eloq(tmp_path / "eloq").questions) == 14
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "0 new + 0 cached this run" in again.output


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["generate", str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--llm", "nosuchbackend"]
    )
    assert result.exit_code == 2 and "unknown LLM spec" in result.output
    register_backend("fakecli2", lambda arg, **_: ScriptedChatModel(eloq_reply))
    result = CliRunner().invoke(
        app,
        [
            "generate",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "o"),
            "--llm",
            "fakecli2",
            "--mode",
            "fast",
        ],
    )
    assert result.exit_code == 2 and "--mode must be" in result.output
    result = CliRunner().invoke(
        app, ["generate", str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--llm", "fakecli2"]
    )
    assert result.exit_code == 2 and "corpus not found" in result.output


def test_cli_a_corpus_whose_every_document_is_skipped_is_an_error(tmp_path: Path) -> None:
    register_backend("fakecli3", lambda arg, **_: ScriptedChatModel(eloq_reply))
    corpus = tmp_path / "snippets"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"s{i}.txt").write_text(f"Snippet {i}: the ferry leaves at nine.", encoding="utf-8")
    args = ["generate", str(corpus), "--out", str(tmp_path / "o"), "--llm", "fakecli3", "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "all 3 documents were skipped" in result.output and "--min-words" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_filter_and_top_up_options_reach_the_run(tmp_path: Path) -> None:
    register_backend("fakecli3", lambda arg, **_: ScriptedChatModel(eloq_reply, model="fake-cli"))
    corpus = _corpus(tmp_path / "corpus", 1)
    out = tmp_path / "out"
    base = ["generate", str(corpus), "--out", str(out), "--llm", "fakecli3"]
    result = CliRunner().invoke(app, [*base, "--filter-with", "lexical", "--min-oos", "0"])
    assert result.exit_code == 0, result.output
    settings = json.loads((out / "run.json").read_text())
    assert settings["filter_with"] == "lexical" and settings["min_oos"] == 0
    # resuming with another filter mixes incomparable questions: refused in one line
    again = CliRunner().invoke(app, [*base, "--filter-with", "judge", "--min-oos", "0"])
    assert again.exit_code == 2 and "filter_with: 'lexical' -> 'judge'" in again.output
    bad = CliRunner().invoke(app, [*base[:3], str(tmp_path / "o2"), *base[4:], "--filter-with", "nope"])
    assert bad.exit_code == 2 and "nope" in bad.output


def test_cli_max_oos_reaches_the_run_and_a_cap_below_the_minimum_is_one_line(tmp_path: Path) -> None:
    register_backend("fakecli5", lambda arg, **_: ScriptedChatModel(eloq_reply, model="fake-cli"))
    corpus = _corpus(tmp_path / "corpus", 1)

    def run(out: str, *options: str) -> tuple[int, str, dict[str, Any]]:
        args = ["generate", str(corpus), "--out", str(tmp_path / out), "--llm", "fakecli5", *options]
        result = CliRunner().invoke(app, args)
        saved = tmp_path / out / "run.json"
        return result.exit_code, result.output, json.loads(saved.read_text()) if saved.exists() else {}

    assert run("default")[2]["max_oos"] == 3
    assert run("none", "--max-oos", "0")[2]["max_oos"] is None
    assert run("five", "--max-oos", "5")[2]["max_oos"] == 5
    assert run("raised", "--min-oos", "4")[2]["max_oos"] == 4  # a larger minimum raises the default cap
    code, output, _ = run("bad", "--min-oos", "4", "--max-oos", "2")
    assert code == 2 and "max_oos (2) is below min_oos (4)" in output
    assert "Traceback" not in output


def test_cli_paper_switches_every_addition_off(tmp_path: Path) -> None:
    register_backend("fakecli4", lambda arg, **_: ScriptedChatModel(eloq_reply, model="fake-cli"))
    corpus = _corpus(tmp_path / "corpus", 1)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["generate", str(corpus), "--out", str(out), "--llm", "fakecli4", "--paper"]
    )
    assert result.exit_code == 0, result.output
    settings = json.loads((out / "run.json").read_text())
    assert settings["filter_with"] == "judge" and settings["min_oos"] == 0 and settings["max_oos"] is None
    assert settings["fallbacks"] == [] and "natural" not in settings["screens"]
    assert settings["n_claims"] == 6 and settings["rounds"] == 3  # the paper's numbers are untouched


def test_sigkill_midway_then_resume_gives_every_document_once(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", 6)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), str(corpus), str(out), "0.03"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    checkpoints = out / ".checkpoints"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(checkpoints.glob("*.json"))) < 2:
        if proc.poll() is not None:
            raise AssertionError(f"helper exited early: {proc.stdout.read().decode() if proc.stdout else ''}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(list(checkpoints.glob("*.json")))
    assert 2 <= done_before < 6, "the kill should land midway"
    cached_before = sum(1 for _ in (out / ".cache" / "replies.jsonl").open())
    rerun = subprocess.run(
        [sys.executable, str(HELPER), str(corpus), str(out), "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"6 done ({6 - done_before} this run, {done_before} resumed)" in rerun.stdout
    ds = load_dataset(out)
    assert sorted(ds.documents) == [f"doc{i:02d}" for i in range(6)]
    ids = [q.id for q in ds.questions]
    assert len(ids) == len(set(ids)) == 6 * (4 + 3)
    assert cached_before > 0
    run = json.loads((out / "run.json").read_text())
    assert run["mode"] == "faithful"


def test_the_packaged_1_5b_writes_when_no_llm_is_named(tmp_path: Path, monkeypatch: Any) -> None:
    """#59 item 1: Generator(), `scopeguard generate` and `scopeguard calibrate` without --llm
    agree on one writer, the packaged 1.5B (the model itself is not loaded here)."""
    import pytest

    from scopeguard.errors import ConfigurationError
    from scopeguard.generation import DEFAULT_WRITER, Generator, pipeline

    asked: list[str] = []

    def stop(spec: Any) -> Any:
        asked.append(spec)
        raise ConfigurationError("stopped before loading")

    monkeypatch.setattr(pipeline, "from_spec", stop)
    with pytest.raises(ConfigurationError):
        Generator()
    corpus = _corpus(tmp_path / "corpus", 2)
    result = CliRunner().invoke(app, ["generate", str(corpus), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "stopped before loading" in result.output
    from scopeguard.calibration import calibrate

    with pytest.raises(ConfigurationError, match="stopped before loading"):
        calibrate(corpus, tmp_path / "cal", detector="lexical", sample=2, min_words=5)
    assert DEFAULT_WRITER == "local:qwen2.5-coder-1.5b"
    assert asked == [DEFAULT_WRITER] * 3
