"""The generator's control flow with a scripted fake LLM: steps, retries, filter, provenance, resume."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from scopeguard.data import load_dataset
from scopeguard.detection.detectors.judge import JudgeDetector
from scopeguard.errors import ConfigurationError, LLMConnectionError
from scopeguard.generation import GenerationConfig, Generator
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.generation.config import DEFAULT_SCREENS
from scopeguard.testing import ScriptedChatModel, eloq_reply, invented_document

DOCS = [
    {"doc_id": "harbour", "text": invented_document("harbour")},
    {"doc_id": "school", "text": invented_document("school")},
]


def _generator(script: Callable[[str], str], **config: object) -> tuple[Generator, ScriptedChatModel]:
    llm = ScriptedChatModel(script, model="fake")
    return Generator(llm, config=GenerationConfig(**config), concurrency=2, progress=False), llm  # type: ignore[arg-type]


def _steps(llm: ScriptedChatModel) -> list[str]:
    out = []
    for c in llm.calls:
        p = c.prompt.rstrip()
        out.append(
            "judge"
            if "The answer is: Yes or No" in p
            else "extract"
            if p.endswith("most important facts:")
            else "recover"
            if p.endswith("Completed list of facts:")
            else "remove"
            if p.endswith("Remaining hallucinated facts:")
            else "questions"
        )
    return out


def test_faithful_mode_end_to_end(tmp_path: Path) -> None:
    gen, llm = _generator(eloq_reply)
    summary = gen.run(DOCS, tmp_path)
    steps = _steps(llm)
    # the paper's 13 generation calls per document (1 + 9 + 1 + 1 + 1), plus the judge filter
    assert {s: steps.count(s) for s in ("extract", "recover", "remove", "questions")} == {
        "extract": 2,
        "recover": 18,
        "remove": 2,
        "questions": 4,
    }
    ds = load_dataset(tmp_path)
    oos = [q for q in ds.questions if q.label == "out_of_scope"]
    ins = [q for q in ds.questions if q.label == "in_scope"]
    # the fake removes hallucinated fact 1 at step 8 and makes question 1 answerable: 6 - 1 - 1 = 4 kept
    assert len(oos) == 8 and len(ins) == 6 and summary.oos_filtered == 2
    assert [q.id for q in oos if q.doc_id == "harbour"] == [f"harbour_oos_{k}" for k in range(4)]
    prov = oos[0].metadata["provenance"]
    assert prov["round"] == 3 and prov["mode"] == "faithful"
    assert f"operator {prov['claim_index'] + 1} " in prov["hallucinated_claim"]
    assert f"operator {prov['claim_index'] + 1} " in oos[0].question  # question traced to its own claim
    assert prov["true_claim"] == ds.documents["harbour"].metadata["claims"][prov["claim_index"]]
    assert prov["filter"]["label"] == "out_of_scope" and prov["filter"]["votes"]
    cache_ids = {json.loads(line)["id"] for line in (tmp_path / ".cache" / "replies.jsonl").open()}
    for key in ("question", "claim", "remove", "filter"):
        assert set(prov["reply_ids"][key]) <= cache_ids
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert [d.reason for d in record.dropped] == ["filter: answerable from the document"]
    assert record.usage["extract"].calls == 1 and record.usage["recover"].calls == 9
    assert summary.usage_run.calls == len(llm.calls)


def test_efficient_mode_masks_one_subset_per_round(tmp_path: Path) -> None:
    gen, llm = _generator(eloq_reply, mode="efficient")
    summary = gen.run(DOCS[:1], tmp_path)
    recover = [c.prompt for c in llm.calls if c.prompt.rstrip().endswith("Completed list of facts:")]
    assert len(recover) == 3
    # round r masks subset S_r = {i : i mod 3 = r - 1} (1-based fact numbers r, r + 3)
    for r, prompt in enumerate(recover, 1):
        assert (
            f"{r}. (missing)" in prompt and f"{r + 3}. (missing)" in prompt and prompt.count("(missing)") == 3
        )
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert sorted((h.position, h.round) for h in record.hallucinated) == [
        (0, 1),
        (1, 2),
        (2, 3),
        (3, 1),
        (4, 2),
        (5, 3),
    ]
    assert summary.oos_kept == 4 and summary.in_scope == 3


def test_second_run_adds_nothing_and_other_settings_are_refused(tmp_path: Path) -> None:
    gen, _ = _generator(eloq_reply)
    first = gen.run(DOCS, tmp_path)
    before = (tmp_path / "questions.jsonl").read_text()
    gen2, llm2 = _generator(eloq_reply)
    second = gen2.run(DOCS, tmp_path)
    assert llm2.calls == [] and second.docs_done_run == 0 and second.docs_resumed == 2
    assert (tmp_path / "questions.jsonl").read_text() == before
    assert second.oos_kept == first.oos_kept
    gen3, _ = _generator(eloq_reply, rounds=2)
    with pytest.raises(ConfigurationError, match="rounds: 3 -> 2"):
        gen3.run(DOCS, tmp_path)


def test_unusable_reply_is_retried_with_a_firmer_prompt_then_accepted_leniently(tmp_path: Path) -> None:
    def script(prompt: str) -> str:
        if prompt.rstrip().endswith("most important facts:"):
            if "could not be used" not in prompt:
                return "The document is about a harbour council meeting."  # no list at all
            return "1. The harbour plan was approved.\n2. The mayor spoke.\n3. The vote was five to two."
        return eloq_reply(prompt)

    gen, _ = _generator(script)
    gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert record.status == "done" and len(record.claims) == 3
    assert [(i.step, i.reason, i.accepted) for i in record.issues[:3]] == [
        ("extract", "no_list", False),
        ("extract", "wrong_count", False),
        ("extract", "accepted_lenient", True),
    ]
    assert all(i.reply_id for i in record.issues if i.step != "extra_rounds")  # a note, not a reply


def test_extraction_failure_marks_the_document_failed(tmp_path: Path) -> None:
    gen, _ = _generator(
        lambda p: "I cannot help with that." if "most important facts" in p else eloq_reply(p)
    )
    summary = gen.run(DOCS[:1], tmp_path)
    assert summary.docs_failed == 1 and summary.docs_done == 0
    assert (tmp_path / "questions.jsonl").read_text() == ""


def _renumbered(prompt: str, extra: list[str]) -> str:
    """What small models do: drop the (missing) lines, renumber, append their guesses (if any)."""
    facts = [line.split(". ", 1)[1] for line in prompt.split('"""')[1].strip().splitlines()]
    kept = [f for f in facts if f != "(missing)"]
    items = kept + extra + [kept[-1]] * (len(facts) - len(kept) - len(extra))
    return "\n".join(f"{i}. {f}" for i, f in enumerate(items, 1))


def test_shifted_recovery_is_recorded_and_never_applied(tmp_path: Path) -> None:
    def script(prompt: str) -> str:
        if prompt.rstrip().endswith("Completed list of facts:") and "1. (missing)" in prompt:
            return _renumbered(prompt, [])
        return eloq_reply(prompt)

    gen, _ = _generator(script, filter=False, fallbacks=("question", "judge"))
    gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    # near-identical fake facts make the renumbering look like copies or like a shift: both are refused
    reasons = {i.reason for i in record.issues if i.step == "recover"}
    assert reasons and reasons <= {"shifted", "copied", "not_recovered"}
    assert not any(i.accepted for i in record.issues)
    # subset {0, 3} never recovered: those claims stay true claims and are not hallucinated
    assert sorted(h.position for h in record.hallucinated) == [1, 2, 4, 5]


def test_renumbered_recovery_is_aligned_by_content_after_the_retry_and_recorded(tmp_path: Path) -> None:
    def script(prompt: str) -> str:
        if prompt.rstrip().endswith("Completed list of facts:") and "1. (missing)" in prompt:
            return _renumbered(
                prompt, ["The harbour museum opened in 1887.", "A tram line reached the pier."]
            )
        return eloq_reply(prompt)

    gen, _ = _generator(script, filter=False, rounds=1)
    gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert [(i.reason, i.accepted) for i in record.issues] == [
        ("shifted", False),
        ("shifted", False),
        ("accepted_lenient", True),
    ]
    by_pos = {h.position: h.text for h in record.hallucinated}
    assert by_pos[0] == "The harbour museum opened in 1887." and by_pos[3] == "A tram line reached the pier."


def test_unknown_filter_verdict_drops_the_question_with_a_reason(tmp_path: Path) -> None:
    def script(prompt: str) -> str:
        return "I am not sure." if "The answer is: Yes or No" in prompt else eloq_reply(prompt)

    gen, _ = _generator(script)
    summary = gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert summary.oos_kept == 0 and {d.reason for d in record.dropped} == {"filter: unknown"}
    assert all(d.filter and d.filter.votes for d in record.dropped)


def test_custom_judge_factory_and_separate_judge_llm(tmp_path: Path) -> None:
    judge_llm = ScriptedChatModel(lambda p: "Not in the document.\nThe answer is: Yes", model="judge-llm")
    llm = ScriptedChatModel(eloq_reply, model="writer")
    gen = Generator(
        llm, judge=lambda m: JudgeDetector(m, votes=1, temperature=0.0), judge_llm=judge_llm, progress=False
    )
    summary = gen.run(DOCS[:1], tmp_path)
    assert summary.oos_kept == 5 and len(judge_llm.calls) == 5
    assert not any("The answer is: Yes or No" in c.prompt for c in llm.calls)


def test_connection_errors_leave_the_document_for_the_next_run(tmp_path: Path) -> None:
    def down(prompt: str) -> str:
        if "the school plan" in prompt:
            raise LLMConnectionError("connection refused", endpoint="http://127.0.0.1:1")
        return eloq_reply(prompt)

    gen, _ = _generator(down)
    summary = gen.run(DOCS, tmp_path)
    assert summary.docs_errored_run == 1 and summary.docs_done == 1
    gen2, _ = _generator(eloq_reply)
    summary2 = gen2.run(DOCS, tmp_path)
    assert summary2.docs_done_run == 1 and summary2.docs_done == 2
    ids = [q.id for q in load_dataset(tmp_path).questions]
    assert len(ids) == len(set(ids)) and any(i.startswith("school_oos") for i in ids)


def _picky_judge_script(first_pass_recoveries: int) -> Callable[[str], str]:
    """The fake LLM, but each recovery is new text (so new questions) and the judge drops every
    first-pass question."""
    counter = {"recover": 0}

    def script(prompt: str) -> str:
        reply = eloq_reply(prompt)
        if prompt.rstrip().endswith("Completed list of facts:"):
            counter["recover"] += 1
            return reply.replace("operator ", f"operator {counter['recover']}0")  # new text, new question
        if "The answer is: Yes or No" in prompt and counter["recover"] <= first_pass_recoveries:
            return "The document says so.\nThe answer is: No"
        return reply

    return script


def test_a_document_left_without_questions_gets_extra_sampled_rounds(tmp_path: Path) -> None:
    gen, llm = _generator(_picky_judge_script(9))  # defaults: min_oos=2, extra_rounds=2
    summary = gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    recover = [c for c, s in zip(llm.calls, _steps(llm), strict=True) if s == "recover"]
    # the paper's 3 rounds x 3 subsets, then ONE extra round (3 subsets) was enough
    assert len(recover) == 12
    assert all(c.temperature == 0.0 and c.seed == 0 for c in recover[:9])
    assert all(c.temperature == 0.7 and c.seed == 4 for c in recover[9:])  # sampled, seed + round
    oos = [q for q in record.questions if q.label == "out_of_scope"]
    assert summary.oos_kept == len(oos) == 4  # fact 1 removed, the ANSWERABLE question filtered
    assert all(q.round == 4 for q in oos)
    assert [q.id for q in oos] == [f"harbour_oos_{i}" for i in range(4)]
    assert len({h.text for h in record.hallucinated}) == len(record.hallucinated)
    assert all(record.hallucinated[i].round in (3, 4) for i in record.remaining)
    # 5 first-pass questions + the extra round's ANSWERABLE one
    assert len([d for d in record.dropped if d.reason == "filter: answerable from the document"]) == 6
    top_up = [i for i in record.issues if i.step == "extra_rounds"]
    assert len(top_up) == 1 and "1 extra round" in top_up[0].detail


def test_min_oos_zero_is_the_paper_without_extra_rounds(tmp_path: Path) -> None:
    gen, llm = _generator(_picky_judge_script(9), min_oos=0)
    summary = gen.run(DOCS[:1], tmp_path)
    assert summary.oos_kept == 0
    assert _steps(llm).count("recover") == 9
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    assert not [i for i in record.issues if i.step == "extra_rounds"]


def test_extra_rounds_stop_at_their_limit(tmp_path: Path) -> None:
    gen, llm = _generator(_picky_judge_script(10**6), extra_rounds=2)
    summary = gen.run(DOCS[:1], tmp_path)
    assert summary.oos_kept == 0 and _steps(llm).count("recover") == 9 + 2 * 3


def test_filter_with_a_registered_detector_instead_of_the_llm_judge(tmp_path: Path) -> None:
    llm = ScriptedChatModel(eloq_reply, model="fake")
    gen = Generator(llm, judge="lexical", progress=False)
    gen.run(DOCS[:1], tmp_path)
    assert "judge" not in _steps(llm)  # no LLM call for the filter
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    verdicts = [q.filter for q in record.questions if q.label == "out_of_scope"] + [
        d.filter for d in record.dropped
    ]
    assert verdicts and all(f is not None and f.detector == "lexical" and f.llm_calls == 0 for f in verdicts)
    assert json.loads((tmp_path / "run.json").read_text())["filter_with"] == "lexical"


def test_unknown_filter_detector_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="no-such-detector"):
        Generator(ScriptedChatModel([]), judge="no-such-detector")


def test_auto_filter_is_the_judge_except_on_a_small_packaged_llm(tmp_path: Path) -> None:
    assert Generator(ScriptedChatModel(eloq_reply), progress=False).filter_name == "judge"
    small = ScriptedChatModel(eloq_reply, model="qwen")
    small.path = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # type: ignore[attr-defined]
    faithful = GenerationConfig(mode="faithful")
    gen = Generator(small, config=faithful, progress=False)
    assert gen.filter_name == "fast"
    # a strong judge LLM next to a small writer keeps the paper's judge
    strong = ScriptedChatModel([])
    assert Generator(small, config=faithful, judge_llm=strong, progress=False).filter_name == "judge"
    assert Generator(small, judge="judge", progress=False).filter_name == "judge"
    # mode auto: a packaged model gets the offline mode, filtered by the logprob detector
    auto = Generator(small, progress=False)
    assert (auto.config.mode, auto.filter_name, auto.concurrency) == ("offline", "logprob", 1)
    api = Generator(ScriptedChatModel(eloq_reply), progress=False)
    assert (api.config.mode, api.concurrency) == ("faithful", 4)


def _echoing_recovery(prompt: str) -> str:
    """A small model's failure: the paper's recovery prompt gets "(missing)" copied back."""
    if prompt.rstrip().endswith("Completed list of facts:"):
        facts = re.findall(r"^(\d+)\. (.+)$", prompt.split('"""')[1], re.MULTILINE)
        return "\n".join(f"{i}. {f}" for i, f in facts)
    if "Write only your guesses" in prompt:
        numbers = re.findall(r"^(\d+)\. <your guess for fact \d+>$", prompt, re.MULTILINE)
        return "\n".join(
            f"{m}. A night ferry {m} was planned for the harbour in {2030 + int(m)}." for m in numbers
        )
    return eloq_reply(prompt)


def test_unusable_paper_recoveries_fall_back_to_guesses_alone(tmp_path: Path) -> None:
    gen, llm = _generator(_echoing_recovery, min_oos=1)
    summary = gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    guesses_calls = [c for c in llm.calls if "Write only your guesses" in c.prompt]
    assert len(guesses_calls) == 9  # one per (round, subset): the paper's prompt failed twice each time
    assert all("(missing)" in c.prompt for c in guesses_calls)
    assert {(i.step, i.reason) for i in record.issues} >= {("recover", "not_recovered")}
    assert record.usage["recover_guesses"].calls == 9
    assert {h.text for h in record.hallucinated} == {
        f"A night ferry {m} was planned for the harbour in {2030 + m}." for m in range(1, 7)
    }
    assert summary.oos_kept >= 1


def test_recover_fallback_off_is_the_paper(tmp_path: Path) -> None:
    gen, llm = _generator(_echoing_recovery, fallbacks=("question", "judge"), min_oos=0)
    summary = gen.run(DOCS[:1], tmp_path)
    assert not any("Write only your guesses" in c.prompt for c in llm.calls)
    assert summary.oos_kept == 0
    assert (summary.docs_with_both, summary.docs_without_oos, summary.docs_without_in_scope) == (0, 1, 0)
    assert "0 of 1 done documents have both kinds (1 without an out-of-scope question" in summary.table()


def test_repeated_questions_are_dropped_and_recorded(tmp_path: Path) -> None:
    def script(prompt: str) -> str:
        if "questions that the document directly answers" in prompt:
            return (
                "1. Which plan did the council approve?\n"
                "2. which plan did the council  approve?\n"
                "3. Who voted?"
            )
        return eloq_reply(prompt)

    gen, _ = _generator(script)
    gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    ins = [q for q in record.questions if q.label == "in_scope"]
    assert [q.question for q in ins] == ["Which plan did the council approve?", "Who voted?"]
    assert [q.id for q in ins] == ["harbour_ins_0", "harbour_ins_1"]
    assert [(i.step, i.reason) for i in record.issues if i.reason == "duplicate"] == [
        ("in_scope_questions", "duplicate")
    ]


def _one_question_for_all(prompt: str) -> str:
    """A small model's failure: asked about several facts, it writes the first fact's question for all."""
    if "hallucinated facts:" in prompt and prompt.rstrip().endswith("Questions:"):
        numbers = re.findall(r"operator (\d+)", prompt.split("hallucinated facts:")[1])
        return "\n".join(
            f"{k}. Why did regional ferry operator {numbers[0]} decide to sponsor the harbour plan that year?"
            for k in range(1, len(numbers) + 1)
        )
    return eloq_reply(prompt)


def test_questions_lost_to_repeats_are_asked_for_one_fact_at_a_time(tmp_path: Path) -> None:
    gen, _ = _generator(_one_question_for_all, rounds=1, min_oos=0, filter=False)
    gen.run(DOCS[:1], tmp_path)
    record = CheckpointStore(tmp_path).load_all()["harbour"]
    oos = [q for q in record.questions if q.label == "out_of_scope"]
    # step 8 keeps five of the six hallucinated facts; the batch reply covers one, four are asked alone
    assert record.usage["oos_questions"].calls == 1 and record.usage["oos_questions_each"].calls == 4
    assert sorted(q.claim_index for q in oos) == [1, 2, 3, 4, 5]
    for q in oos:  # each question is traced to its own claim and the reply that wrote it
        assert f"operator {q.claim_index + 1} " in q.question
        assert f"operator {q.claim_index + 1} " in q.hallucinated_claim
    assert len({q.reply_ids["question"] for q in oos}) == 5
    assert [i.reason for i in record.issues if i.step == "oos_questions"] == ["duplicate"] * 4

    gen, _ = _generator(
        _one_question_for_all, rounds=1, min_oos=0, filter=False, fallbacks=("recover", "judge")
    )
    gen.run(DOCS[:1], tmp_path / "paper")
    record = CheckpointStore(tmp_path / "paper").load_all()["harbour"]
    assert len([q for q in record.questions if q.label == "out_of_scope"]) == 1
    assert "oos_questions_each" not in record.usage


def test_a_copied_example_phrase_is_dropped_unless_the_screen_is_off(tmp_path: Path) -> None:
    # the mayor of gen_remove_claims' worked example
    copied = "Why did Mayor Ilse Varno decide to sponsor the harbour plan that year?"

    def script(prompt: str) -> str:
        reply = eloq_reply(prompt)
        if "hallucinated facts:" in prompt and prompt.rstrip().endswith("Questions:"):
            lines = reply.split("\n")
            lines[1] = f"2. {copied}"
            reply = "\n".join(lines)
        return reply

    for screen in (True, False):
        gen, _ = _generator(script, screens=DEFAULT_SCREENS if screen else GenerationConfig.paper().screens)
        gen.run(DOCS[:1], tmp_path / str(screen))
        record = CheckpointStore(tmp_path / str(screen)).load_all()["harbour"]
        reasons = {d.question: d.reason for d in record.dropped}
        if screen:
            expected = 'not a usable question: copies "mayor ilse varno" from a prompt example'
            assert reasons[copied] == expected
        else:
            assert not reasons.get(copied, "").startswith("not a usable question")
