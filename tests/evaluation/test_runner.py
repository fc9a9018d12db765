"""The evaluation loop: records, resume after a kill, errors, pipelines, CLI."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.data import load_dataset
from scopeguard.errors import ConfigurationError, LLMResponseError
from scopeguard.evaluation import (
    DefusionJudge,
    PromptAnswerer,
    RefusalJudge,
    RunStore,
    evaluate,
    run_evaluation,
    select_questions,
)
from scopeguard.testing import ScriptedChatModel

from .conftest import DEFUSING, scripted_system


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_select_questions_alternates_labels_and_topics(tiny_dataset: Path) -> None:
    ds = load_dataset(tiny_dataset)
    picked = select_questions(ds, 4)
    assert [q.label for q in picked] == ["out_of_scope", "in_scope", "out_of_scope", "in_scope"]
    assert {ds.topic(q) for q in picked[:2]} == {"food"} and {ds.topic(q) for q in picked[2:]} == {"sport"}
    assert [q.id for q in select_questions(ds, 2)] == [q.id for q in picked[:2]]
    with pytest.raises(ConfigurationError):
        select_questions(ds, 0)


def test_evaluate_stores_every_response_vote_and_label(tiny_dataset: Path, tmp_path: Path) -> None:
    llm = ScriptedChatModel(scripted_system())
    out = tmp_path / "run"
    report = evaluate(tiny_dataset, rag=llm, judge=llm, out=out, progress=False, plots=False)
    rows = _lines(out / "responses.jsonl")
    assert len(rows) == 12 and {(r["question_id"], r["prompt"]) for r in rows} == {
        (q, p) for q in ("s_in", "s_oos", "f_in", "f_oos") for p in ("basic", "two-shot", "zero-shot-cot")
    }
    oos = [r for r in rows if r["label"] == "out_of_scope"]
    assert all(r["defusion"]["samples"] and r["refusal"] is None for r in oos)
    cot = [r for r in oos if r["prompt"] == "zero-shot-cot"]
    assert all(r["response"] == DEFUSING and r["defusion"]["value"] is True for r in cot)
    # numbers follow from the records
    assert report.prompt("zero-shot-cot").defusion.rate == 1.0
    assert report.prompt("basic").defusion.rate == 0.0
    assert report.prompt("zero-shot-cot").false_refusal.rate == 1.0
    assert report.best_prompt == "zero-shot-cot" and report.best_balanced_prompt in ("basic", "two-shot")
    for name in (
        "report.md",
        "summary.txt",
        "metrics.json",
        "defusion_by_topic.csv",
        "false_refusal_by_topic.csv",
    ):
        assert (out / name).is_file(), name


def test_rerun_resumes_without_new_calls_or_duplicates(tiny_dataset: Path, tmp_path: Path) -> None:
    llm = ScriptedChatModel(scripted_system())
    out = tmp_path / "run"
    evaluate(tiny_dataset, rag=llm, judge=llm, out=out, prompts=["basic"], progress=False, plots=False)
    calls = len(llm.calls)
    evaluate(tiny_dataset, rag=llm, judge=llm, out=out, prompts=["basic"], progress=False, plots=False)
    assert len(llm.calls) == calls
    assert len(_lines(out / "responses.jsonl")) == 4


def test_kill_mid_write_loses_only_the_torn_record(tiny_dataset: Path, tmp_path: Path) -> None:
    llm = ScriptedChatModel(scripted_system())
    out = tmp_path / "run"
    evaluate(tiny_dataset, rag=llm, judge=llm, out=out, prompts=["basic"], progress=False, plots=False)
    path = out / "responses.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]) + lines[2][:40])  # two records kept, the third torn by a kill
    fresh = ScriptedChatModel(scripted_system())
    evaluate(tiny_dataset, rag=fresh, judge=fresh, out=out, prompts=["basic"], progress=False, plots=False)
    rows = _lines(path)
    assert len(rows) == 4 and len({r["question_id"] for r in rows}) == 4
    answered = [c for c in fresh.calls if c.temperature == 0.0]  # RAG answers are greedy, judge votes not
    assert len(answered) == 2  # only the two missing questions were answered again


def test_adding_a_prompt_extends_the_run(tiny_dataset: Path, tmp_path: Path) -> None:
    llm = ScriptedChatModel(scripted_system())
    out = tmp_path / "run"
    evaluate(tiny_dataset, rag=llm, judge=llm, out=out, prompts=["basic"], progress=False, plots=False)
    report = evaluate(
        tiny_dataset, rag=llm, judge=llm, out=out, prompts=["two-shot"], progress=False, plots=False
    )
    assert [p.prompt for p in report.prompts] == ["basic", "two-shot"]


def test_resume_with_other_settings_is_refused(tiny_dataset: Path, tmp_path: Path) -> None:
    llm = ScriptedChatModel(scripted_system())
    out = tmp_path / "run"
    evaluate(
        tiny_dataset, rag=llm, judge=llm, out=out, prompts=["basic"], limit=2, progress=False, plots=False
    )
    with pytest.raises(ConfigurationError, match="votes: 3 -> 5"):
        evaluate(tiny_dataset, rag=llm, judge=llm, out=out, votes=5, limit=2, progress=False, plots=False)


def test_failed_steps_are_recorded_and_retried_on_resume(tiny_dataset: Path, tmp_path: Path) -> None:
    def flaky(prompt: str) -> str | BaseException:
        if "Which sponsor" in prompt and "confusing and unanswerable" not in prompt:
            return LLMResponseError("server returned garbage")
        return scripted_system()(prompt)

    llm = ScriptedChatModel(flaky)
    out = tmp_path / "run"
    report = evaluate(
        tiny_dataset, rag=llm, judge=llm, out=out, prompts=["basic"], progress=False, plots=False
    )
    assert report.prompt("basic").defusion.errors == 1 and report.prompt("basic").defusion.n == 1
    good = ScriptedChatModel(scripted_system())
    report = evaluate(
        tiny_dataset, rag=good, judge=good, out=out, prompts=["basic"], progress=False, plots=False
    )
    assert report.prompt("basic").defusion.errors == 0 and report.prompt("basic").defusion.n == 2
    assert len(RunStore(out).responses()) == 4


def test_capped_responses_are_recorded_and_counted_in_the_report(tiny_dataset: Path, tmp_path: Path) -> None:
    # every scripted RAG response is longer than 12 words, every judge reply shorter
    llm = ScriptedChatModel(scripted_system(), truncate=True)
    out = tmp_path / "run"
    report = evaluate(
        tiny_dataset,
        rag=llm,
        judge=llm,
        out=out,
        prompts=["basic"],
        max_tokens=12,
        progress=False,
        plots=False,
    )
    assert [r["truncated"] for r in _lines(out / "responses.jsonl")] == [True] * 4
    assert report.prompt("basic").truncated_responses == 4
    assert report.prompt("basic").truncated_judge_replies == 0
    assert "4 RAG responses hit the reply cap (max_tokens)." in report.summary
    assert json.loads((out / "metrics.json").read_text())["prompts"][0]["truncated_responses"] == 4

    uncapped = evaluate(
        tiny_dataset,
        rag=llm,
        judge=llm,
        out=tmp_path / "uncapped",
        prompts=["basic"],
        max_tokens=None,
        progress=False,
        plots=False,
    )
    assert uncapped.prompt("basic").truncated_responses == 0 and "reply cap" not in uncapped.summary


def test_user_pipeline_and_detector(tiny_dataset: Path, tmp_path: Path) -> None:
    judge_llm = ScriptedChatModel(scripted_system())
    report = evaluate(
        tiny_dataset,
        rag=lambda question, docs: DEFUSING,
        judge=judge_llm,
        detector="lexical",
        out=tmp_path / "run",
        progress=False,
        plots=False,
    )
    assert [p.prompt for p in report.prompts] == ["pipeline"]
    assert report.prompt("pipeline").defusion.rate == 1.0
    assert report.detection is not None and report.detection["n"] == 4
    assert report.confusion is not None
    assert sum(sum(row.values()) for row in report.confusion.values()) == 4


def test_run_evaluation_rejects_duplicate_answerer_names(tiny_dataset: Path, tmp_path: Path) -> None:
    llm = ScriptedChatModel(scripted_system())
    with pytest.raises(ConfigurationError, match="unique"):
        run_evaluation(
            tiny_dataset,
            [PromptAnswerer(llm, "basic"), PromptAnswerer(llm, "basic")],
            out=tmp_path / "run",
            defusion_judge=DefusionJudge(llm),
            refusal_judge=RefusalJudge(llm),
        )


@pytest.fixture()
def scripted_backend() -> object:
    from scopeguard.llm import registry

    registry.register_backend("scripted", lambda arg, **kw: ScriptedChatModel(scripted_system()))
    yield
    registry._BACKENDS.pop("scripted", None)


@pytest.mark.usefixtures("scripted_backend")
def test_cli_evaluate_resume_and_compare(tiny_dataset: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from scopeguard.cli._app import app

    runner = CliRunner()
    base = [
        "evaluate",
        str(tiny_dataset),
        "--rag-llm",
        "scripted",
        "--judge-llm",
        "scripted",
        "--no-progress",
    ]
    a = runner.invoke(app, [*base, "--prompt", "basic", "--out", str(tmp_path / "a")])
    assert a.exit_code == 0, a.output
    assert "Best prompt (defusion): basic" in a.output
    b = runner.invoke(
        app, [*base, "--prompt", "basic", "--prompt", "zero-shot-cot", "--out", str(tmp_path / "b")]
    )
    assert b.exit_code == 0, b.output
    for png in ("defusion_by_topic.png",):
        assert (tmp_path / "b" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = runner.invoke(app, [*base, "--prompt", "basic", "--out", str(tmp_path / "a")])
    assert again.exit_code == 0 and len(_lines(tmp_path / "a" / "responses.jsonl")) == 4

    cmp = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert cmp.exit_code == 0, cmp.output
    assert "| basic | defusion rate | 0.00 | 0.00 | +0.00 | 2 | 2 |" in cmp.output
    assert "zero-shot-cot" not in cmp.output  # paired: only what both runs share
    unpaired = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--unpaired"])
    assert "| zero-shot-cot | defusion rate | n/a | 100.00 | n/a | 0 | 2 |" in unpaired.output


@pytest.mark.usefixtures("scripted_backend")
def test_cli_defaults_are_run_config_defaults_and_paper_applies_the_paper_settings(
    tiny_dataset: Path, tmp_path: Path
) -> None:
    from scopeguard.cli._app import app
    from scopeguard.evaluation import RunConfig, paper_evaluation_settings

    runner = CliRunner()
    base = ["evaluate", str(tiny_dataset), "--rag-llm", "scripted", "--judge-llm", "scripted"]
    base += ["--prompt", "basic", "--limit", "2", "--no-progress", "--no-plots"]
    plain = runner.invoke(app, [*base, "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    saved = RunStore(tmp_path / "plain").read_config()
    defaults = RunConfig(dataset="x", rag="x", judge="x", prompts=("basic",))
    assert saved.model_dump(exclude={"dataset", "rag", "judge", "prompts", "limit"}) == defaults.model_dump(
        exclude={"dataset", "rag", "judge", "prompts", "limit"}
    )
    assert saved.max_tokens == 256 and saved.votes == 3

    paper = runner.invoke(app, [*base, "--paper", "--votes", "5", "--out", str(tmp_path / "paper")])
    assert paper.exit_code == 0, paper.output
    saved = RunStore(tmp_path / "paper").read_config()
    expected = {**paper_evaluation_settings(), "votes": 5}  # an explicit option beats the preset
    assert {k: getattr(saved, k) for k in expected} == expected
    assert saved.max_tokens is None and saved.precheck is False and saved.followup is False

    uncapped = runner.invoke(app, [*base, "--max-tokens", "0", "--out", str(tmp_path / "uncapped")])
    assert uncapped.exit_code == 0 and RunStore(tmp_path / "uncapped").read_config().max_tokens is None
    negative = runner.invoke(app, [*base, "--max-tokens", "-1", "--out", str(tmp_path / "neg")])
    assert negative.exit_code == 2 and "--max-tokens must be at least 0" in negative.output


@pytest.mark.usefixtures("scripted_backend")
def test_cli_bad_input_gives_one_line_errors(tiny_dataset: Path, tmp_path: Path) -> None:
    from scopeguard.cli._app import app

    runner = CliRunner()
    base = ["evaluate", str(tiny_dataset), "--rag-llm", "scripted", "--out", str(tmp_path / "r")]
    bad_prompt = runner.invoke(app, [*base, "--prompt", "three-shot"])
    assert bad_prompt.exit_code == 2 and "valid prompts: basic, two-shot, zero-shot-cot" in bad_prompt.output
    missing = runner.invoke(app, ["evaluate", str(tmp_path / "nope"), "--rag-llm", "scripted", "--out", "x"])
    assert missing.exit_code == 2 and "dataset folder not found" in missing.output
    bad_detector = runner.invoke(app, [*base, "--detector", "nosuch"])
    assert bad_detector.exit_code == 2 and "valid names" in bad_detector.output
    not_a_run = runner.invoke(app, ["compare", str(tmp_path), str(tmp_path)])
    assert not_a_run.exit_code == 2 and "not an evaluation run folder" in not_a_run.output


@pytest.mark.slow
@pytest.mark.integration
def test_real_local_model_runs_the_whole_loop_on_two_questions(
    dev_data_dir: Path, local_gguf: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    report = evaluate(
        dev_data_dir,
        rag="local",
        judge="local",
        prompts=["zero-shot-cot"],
        limit=2,
        votes=3,
        max_tokens=128,
        out=out,
        progress=False,
        plots=False,
    )
    rows = _lines(out / "responses.jsonl")
    assert [r["label"] for r in rows] == ["out_of_scope", "in_scope"]
    assert all(isinstance(r["response"], str) and r["response"].strip() and r["error"] is None for r in rows)
    assert rows[0]["defusion"]["llm_calls"] >= 2 and rows[0]["defusion"]["samples"]
    assert rows[1]["refusal"] is not None
    p = report.prompt("zero-shot-cot")
    assert p.defusion.n + p.defusion.unknown == 1 and p.false_refusal.n + p.false_refusal.unknown == 1


def test_evaluate_defaults_are_run_config_defaults() -> None:
    from scopeguard.evaluation import RunConfig

    params = inspect.signature(evaluate).parameters
    settings = {name for name, f in RunConfig.model_fields.items() if not f.is_required()}
    # evaluate_config passes every setting on as a keyword, so evaluate takes each of them
    assert settings <= params.keys()
    assert {name: params[name].default for name in settings} == {
        name: RunConfig.model_fields[name].default for name in settings
    }
    assert params["votes"].default == 3 and params["max_tokens"].default == 256
