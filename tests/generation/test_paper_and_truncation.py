"""The paper preset (m=9 votes, no reply cap, no follow-up), the CLI's defaults from the config, and
truncated replies: counted, and a judge reply cut at its cap is drawn again without one."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.cli.generate import _FIELDS, generate
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.llm import register_backend
from scopeguard.testing import ScriptedChatModel, eloq_reply, invented_document

DOCS = [{"doc_id": "harbour", "text": invented_document("harbour")}]
LONG_REASONING = " ".join(["The question names a ferry operator the document never mentions."] * 40)


def _long_judge(prompt: str) -> str:
    reply = eloq_reply(prompt)
    if "The answer is: Yes or No" in prompt:
        return f"{LONG_REASONING}\n{reply.splitlines()[-1]}"  # about 400 words of reasoning first
    return reply


def _run(tmp_path: Path, **config: object) -> tuple[Generator, ScriptedChatModel]:
    llm = ScriptedChatModel(_long_judge, model="fake", truncate=True)
    cfg = GenerationConfig(mode="efficient", fallbacks=("recover", "question"), min_oos=0, **config)  # type: ignore[arg-type]
    gen = Generator(llm, config=cfg, judge="judge", progress=False)
    return gen, llm


def test_a_judge_reply_cut_at_its_cap_is_judged_again_without_one(tmp_path: Path) -> None:
    gen, llm = _run(tmp_path)
    summary = gen.run(DOCS, tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    cut = [i for i in record.issues if i.step == "filter" and i.reason == "truncated"]
    assert len(cut) == 5 and all(i.accepted and "judged again without a cap" in i.detail for i in cut)
    # every question got a real verdict: none dropped as unknown; the ANSWERABLE one is answerable
    assert (summary.oos_kept, summary.oos_filtered) == (4, 1)
    assert [d.reason for d in record.dropped] == ["filter: answerable from the document"]
    judge_caps = [c.max_tokens for c in llm.calls if "The answer is: Yes or No" in c.prompt]
    assert 256 in judge_caps and None in judge_caps
    # each cut sample is drawn again once, by the judge: the filter does not judge the question twice
    samples = {
        cap: sum(c.n for c in llm.calls if "The answer is: Yes or No" in c.prompt and c.max_tokens == cap)
        for cap in (256, None)
    }
    assert samples[None] == samples[256]
    assert summary.usage_run.truncated >= 5 and "replies cut at the token cap" in summary.table()


def test_without_a_cap_nothing_is_cut_or_judged_twice(tmp_path: Path) -> None:
    gen, llm = _run(tmp_path, judge_max_tokens=None)
    summary = gen.run(DOCS, tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert not [i for i in record.issues if i.reason == "truncated"]
    assert summary.usage_run.truncated == 0 and (summary.oos_kept, summary.oos_filtered) == (4, 1)
    assert {c.max_tokens for c in llm.calls if "The answer is: Yes or No" in c.prompt} == {None}


def test_paper_preset_is_the_papers_settings() -> None:
    paper = GenerationConfig.paper()
    assert (paper.judge_votes, paper.judge_max_tokens, paper.fallbacks) == (9, None, ())
    assert (paper.n_claims, paper.n_subsets, paper.rounds, paper.n_in_scope) == (6, 3, 3, 5)
    assert paper.min_oos == 0 and "natural" not in paper.screens
    assert GenerationConfig.paper(judge_votes=3).judge_votes == 3


def test_cli_defaults_are_the_config_fields() -> None:
    import inspect

    params = inspect.signature(generate).parameters
    fields = GenerationConfig.model_fields
    for option, field in _FIELDS.items():
        assert params[option].default.default == fields[field].default, option


def test_cli_votes_and_paper_reach_the_run(tmp_path: Path) -> None:
    register_backend("fakevotes", lambda arg, **_: ScriptedChatModel(eloq_reply, model="fake-cli"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(invented_document("plan"), encoding="utf-8")
    base = ["generate", str(corpus), "--llm", "fakevotes", "--no-progress"]
    result = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "v"), "--votes", "5"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "v" / "run.json").read_text())["judge_votes"] == 5
    result = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "p"), "--paper"])
    assert result.exit_code == 0, result.output
    settings = json.loads((tmp_path / "p" / "run.json").read_text())
    assert (settings["judge_votes"], settings["judge_max_tokens"], settings["n_in_scope"]) == (9, None, 5)
    # with --paper, an option given explicitly still applies
    result = CliRunner().invoke(
        app, [*base, "--out", str(tmp_path / "p3"), "--paper", "--votes", "3", "--in-scope", "2"]
    )
    assert result.exit_code == 0, result.output
    settings = json.loads((tmp_path / "p3" / "run.json").read_text())
    assert (settings["judge_votes"], settings["n_in_scope"], settings["min_oos"]) == (3, 2, 0)
    bad = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "b"), "--votes", "0"])
    assert bad.exit_code == 2 and "judge_votes" in bad.output
