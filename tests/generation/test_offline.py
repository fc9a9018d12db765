"""The offline modes with scripted fakes: candidates, the keep rule, provenance, bad input, resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scopeguard.data import load_dataset
from scopeguard.errors import ConfigurationError, DocumentTooLongError
from scopeguard.generation import GenerationConfig, Generator, LengthRule
from scopeguard.generation.checkpoint import CheckpointStore
from scopeguard.generation.config import DEFAULT_SCREENS, RETIRED_SETTINGS
from scopeguard.generation.offline._absent import absent_detail
from scopeguard.generation.offline._replies import SUBJECT_KIND_TOKENS, SUBJECT_TOKENS
from scopeguard.llm.base import Completion, Prompt
from scopeguard.testing import ScriptedChatModel, ScriptedDetector
from tests.generation.writer_replies import IN_SCOPE_ASK, answered

SENTENCES = [
    "The council of Wrenfield approved the harbour plan on Monday evening.",
    "Mayor Ines Holt said the work on the harbour starts in May.",
    "The plan adds a new pier for the ferry Marlin, which carries 180 passengers.",
    "Fishermen of Wrenfield welcomed the plan at the meeting in the town hall.",
    "The new pier of the harbour plan will serve the ferry Marlin.",
]
DOC = " ".join(SENTENCES)
IN_SCOPE = [
    "When did the council of Wrenfield approve the harbour plan?",
    "When does the work on the harbour start?",
    "How many passengers does the ferry Marlin carry?",
    "Who welcomed the plan at the meeting in the town hall?",
    "What does the plan add for the ferry Marlin?",
]
# one per sentence, asked in mode unstated / offline
UNSTATED = [
    "Who paid for the harbour plan of Wrenfield?",  # kept (0.9)
    "What did you think of the harbour work, Mayor Ines Holt?",  # talks to the writer: dropped
    "What is the ticket price on the ferry Marlin, and who sets it?",  # two questions: dropped
    "What did the fishermen of Wrenfield welcome?",  # answerable: dropped
    "How long will the new pier of the harbour plan be?",  # kept (0.85)
]
# verdicts by question: P(out of scope); the detector's threshold is 0.5, the margin 0.25
SCORES = {
    **{q: 0.1 for q in IN_SCOPE[:4]},
    IN_SCOPE[4]: 0.9,  # the detector finds this in-scope candidate unanswerable: dropped
    "When did the council of Wrenfield vote down the harbour plan?": 0.95,  # kept
    "Which firm did the council of Wrenfield hire for the harbour plan?": 0.55,  # within the margin
    "Who opposed the plan at the meeting in the town hall?": 0.2,  # answerable: dropped
    "How much will the new pier for the ferry Marlin cost the council of Wrenfield?": 0.9,  # kept
    "Which shipyard in Wrenfield built the ferry Marlin and its new pier?": 0.8,  # kept
    UNSTATED[0]: 0.9,
    UNSTATED[3]: 0.1,
    UNSTATED[4]: 0.85,
}
OFF_TOPIC = "What is the capital city of distant Mongolia today?"
DEGENERATE = "Why did Ines Holt say Ines Holt said that?"


def _reply(prompt: str) -> str:
    if IN_SCOPE_ASK in prompt:
        sentence = prompt.split('Sentence: "', 1)[1].split('"\n', 1)[0]
        return answered(IN_SCOPE[SENTENCES.index(sentence)], prompt)
    if "Rewrite a question in" in prompt:
        source = prompt.rsplit('Question: "', 1)[1].split('"', 1)[0]
        if source == IN_SCOPE[0]:
            return json.dumps(
                {
                    "negation": "When did the council of Wrenfield vote down the harbour plan?",
                    "other_neutral": "Which firm did the council of Wrenfield hire for the harbour plan?",
                    "entity_swap": source,  # a copy of its source: dropped
                }
            )
        if source == IN_SCOPE[1]:
            return "Sure! Here you go: not JSON at all"  # unusable, and again after the firm retry
        return json.dumps(
            {
                "negation": "Who opposed the plan at the meeting in the town hall?",
                "other_neutral": OFF_TOPIC,
                "entity_swap": DEGENERATE,
            }
        )
    if "What is this text mainly about" in prompt:
        if "which kind of thing" in prompt:
            return json.dumps({"subject": "the harbour plan of Wrenfield", "kind": "event"})
        return json.dumps({"subject": "the harbour plan of Wrenfield"})
    if "sentence does not answer" in prompt:
        sentence = prompt.split('entence: "' if "Sentence: " in prompt else 'sentences: "', 1)[1]
        sentence = sentence.split('"\n', 1)[0]
        return json.dumps({"questions": [UNSTATED[SENTENCES.index(sentence)]]})
    if "follow-up questions" in prompt:
        return json.dumps(
            {
                "questions": [
                    "How much will the new pier for the ferry Marlin cost the council of Wrenfield?",
                    "Which shipyard in Wrenfield built the ferry Marlin and its new pier?",
                ]
            }
        )
    raise AssertionError(f"unexpected prompt: {prompt[:120]!r}")


CONFIG = GenerationConfig(
    mode="perturb",
    n_in_scope=3,
    perturb_sources=3,
    perturb_kinds=("negation", "other_neutral", "entity_swap"),
    followups=2,
    unstated_per_sentence=1,
    min_oos=1,
    max_oos=None,  # the cap has its own test
)
RULE = LengthRule(min_words=None, max_words=None)


def _generator(config: GenerationConfig = CONFIG, script=_reply) -> tuple[Generator, ScriptedChatModel]:  # type: ignore[no-untyped-def]
    llm = ScriptedChatModel(script, model="fake")
    detector = ScriptedDetector(lambda q: SCORES.get(q, 0.99))
    return Generator(llm, config=config, judge=detector, concurrency=1, progress=False), llm


def test_offline_mode_asks_each_sentence_and_follows_up_and_screens_what_no_one_would_ask(
    tmp_path: Path,
) -> None:
    # min_oos 0 sets no target to top up to: the follow-ups are asked at once
    gen, llm = _generator(CONFIG.model_copy(update={"mode": "offline", "min_oos": 0}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    ds = load_dataset(tmp_path)
    oos = {q.question: q.metadata["provenance"] for q in ds.questions if q.label == "out_of_scope"}
    assert sorted(oos) == sorted(
        [
            UNSTATED[0],
            UNSTATED[4],
            "How much will the new pier for the ferry Marlin cost the council of Wrenfield?",
            "Which shipyard in Wrenfield built the ferry Marlin and its new pier?",
        ]
    )
    assert oos[UNSTATED[0]]["edit_kind"] == "unstated" and oos[UNSTATED[0]]["mode"] == "offline"
    record = CheckpointStore(tmp_path).load_all()["wrenfield"]
    reasons = {d.question: d.reason for d in record.dropped}
    # an in-scope candidate the filter drops names the sentence it was written from, as a kept one does
    assert reasons[IN_SCOPE[4]] == "filter: not answerable from the document (out_of_scope)"
    assert {d.question: d.true_claim for d in record.dropped}[IN_SCOPE[4]] == SENTENCES[4]
    assert reasons[UNSTATED[1]] == "not a usable question: asks the document's writer (you), not the document"
    assert reasons[UNSTATED[2]] == "not a usable question: asks two questions at once"
    assert reasons[UNSTATED[3]] == "filter: answerable from the document"
    # 5 in-scope prompts, the document's subject (the whole text shown), then one per sentence
    # (the sentence shown, the questions asked about the subject), then one follow-up prompt
    assert not any("Rewrite a question in" in c.prompt for c in llm.calls)
    assert [sum(s in c.prompt for s in SENTENCES) for c in llm.calls] == [1] * 5 + [5] + [1] * 5 + [0]
    assert all("questions about the harbour plan of Wrenfield" in c.prompt for c in llm.calls[6:11])


def test_in_scope_mode_writes_the_in_scope_questions_alone(tmp_path: Path) -> None:
    """#58: what a calibration's threshold reads, without the out-of-scope steps' calls."""
    gen, llm = _generator(CONFIG.model_copy(update={"mode": "in_scope"}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    ds = load_dataset(tmp_path)
    offline, _ = _generator(CONFIG.model_copy(update={"mode": "offline", "min_oos": 0}))
    offline.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path / "offline", length_rule=RULE)
    both = load_dataset(tmp_path / "offline")
    assert ds.questions and {q.label for q in ds.questions} == {"in_scope"}
    assert [q.question for q in ds.questions] == [q.question for q in both.questions if q.label == "in_scope"]
    # the five in-scope prompts alone: no subject, unstated or follow-up prompt
    assert len(llm.calls) == 5
    assert all(IN_SCOPE_ASK in c.prompt for c in llm.calls)


def test_an_in_scope_question_whose_answer_its_sentence_lacks_is_dropped_before_the_filter(
    tmp_path: Path,
) -> None:
    # the writer names a detail sentence 3 does not have (where the fishermen met), and of sentence 2
    # writes a question that already says its answer: both are dropped unread
    unnamed = "What is the name of the town hall where the fishermen of Wrenfield met?"
    said = "Does the ferry Marlin carry 180 passengers?"

    def script(prompt: str) -> str:
        if IN_SCOPE_ASK in prompt and SENTENCES[3] in prompt:
            return answered(unnamed, prompt, answer="Wrenfield Guildhall")
        if IN_SCOPE_ASK in prompt and SENTENCES[2] in prompt:
            return answered(said, prompt, answer="180 passengers")
        return _reply(prompt)

    read: list[str] = []
    judge = ScriptedDetector(lambda q: read.append(q) or SCORES.get(q, 0.99))  # type: ignore[func-returns-value]
    config = CONFIG.model_copy(update={"mode": "in_scope"})
    gen = Generator(ScriptedChatModel(script, model="fake"), config=config, judge=judge, progress=False)
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    record = CheckpointStore(tmp_path).load_all()["wrenfield"]
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons[unnamed] == "not a usable question: its answer is not in its sentence"
    assert reasons[said] == "not a usable question: it states its own answer"
    assert unnamed not in read and said not in read and IN_SCOPE[4] in read
    assert [q.question for q in record.questions] == IN_SCOPE[:2]


def test_offline_mode_follows_up_only_where_the_unstated_questions_fall_short(tmp_path: Path) -> None:
    # two unstated questions are kept: with min_oos 2 the document needs no follow-ups
    gen, llm = _generator(CONFIG.model_copy(update={"mode": "offline", "min_oos": 2}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    oos = [q for q in load_dataset(tmp_path).questions if q.label == "out_of_scope"]
    assert sorted(q.question for q in oos) == sorted([UNSTATED[0], UNSTATED[4]])
    assert not any("follow-up questions" in c.prompt for c in llm.calls)
    # with min_oos 3 it is short after them: the follow-up prompt tops it up
    gen, llm = _generator(CONFIG.model_copy(update={"mode": "offline", "min_oos": 3, "extra_rounds": 0}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path / "short", length_rule=RULE)
    oos = [q for q in load_dataset(tmp_path / "short").questions if q.label == "out_of_scope"]
    assert len(oos) == 4 and {q.metadata["provenance"]["edit_kind"] for q in oos} == {"unstated", "followup"}
    assert sum("follow-up questions" in c.prompt for c in llm.calls) == 1
    # min_oos 0 sets no target: both kinds are asked, as before
    gen, llm = _generator(CONFIG.model_copy(update={"mode": "offline", "min_oos": 0}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path / "zero", length_rule=RULE)
    assert sum("follow-up questions" in c.prompt for c in llm.calls) == 1


def test_follow_ups_come_after_the_sampled_rounds(tmp_path: Path) -> None:
    def order(path: Path, **settings: Any) -> list[str]:  # the kinds of the out-of-scope calls in turn
        config = CONFIG.model_copy(update={"mode": "offline", "min_oos": 5, "extra_rounds": 2, **settings})
        gen, llm = _generator(config)
        gen.run([{"doc_id": "wrenfield", "text": DOC}], path, length_rule=RULE)
        kinds = [
            "followup" if "follow-up questions" in c.prompt else f"unstated@{c.temperature}"
            for c in llm.calls
            if "follow-up questions" in c.prompt or "does not answer" in c.prompt
        ]
        return [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]  # runs of one kind, once

    # still short after both sampled rounds: the follow-ups are asked last
    assert order(tmp_path) == ["unstated@0.0", "unstated@0.7", "followup"]
    # a document the first round fills is asked none
    assert order(tmp_path / "full", min_oos=2) == ["unstated@0.0"]


# the screens' and fallbacks' booleans of a run folder saved before the screens tuple (#59)
OLD_SWITCHES = ["natural_screen", "writer_screen", "one_thing_screen", "other_thing_screen"]
OLD_SWITCHES += ["odd_details_screen", "about_subject_screen", "recover_fallback", "question_fallback"]
OLD_SWITCHES += ["judge_followup"]


def test_a_run_saved_before_the_screens_tuple_resumes_as_it_ran_or_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    offline = CONFIG.model_copy(update={"mode": "offline"})
    gen, _ = _generator(offline)
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    saved = json.loads((tmp_path / "run.json").read_text())
    del saved["screens"], saved["fallbacks"]
    # every rule on, as the last such version wrote it: as the defaults run now
    old = {**saved, **dict.fromkeys([*RETIRED_SETTINGS, *OLD_SWITCHES], True)}
    (tmp_path / "run.json").write_text(json.dumps(old))
    # as the defaults ran then: every screen but those added after the tuple
    before = tuple(s for s in DEFAULT_SCREENS if s not in ("answered", "unwritten_name", "no_name"))
    gen, _ = _generator(offline)
    with pytest.raises(ConfigurationError, match=r"screens: .*'answered'"):
        gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    gen, llm = _generator(offline.model_copy(update={"screens": before}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    assert llm.calls == []  # resumed: nothing to do
    assert json.loads((tmp_path / "run.json").read_text())["screens"] == list(before)
    # a screen switched off: its screens tuple lacks it, and only that resumes
    (tmp_path / "run.json").write_text(json.dumps({**old, "writer_screen": False}))
    gen, _ = _generator(offline)
    with pytest.raises(ConfigurationError, match=r"screens: \[.*'natural', 'one_thing'.*\] -> \["):
        gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    without = tuple(s for s in before if s != "writer")
    gen, _ = _generator(offline.model_copy(update={"screens": without}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    # a rule whose "off" this version no longer has, off or not yet there: refused in one line
    for retired in (
        {**old, "unstated_hints": False},
        {k: v for k, v in old.items() if k != "subject_article"},
    ):
        (tmp_path / "run.json").write_text(json.dumps(retired))
        gen, _ = _generator(offline)
        with pytest.raises(ConfigurationError) as refused:
            gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
        message = str(refused.value)
        assert "\n" not in message and message.endswith("start a new --out folder")
        assert ("unstated_hints off" if "subject_article" in retired else "subject_article off") in message


def test_an_unknown_screen_is_refused_naming_the_valid_ones_when_the_generator_is_built() -> None:
    unknown = GenerationConfig(screens=("degenerate", "writers"))  # the registry is the generator's
    with pytest.raises(
        ConfigurationError, match=r"unknown screen\(s\) 'writers'; valid names: degenerate, moored"
    ):
        _generator(unknown)
    with pytest.raises(ConfigurationError, match="each screen once"):
        GenerationConfig(screens=("natural", "natural"))
    with pytest.raises(ConfigurationError, match="unknown screen"):  # model_copy does not validate
        _generator(CONFIG.model_copy(update={"screens": ("bogus",)}))


def test_the_unstated_questions_hint_at_details_that_fit_the_subjects_kind(tmp_path: Path) -> None:
    def product(prompt: str) -> str:  # the same document, named as a product
        if "What is this text mainly about" in prompt:
            return json.dumps({"subject": "the Wrenfield harbour", "kind": "product"})
        return _reply(prompt)

    # without about_subject, the fake's questions about the harbour plan are kept (no top-ups)
    gen, llm = _generator(
        CONFIG.model_copy(update={"mode": "unstated", "screens": NOT_ABOUT_SUBJECT}), script=product
    )
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    (subject,) = [c.prompt for c in llm.calls if "What is this text mainly about" in c.prompt]
    assert "which kind of thing it is: product, place, book, film, person, event or other" in subject
    unstated = [c.prompt for c in llm.calls if "does not answer" in c.prompt]
    assert len(unstated) == 5
    assert all("questions about the Wrenfield harbour" in p and "its price, its maker" in p for p in unstated)
    assert not any("a date" in p for p in unstated)
    # a kind without hints of its own (the fake's default, an event) keeps the one list
    gen, llm = _generator(CONFIG.model_copy(update={"mode": "unstated"}))
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path / "event", length_rule=RULE)
    unstated = [c.prompt for c in llm.calls if "does not answer" in c.prompt]
    assert all("such as a price, a date, a place, an amount or a reason" in p for p in unstated)


# the default screens but about_subject (an unstated question sharing no word with the subject)
NOT_ABOUT_SUBJECT = tuple(s for s in DEFAULT_SCREENS if s != "about_subject")


def _subject_run(path: Path, subject: str, kind: str, **settings: Any) -> list[str]:
    """The unstated prompts of a run on DOC whose subject reply is ``subject`` of ``kind``."""

    def script(prompt: str) -> str:
        if "What is this text mainly about" in prompt:
            return json.dumps({"subject": subject, "kind": kind})
        return _reply(prompt)

    gen, llm = _generator(CONFIG.model_copy(update={"mode": "unstated", **settings}), script=script)
    gen.run([{"doc_id": "wrenfield", "text": DOC}], path, length_rule=RULE)
    return [c.prompt for c in llm.calls if "does not answer" in c.prompt]


def test_a_subject_the_model_capitalised_is_asked_about_as_the_document_writes_it(tmp_path: Path) -> None:
    unstated = _subject_run(tmp_path, "Harbour Plan", "event")  # the document writes "the harbour plan"
    assert len(unstated) == 5 and all("questions about the harbour plan that" in p for p in unstated)


def test_a_subject_the_document_never_writes_is_asked_about_as_the_document_calls_it(tmp_path: Path) -> None:
    # the document never writes "Bexley" (a town of another text); it calls "the harbour" that early
    unstated = _subject_run(tmp_path, "Bexley harbour", "product", screens=NOT_ABOUT_SUBJECT)
    assert len(unstated) == 5 and all("questions about the harbour that" in p for p in unstated)
    record = CheckpointStore(tmp_path).load_all()["wrenfield"]
    (note,) = [i for i in record.issues if i.reason == "subject_not_in_document"]
    assert note.detail == "'Bexley harbour' has a word the document never writes: asked about 'the harbour'"
    # nothing it calls "marlin" (a name), nor "product": what its kind is called (the model's guess)
    unstated = _subject_run(tmp_path / "kind", "Bexley Ferry Marlin", "product", screens=NOT_ABOUT_SUBJECT)
    assert len(unstated) == 5 and all("questions about the product that" in p for p in unstated)


def test_a_subject_the_document_first_names_late_is_not_asked_about(tmp_path: Path) -> None:
    # "Holt" first comes in sentence 2 of 5 (40%): a passing mention, not what the document is about;
    # the document does not call anything "the ferry" in its first 40%, nor "the product"
    unstated = _subject_run(tmp_path, "Ines Holt's ferry", "product", screens=NOT_ABOUT_SUBJECT)
    assert len(unstated) == 5 and all("questions about the people, places or things" in p for p in unstated)
    record = CheckpointStore(tmp_path).load_all()["wrenfield"]
    (note,) = [i for i in record.issues if i.reason == "subject_named_late"]
    assert note.detail == (
        '"Ines Holt\'s ferry" is first named late in the document (a passing mention): asked about '
        "what each sentence names"
    )
    # named in the first sentence: the model's subject
    early = _subject_run(tmp_path / "early", "the Wrenfield harbour", "product", screens=NOT_ABOUT_SUBJECT)
    assert all("questions about the Wrenfield harbour that" in p for p in early)


def test_a_subject_named_in_lower_case_is_asked_about_with_its_article(tmp_path: Path) -> None:
    unstated = _subject_run(tmp_path, "harbour plan", "event", screens=NOT_ABOUT_SUBJECT)
    assert len(unstated) == 5 and all("questions about the harbour plan that" in p for p in unstated)


class _GrammarModel(ScriptedChatModel):
    """A scripted backend that takes a JSON schema, as the llama.cpp one does: records each."""

    supports_json_schema = True

    def __init__(self, script) -> None:  # type: ignore[no-untyped-def]
        super().__init__(script, model="grammar")
        self.schemas: list[Any] = []

    def complete(self, prompt: Prompt, *, json_schema: Any = None, **kw: Any) -> Completion:  # type: ignore[override]
        self.schemas.append(json_schema)
        return super().complete(prompt, **kw)


def test_the_subject_call_holds_the_grammar_to_the_subject_and_its_kind(tmp_path: Path) -> None:
    llm = _GrammarModel(_reply)
    config = CONFIG.model_copy(update={"mode": "unstated"})
    detector = ScriptedDetector(lambda q: SCORES.get(q, 0.99))
    Generator(llm, config=config, judge=detector, concurrency=1, progress=False).run(
        [{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE
    )
    (i,) = [k for k, c in enumerate(llm.calls) if "What is this text mainly about" in c.prompt]
    schema = llm.schemas[i]
    assert schema["required"] == ["subject", "kind"] and "event" in schema["properties"]["kind"]["enum"]
    assert llm.calls[i].max_tokens == SUBJECT_TOKENS + SUBJECT_KIND_TOKENS


def test_perturb_mode_keeps_confusing_unanswerable_questions_with_provenance(tmp_path: Path) -> None:
    gen, llm = _generator()
    summary = gen.run([{"doc_id": "alderby", "text": DOC}], tmp_path, length_rule=RULE)
    ds = load_dataset(tmp_path)
    by_label = {
        label: [q for q in ds.questions if q.label == label] for label in ("in_scope", "out_of_scope")
    }
    assert [q.question for q in by_label["in_scope"]] == IN_SCOPE[:4]
    assert [q.question for q in by_label["out_of_scope"]] == [
        "When did the council of Wrenfield vote down the harbour plan?"
    ]
    prov = {q.question: q.metadata["provenance"] for q in by_label["out_of_scope"]}
    negation = prov["When did the council of Wrenfield vote down the harbour plan?"]
    assert negation["generator"] == "scopeguard-offline" and negation["mode"] == "perturb"
    assert negation["edit_kind"] == "negation" and negation["source_question"] == IN_SCOPE[0]
    assert negation["overlap"] >= 0.5 and negation["filter"]["score"] == 0.95
    # the in-scope questions are the detector-confirmed ones, recorded as direct
    assert {q.metadata["provenance"]["edit_kind"] for q in by_label["in_scope"]} == {"direct"}
    record = CheckpointStore(tmp_path).load_all()["alderby"]
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons[IN_SCOPE[4]].startswith("filter: not answerable")
    assert reasons["Which firm did the council of Wrenfield hire for the harbour plan?"].startswith(
        "filter: out of scope within the margin (P=0.55 < 0.75)"
    )
    assert (
        reasons["Who opposed the plan at the meeting in the town hall?"]
        == "filter: answerable from the document"
    )
    assert reasons[OFF_TOPIC].startswith("off-topic")
    assert reasons[DEGENERATE] == "not a usable question: repeats its own words"
    assert reasons[IN_SCOPE[0]] == "a copy of a question already written"
    # the unusable perturbation reply was retried once, firmly, and recorded
    firm = [c for c in llm.calls if "Your previous answer could not be used" in c.prompt]
    assert len(firm) == 1 and any(i.step == "perturb" and i.reason == "not_json" for i in record.issues)
    # the document's prompts: 5 in-scope (one a sentence), 3 perturbations (+1 retry); the
    # perturbation prompts are shown questions, never the document
    assert len(llm.calls) == 9
    assert [sum(s in c.prompt for s in SENTENCES) for c in llm.calls] == [1] * 5 + [0] * 4
    assert record.questions[-1].true_claim == SENTENCES[3]  # an in-scope question keeps its sentence
    assert (summary.oos_kept, summary.in_scope, summary.docs_with_both) == (1, 4, 1)


def test_perturb_and_followup_modes_ask_only_their_own_candidates(tmp_path: Path) -> None:
    for mode, expected in (("perturb", "Rewrite a question in"), ("followup", "follow-up questions")):
        gen, llm = _generator(CONFIG.model_copy(update={"mode": mode}))
        gen.run([{"doc_id": "alderby", "text": DOC}], tmp_path / mode, length_rule=RULE)
        asked = [c.prompt for c in llm.calls[5:]]
        assert asked and all(expected in p for p in asked), mode
        ds = load_dataset(tmp_path / mode)
        kinds = {q.metadata["provenance"]["edit_kind"] for q in ds.questions if q.label == "out_of_scope"}
        assert kinds == ({"negation"} if mode == "perturb" else {"followup"})


def test_a_short_document_gets_sampled_top_up_rounds(tmp_path: Path) -> None:
    config = CONFIG.model_copy(update={"mode": "followup", "min_oos": 5, "extra_rounds": 2})
    gen, llm = _generator(config)
    gen.run([{"doc_id": "alderby", "text": DOC}], tmp_path, length_rule=RULE)
    followups = [c for c in llm.calls if "follow-up questions" in c.prompt]
    assert [c.temperature for c in followups] == [0.0, 0.7, 0.7]
    assert [c.seed for c in followups] == [0, 1, 2]
    record = CheckpointStore(tmp_path).load_all()["alderby"]
    assert any(i.step == "extra_rounds" for i in record.issues)


def _too_long(prompt: str) -> str:
    if "Ferries of the Northern Bay Company" in prompt:
        raise DocumentTooLongError("the prompt does not fit the context window", n_tokens=9000, limit=4096)
    return _reply(prompt)


def test_bad_documents_get_a_recorded_reason_and_the_corpus_goes_on(tmp_path: Path) -> None:
    corpus = [
        {"doc_id": "empty", "text": "   "},
        {"doc_id": "one", "text": "The harbour plan of Wrenfield was approved on Monday."},
        {
            "doc_id": "german",
            "text": "Der Stadtrat von Wrenfield hat am Montag den Hafenplan beschlossen. Die Arbeiten "
            "beginnen im Mai, sagte Bürgermeisterin Ines Holt. Die Fischer begrüßten den Plan "
            "bei der Versammlung im Rathaus, und die Fähre Kestrel bekommt einen neuen Steg.",
        },
        {
            "doc_id": "long",
            "text": "Ferries of the Northern Bay Company sail from Wrenfield to Kestrel Point. " + DOC,
        },
        {"doc_id": "good", "text": DOC},
    ]
    gen, _ = _generator(script=_too_long)
    summary = gen.run(corpus, tmp_path, length_rule=RULE)
    records = CheckpointStore(tmp_path).load_all()
    assert records["good"].status == "done" and records["good"].questions
    assert {
        d: (records[d].status, (records[d].error or "").split(":")[0]) for d in ("one", "german", "long")
    } == {
        "one": ("skipped", "too short"),
        "german": ("skipped", "not English"),
        "long": ("skipped", "longer than the model's context"),
    }
    assert all(not records[d].questions for d in ("one", "german", "long"))
    # the empty one is refused by the corpus loader, before any mode
    assert (summary.docs_skipped, summary.docs_unusable, summary.docs_done, summary.docs_failed) == (
        1,
        3,
        1,
        0,
    )
    assert "3 unusable" in summary.table()
    assert sorted(load_dataset(tmp_path).documents) == ["good"]


def test_a_resumed_offline_run_replays_the_cache_and_duplicates_nothing(tmp_path: Path) -> None:
    gen, _ = _generator()
    gen.run([{"doc_id": "alderby", "text": DOC}], tmp_path, length_rule=RULE)
    first = (tmp_path / "questions.jsonl").read_text()
    for path in (tmp_path / ".checkpoints").glob("*.json"):
        path.unlink()  # as if killed before the checkpoint was written
    again, llm = _generator()
    summary = again.run([{"doc_id": "alderby", "text": DOC}], tmp_path, length_rule=RULE)
    assert llm.calls == [] and summary.usage_run.cached == summary.usage_run.calls > 0
    assert (tmp_path / "questions.jsonl").read_text() == first


def test_mode_auto_resolves_by_model_and_the_paper_stays_algorithm_1(tmp_path: Path) -> None:
    small = ScriptedChatModel(_reply, model="qwen")
    small.path = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"  # type: ignore[attr-defined]
    assert GenerationConfig().mode == "auto"
    assert GenerationConfig().resolved(small).mode == "offline"
    assert GenerationConfig().resolved(ScriptedChatModel([])).mode == "faithful"
    assert GenerationConfig(mode="efficient").resolved(small).mode == "efficient"
    assert GenerationConfig.paper().mode == "faithful"
    with pytest.raises(ValidationError, match="perturb_kinds"):
        GenerationConfig(perturb_kinds=("negation", "negation"))
    with pytest.raises(ConfigurationError, match="resolved"):
        asyncio.run(_unresolved(small))


async def _unresolved(llm: ScriptedChatModel) -> None:
    from scopeguard.generation import ReplyCache, generate_document
    from scopeguard.generation.cache import RecordingChatModel
    from scopeguard.types import Document

    await generate_document(
        Document(id="d", text=DOC), RecordingChatModel(llm, ReplyCache()), config=GenerationConfig()
    )


def test_the_cli_names_every_mode(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scopeguard.cli import app

    result = CliRunner().invoke(
        app, ["generate", str(tmp_path), "--out", str(tmp_path / "o"), "--mode", "bogus"]
    )
    assert result.exit_code == 2
    for mode in ("auto", "faithful", "efficient", "perturb", "followup", "unstated", "offline"):
        assert mode in result.output


class _PassageDetector(ScriptedDetector):
    """A filter that reads documents in passages and refuses a long one, as the logprob detector does."""

    def passages(self, documents: list[object]) -> list[str]:
        text = documents[0].text  # type: ignore[attr-defined]
        if len(text.split()) > 100:
            raise DocumentTooLongError("the documents need more than 32 passages", n_tokens=5000, limit=4096)
        return [text]


def test_a_document_longer_than_the_filters_limit_is_skipped_with_the_reason(tmp_path: Path) -> None:
    llm = ScriptedChatModel(_reply, model="fake")
    detector = _PassageDetector(lambda q: SCORES.get(q, 0.99))
    gen = Generator(llm, config=CONFIG, judge=detector, concurrency=1, progress=False)
    summary = gen.run(
        [{"doc_id": "huge", "text": DOC * 5}, {"doc_id": "ok", "text": DOC}], tmp_path, length_rule=RULE
    )
    records = CheckpointStore(tmp_path).load_all()
    assert records["huge"].status == "skipped" and "32 passages" in (records["huge"].error or "")
    assert records["ok"].status == "done" and (summary.docs_unusable, summary.docs_done) == (1, 1)
    assert all(DOC[:40] not in c.prompt or "Sentence:" in c.prompt for c in llm.calls)


def test_a_rewrite_that_copies_a_prompt_example_is_dropped(tmp_path: Path) -> None:
    text = (
        "The ferry Marlin of Port Lanner carries 180 passengers to the island every morning. "
        "Captain Mira Osk said the ferry Marlin will get a new engine in the spring."
    )
    copied = "How much will the harbour plan of the ferry Marlin cost?"  # the example's phrase
    named = "When did Norbury buy the ferry Marlin from Port Lanner?"  # an example's invented name
    artefact = "Who will get a new engine for the ferry Marlin for the second time?"
    own = "Who built the new engine of the ferry Marlin for Captain Mira Osk?"
    kinds = ("negation", "antonym", "entity_swap", "other_neutral")

    def script(prompt: str) -> str:
        if IN_SCOPE_ASK in prompt:
            return answered("Who said the ferry Marlin will get a new engine in the spring?", prompt)
        return json.dumps(dict(zip(kinds, [copied, named, artefact, own], strict=True)))

    config = CONFIG.model_copy(update={"mode": "perturb", "perturb_kinds": kinds})
    gen, _ = _generator(config, script)
    gen.run([{"doc_id": "marlin", "text": text}], tmp_path, length_rule=RULE)
    record = CheckpointStore(tmp_path).load_all()["marlin"]
    assert [q.question for q in record.questions if q.label == "out_of_scope"] == [own]
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons[copied] == 'not a usable question: copies "the harbour plan" from a prompt example'
    assert reasons[named] == "not a usable question: copies the name 'norbury' from a prompt example"
    assert reasons[artefact] == (
        'not a usable question: holds "for the second time", a phrase small models add to any question'
    )


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        (
            "What are the largest predatory creatures mentioned in the sentence?",
            "What are the largest predatory creatures?",
        ),
        (
            "What months are the warmest and driest in the sentence ?",
            "What months are the warmest and driest?",
        ),
        ("Which rivers are listed in this text?", "Which rivers are listed in this text?"),  # needs it
        (
            "Who is named in this passage as the winner?",
            "Who is named in this passage as the winner?",
        ),  # not at the end
        ("What is the text about?", "What is the text about?"),
    ],
)
def test_a_reference_to_the_shown_sentence_is_cut_from_the_end_of_a_question(written: str, kept: str) -> None:
    from scopeguard.generation.offline._natural import standalone

    assert standalone(written) == kept


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What players are mentioned in the other sentence?", "refers to the sentence it was written from"),
        ("Which numbers come from this sentence and the next?", "refers to the sentence it was written from"),
        ("What type of movie does this sentence describe?", "refers to the sentence it was written from"),
        (
            "What is the main point of the sentence about the soup?",
            "refers to the sentence it was written from",
        ),
        (
            "What is the name of the app that the sentence is referring to?",
            "refers to the sentence it was written from",
        ),
        (
            "What color is the fruit that the sentence is describing?",  # read on half M
            "refers to the sentence it was written from",
        ),
        (
            "What does the sentence 'the captain was sentenced' mean?",  # read on half N
            "refers to the sentence it was written from",
        ),
        (
            "What does the sentence 'the captain was sentenced' answer?",  # read on half Z
            "refers to the sentence it was written from",
        ),
        (
            "What is the name of the novel that the sentence is based on?",  # read on half Z
            "refers to the sentence it was written from",
        ),
        ("What is the main point of the sentence?", "refers to the sentence it was written from"),  # AC
        ("What was the length of the sentence handed to the captain?", None),  # a court's sentence
        ("Why was the sentence of the captain cut to a year?", None),
        ("Which rivers are listed in this text?", None),  # a user may ask about "this text"
    ],
)
def test_a_question_left_referring_to_its_sentence_is_unusable(question: str, reason: str | None) -> None:
    from scopeguard.generation.offline._natural import degenerate, unmoored

    assert degenerate(question) == reason
    assert unmoored(question, "The captain was sentenced in this text and rivers are listed.") == reason


def test_an_in_scope_candidate_about_the_prompt_not_its_sentence_is_dropped(tmp_path: Path) -> None:
    about_the_prompt = {
        SENTENCES[0]: "What are the people, places, and things?",  # the prompt's words, not the sentence's
        SENTENCES[2]: "What passengers are mentioned in the sentence?",  # standalone() cannot cut it
    }

    def script(prompt: str) -> str:
        if IN_SCOPE_ASK in prompt:
            sentence = prompt.split('Sentence: "', 1)[1].split('"\n', 1)[0]
            if sentence in about_the_prompt:
                return answered(about_the_prompt[sentence], prompt)
        return _reply(prompt)

    config = CONFIG.model_copy(update={"mode": "perturb"})
    gen, _ = _generator(config, script)
    gen.run([{"doc_id": "alderby", "text": DOC}], tmp_path, length_rule=RULE)
    record = CheckpointStore(tmp_path).load_all()["alderby"]
    kept = [q.question for q in record.questions if q.label == "in_scope"]
    assert kept == [IN_SCOPE[1], IN_SCOPE[3]]
    reasons = {d.question: d.reason for d in record.dropped if d.label == "in_scope"}
    assert reasons["What are the people, places, and things?"] == (
        "not a usable question: shares no word with its sentence"
    )
    assert reasons["What passengers are mentioned in the sentence?"] == (
        "not a usable question: refers to the sentence it was written from"
    )
    # neither is rewritten into out-of-scope questions: only the kept ones are perturbed
    sources = {q.source_question for q in (*record.questions, *record.dropped) if q.label == "out_of_scope"}
    assert sources and sources <= {IN_SCOPE[1], IN_SCOPE[3]}


def test_a_document_whose_writer_asks_about_no_sentence_fails_with_its_dropped_candidates(
    tmp_path: Path,
) -> None:
    def script(prompt: str) -> str:  # SmolLM2-135M's reply to every sentence
        if IN_SCOPE_ASK in prompt:
            return answered("What is the answer to this question?", prompt)
        raise AssertionError("nothing is rewritten when no in-scope question is usable")

    gen, _ = _generator(CONFIG, script)
    summary = gen.run([{"doc_id": "alderby", "text": DOC}], tmp_path, length_rule=RULE)
    record = CheckpointStore(tmp_path).load_all()["alderby"]
    assert record.status == "failed" and summary.docs_failed == 1
    assert record.error == "in-scope questions: none usable (1 written, each dropped with its reason)"
    assert [d.reason for d in record.dropped] == ["not a usable question: shares no word with its sentence"]


def test_in_scope_questions_are_topped_up_from_more_sentences_while_short(tmp_path: Path) -> None:
    # eight sentences with one name each: the first five are asked, then more while fewer than 3 kept
    towns = ["Arlow", "Bexley", "Corran", "Dunmore", "Elston", "Farrow", "Glenby", "Harlow"]
    sentences = [f"The ferry from {t} leaves the harbour every morning at a fixed hour." for t in towns]

    def script(prompt: str) -> str:
        if IN_SCOPE_ASK in prompt:
            town = next(t for t in towns if t in prompt)
            return answered(f"When does the ferry from {town} leave the harbour?", prompt)
        return json.dumps({"questions": ["Who owns the ferry company of the harbour?"] * 2})

    answerable = {f"When does the ferry from {t} leave the harbour?" for t in ("Arlow", "Farrow", "Glenby")}
    llm = ScriptedChatModel(script, model="fake")
    detector = ScriptedDetector(lambda q: 0.1 if q in answerable else 0.99)
    config = CONFIG.model_copy(update={"mode": "unstated", "min_oos": 0})
    gen = Generator(llm, config=config, judge=detector, concurrency=1, progress=False)
    gen.run([{"doc_id": "ferries", "text": " ".join(sentences)}], tmp_path, length_rule=RULE)
    asked = [t for c in llm.calls if IN_SCOPE_ASK in c.prompt for t in towns if t in c.prompt]
    assert asked == towns[:7]  # five, then Farrow and Glenby until three are kept; Harlow never
    record = CheckpointStore(tmp_path).load_all()["ferries"]
    assert [q.question for q in record.questions if q.label == "in_scope"] == sorted(answerable, key=str)


TOWNS = [
    "Arlow",
    "Bexley",
    "Corran",
    "Dunmore",
    "Elston",
    "Farrow",
    "Glenby",
    "Harlow",
    "Ilford",
    "Jarrow",
    "Kelso",
    "Lanark",
]
# a review's sentences whose line breaks were lost: each stop touches the next capital ("hour.The")
GLUED = "".join(f"The ferry from {t} leaves the harbour every morning at a fixed hour." for t in TOWNS)


def _ferries(prompt: str) -> str:
    if IN_SCOPE_ASK in prompt:
        town = next(t for t in TOWNS if t in prompt)
        return answered(f"When does the ferry from {town} leave the harbour?", prompt)
    if "What is this text mainly about" in prompt:
        return json.dumps({"subject": "the ferries of the harbour", "kind": "other"})
    return json.dumps({"questions": ["Who owns the ferry company of the harbour?"]})


def _ferry_run(path: Path, script=_ferries, **settings: Any) -> tuple[ScriptedChatModel, Any]:  # type: ignore[no-untyped-def]
    llm = ScriptedChatModel(script, model="fake")
    answerable = "When does the ferry from Arlow leave the harbour?"
    detector = ScriptedDetector(lambda q: 0.1 if q == answerable else 0.99)
    config = CONFIG.model_copy(update={"mode": "unstated", "min_oos": 0, **settings})
    gen = Generator(llm, config=config, judge=detector, concurrency=1, progress=False)
    gen.run([{"doc_id": "ferries", "text": GLUED}], path, length_rule=RULE)
    return llm, CheckpointStore(path).load_all()["ferries"]


def test_sentences_glued_at_their_stops_are_asked_one_by_one() -> None:
    from scopeguard._sentences import split_sentences
    from scopeguard.generation.offline._reading import informative_sentences

    assert len(informative_sentences(GLUED, 20)) == 12  # one 156-word "sentence" unsplit: none
    assert split_sentences(GLUED) == [GLUED]  # the verifier's and the detector's split is unchanged
    text = "Worth it.For TV, fine. See Crackle.com or e.g.The list. The U.S.Army and Mrs.Smith came!Then go."
    assert split_sentences(text, glued=True) == [
        "Worth it.",
        "For TV, fine.",
        "See Crackle.com or e.g.The list.",
        "The U.S.Army and Mrs.Smith came!",
        "Then go.",
    ]


def test_a_sentence_too_long_to_ask_about_is_cut_at_its_clause_breaks() -> None:
    from scopeguard.generation.offline._reading import informative_sentences

    run_on = (
        "I did some research on the Marlin ferry and checked out all of my options..these seemed to be "
        "the best value for the money....Harbour Lines well known for ferries to Wrenfield and Kelso "
        "sailing every day of the week; the crossing takes two hours from the pier at Arlow -- "
        "and the cafe on board was good!UPDATE 2008: I have now sailed with them for three years."
    )
    text = f"{run_on} The ferry to Kelso leaves at nine from the harbour."
    assert informative_sentences(text, 10) == ["The ferry to Kelso leaves at nine from the harbour."]
    assert informative_sentences(text, 10, split_long=True) == [
        "I did some research on the Marlin ferry and checked out all of my options",
        "these seemed to be the best value for the money",
        "Harbour Lines well known for ferries to Wrenfield and Kelso sailing every day of the week",
        "the crossing takes two hours from the pier at Arlow",  # "and the cafe ...": 7 words
        "UPDATE 2008: I have now sailed with them for three years.",
        "The ferry to Kelso leaves at nine from the harbour.",
    ]


def test_a_review_written_without_capitals_is_cut_into_its_sentences_not_refused() -> None:
    from scopeguard.generation.offline._reading import informative_sentences, unusable_reason

    lower = (
        "the ferry to kelso sounds great at any speed... really like the quiet deck at low tide. "
        "pretty big cabins for the small crossing from arlow, but it's worth it!excellent trip! you "
        "get way more than you pay for at the harbour. i sailed in sept of 2010 and it's jan 2014 now "
        "and the engines are still fine, the crew is kind and the cafe on board is still open daily."
    )
    assert unusable_reason(lower) == "too short: 1 sentence (the offline modes need 2)"
    assert unusable_reason(lower, split_long=True) is None
    assert informative_sentences(lower, 10) == []
    assert informative_sentences(lower, 10, split_long=True) == [
        "the ferry to kelso sounds great at any speed",
        "really like the quiet deck at low tide.",
        "pretty big cabins for the small crossing from arlow, but it's worth it!",  # "excellent trip!": 2
        "you get way more than you pay for at the harbour.",
        "i sailed in sept of 2010 and it's jan 2014 now and the engines are still fine, the crew is "
        "kind and the cafe on board is still open daily.",
    ]


def test_in_scope_sentences_are_asked_up_to_more_in_scope_beyond_the_first(tmp_path: Path) -> None:
    # only Arlow's question is answerable: the first five sentences, then more_in_scope more
    llm, record = _ferry_run(tmp_path)
    asked = [t for c in llm.calls if IN_SCOPE_ASK in c.prompt for t in TOWNS if t in c.prompt]
    assert asked == TOWNS[:11]
    assert [q.question for q in record.questions if q.label == "in_scope"] == [
        "When does the ferry from Arlow leave the harbour?"
    ]
    llm, _ = _ferry_run(tmp_path / "before", more_in_scope=3)
    asked = [t for c in llm.calls if IN_SCOPE_ASK in c.prompt for t in TOWNS if t in c.prompt]
    assert asked == TOWNS[:8]


def test_top_up_rounds_ask_the_sentences_not_asked_yet(tmp_path: Path) -> None:
    settings = {"min_oos": 3, "extra_rounds": 3, "more_in_scope": 0}
    llm, _ = _ferry_run(tmp_path, **settings)
    unstated = [c for c in llm.calls if "does not answer" in c.prompt]
    by_round = [[t for c in unstated if c.seed == seed for t in TOWNS if t in c.prompt] for seed in (1, 2, 3)]
    # the first round asks the five most informative (all alike: the first five), each top-up the next
    first = [t for c in unstated if c.temperature == 0.0 for t in TOWNS if t in c.prompt]
    assert first == TOWNS[:5] and by_round == [TOWNS[5:10], TOWNS[10:], TOWNS[:5]]


def test_top_up_rounds_are_shown_the_questions_asked_already(tmp_path: Path) -> None:
    def script(prompt: str) -> str:  # one question per sentence, the same but for its town
        if "does not answer" in prompt:
            town = next(t for t in TOWNS if t in prompt.split("Already asked")[0])
            return json.dumps({"questions": [f"Who owns the {town} ferry?"]})
        return _ferries(prompt)

    settings = {"min_oos": 20, "extra_rounds": 2, "more_in_scope": 0, "unstated_per_sentence": 1}
    llm, _ = _ferry_run(tmp_path, script=script, **settings)
    unstated = [c.prompt for c in llm.calls if "does not answer" in c.prompt]
    # the first round asks five sentences, each top-up round the next (5, then the last 2)
    assert len(unstated) == 12 and not any("Already asked" in p for p in unstated[:5])
    # the first top-up call is shown the first round's five questions, each later one the last eight
    shown = "; ".join(f'"Who owns the {t} ferry?"' for t in TOWNS[:5])
    assert f"Already asked, so ask about other details: {shown}." in unstated[5]
    last = "; ".join(f'"Who owns the {t} ferry?"' for t in TOWNS[3:11])
    assert f"Already asked, so ask about other details: {last}." in unstated[-1]


def test_a_question_with_the_content_words_of_one_kept_is_a_copy(tmp_path: Path) -> None:
    def script(prompt: str) -> str:
        if "does not answer" in prompt:
            return json.dumps({"questions": ["What is the price of the Kelso ferry?"]})
        if "follow-up questions" in prompt:
            again = "What is the price of Kelso ferry?"
            return json.dumps({"questions": [again, "Who built the Kelso ferry?"]})
        return _ferries(prompt)

    settings = {"mode": "offline", "min_oos": 3, "extra_rounds": 0, "more_in_scope": 0}
    _, record = _ferry_run(tmp_path, script=script, **settings)
    kept = [q.question for q in record.questions if q.label == "out_of_scope"]
    assert kept == ["What is the price of the Kelso ferry?", "Who built the Kelso ferry?"]
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons["What is the price of Kelso ferry?"] == (
        "a copy of a question already kept (the same content words)"
    )


def test_an_unstated_question_about_the_subject_need_not_share_a_word_with_its_sentence(
    tmp_path: Path,
) -> None:
    def script(prompt: str) -> str:
        if "What is this text mainly about" in prompt:
            return json.dumps({"subject": "the ferries of Kelso and Lanark", "kind": "other"})
        if "does not answer" in prompt:  # about the subject, not the sentence's ferry (Arlow's, ...)
            return json.dumps({"questions": ["Who pays the crews of Kelso and Lanark?"]})
        return _ferries(prompt)

    settings = {"min_oos": 1, "extra_rounds": 0, "more_in_scope": 0}
    _, record = _ferry_run(tmp_path, script=script, **settings)
    assert [q.question for q in record.questions if q.label == "out_of_scope"] == [
        "Who pays the crews of Kelso and Lanark?"
    ]


def test_an_enumerated_follow_up_series_is_dropped_with_its_reason(tmp_path: Path) -> None:
    series = [f"What was the {n} ferry of the Marlin line to the harbour?" for n in ("second", "third")]

    def script(prompt: str) -> str:
        if "follow-up questions" in prompt:
            return json.dumps({"questions": series})
        return _reply(prompt)

    config = CONFIG.model_copy(update={"mode": "followup"})
    gen, _ = _generator(config, script)
    gen.run([{"doc_id": "wrenfield", "text": DOC}], tmp_path, length_rule=RULE)
    record = CheckpointStore(tmp_path).load_all()["wrenfield"]
    assert not {q.question for q in record.questions} & set(series)
    reasons = {d.question: d.reason for d in record.dropped}
    assert all("an enumeration" in reasons[q] for q in series)


def _asked_run(
    path: Path,
    unstated: dict[int, Any],
    in_scope: dict[int, str] | None = None,
    subject: tuple[str, str] | None = None,
    **settings: Any,
) -> Any:
    """The record of a run of mode unstated whose writer asks ``unstated[i]`` of sentence ``i``
    (out of scope) and ``in_scope[i]`` (in scope; the filter finds those answerable), and the
    fake's own questions of the others; ``subject``: the subject and kind it names (else the
    fake's)."""
    in_scope = in_scope or {}

    def script(prompt: str) -> str:
        if subject and "What is this text mainly about" in prompt:
            return json.dumps({"subject": subject[0], "kind": subject[1]})
        if IN_SCOPE_ASK in prompt:
            asked = in_scope
        else:
            asked = unstated if "sentence does not answer" in prompt else {}
        for i, question in asked.items():
            if SENTENCES[i] in prompt:  # one question, or a reply's list of them
                if asked is in_scope:
                    return answered(question, prompt)
                return json.dumps({"questions": question if isinstance(question, list) else [question]})
        return _reply(prompt)

    scores = {**SCORES, **{q: 0.1 for q in in_scope.values()}}
    config = CONFIG.model_copy(update={"mode": "unstated", "extra_rounds": 0, **settings})
    llm = ScriptedChatModel(script, model="fake")
    gen = Generator(llm, config=config, judge=ScriptedDetector(lambda q: scores.get(q, 0.99)), progress=False)
    gen.run([{"doc_id": "wrenfield", "text": DOC}], path, length_rule=RULE)
    return CheckpointStore(path).load_all()["wrenfield"]


def _unstated_oos(path: Path, asked: dict[int, str], **settings: Any) -> list[str]:
    """The out-of-scope questions :func:`_asked_run` keeps."""
    return [q.question for q in _asked_run(path, asked, **settings).questions if q.label == "out_of_scope"]


def test_questions_about_the_writer_or_about_two_things_are_dropped_with_their_reasons(
    tmp_path: Path,
) -> None:
    writer_name = "What is the name of the person who welcomed the plan at the meeting?"  # in scope
    unstated = {
        0: "What did the person say about the harbour plan of Wrenfield?",
        2: "What is the price of the ferry Marlin and the new pier?",
    }
    record = _asked_run(tmp_path, unstated, {3: writer_name})
    reasons = {d.question: d.reason for d in record.dropped}
    assert (
        reasons[unstated[0]]
        == "not a usable question: asks about the document's writer (the person), not the document"
    )
    assert reasons[unstated[2]] == "not a usable question: asks about two things at once (Marlin and the)"
    assert reasons[writer_name].startswith("not a usable question: asks the name of the person (the writer)")
    assert not {q.question for q in record.questions} & {writer_name, *unstated.values()}
    # switched off, the filter decides and keeps all three
    off = ("writer", "one_thing", "about_subject")
    record = _asked_run(
        tmp_path / "off",
        unstated,
        {3: writer_name},
        screens=tuple(s for s in DEFAULT_SCREENS if s not in off),
    )
    kept = {q.question: q.label for q in record.questions}
    assert kept[writer_name] == "in_scope"
    assert kept[unstated[0]] == kept[unstated[2]] == "out_of_scope"


@pytest.mark.parametrize(
    ("other", "own", "reason", "screen"),
    [
        (  # the document names Ines Holt only in a sentence without "ferry" or "Marlin"
            "What is the salary of Ines Holt?",
            "When was the ferry Marlin built?",
            "about another thing the document names (Ines Holt), not its subject (the ferry Marlin)",
            "other_thing",
        ),
        (  # the harbour's pier is another thing than the ferry
            "How long is the new pier of the harbour?",
            "Which shipyard built the ferry Marlin?",
            "not about the document's subject (the ferry Marlin): no word of it, nor 'it'",
            "about_subject",
        ),
    ],
)
def test_an_unstated_question_about_another_thing_than_the_subject_is_dropped(
    tmp_path: Path, other: str, own: str, reason: str, screen: str
) -> None:
    asked = {1: other, 2: own}
    # of a kind without a name of its own: a subject first named late stays the model's
    marlin: dict[str, Any] = {"subject": ("the ferry Marlin", "other")}
    record = _asked_run(tmp_path, asked, **marlin)
    assert {d.question: d.reason for d in record.dropped}[other] == f"not a usable question: {reason}"
    assert own in {q.question for q in record.questions}
    # both screens off: the filter decides and keeps it
    both = ("other_thing", "about_subject")
    off = _asked_run(
        tmp_path / "off", asked, **marlin, screens=tuple(s for s in DEFAULT_SCREENS if s not in both)
    )
    assert other in {q.question for q in off.questions}
    # this screen off: about_subject still drops Ines Holt (no word of the subject's), but
    # other_thing keeps the pier (it names nothing)
    alone = _asked_run(
        tmp_path / "alone", asked, **marlin, screens=tuple(s for s in DEFAULT_SCREENS if s != screen)
    )
    assert (other in {q.question for q in alone.questions}) == (screen == "about_subject")


def test_a_document_keeps_at_most_max_oos_out_of_scope_questions_and_asks_no_more(tmp_path: Path) -> None:
    asked: dict[int, Any] = {
        0: "Who paid for the harbour plan of Wrenfield?",
        1: ["How long will the work on the harbour last?", "Who drew up the harbour plan for Wrenfield?"],
        2: "Where did the fishermen of Wrenfield meet before?",
        3: "How long will the new pier of the harbour plan be?",
    }
    uncapped = _asked_run(tmp_path / "all", asked, max_oos=None, unstated_per_sentence=2)
    kept = [q.question for q in uncapped.questions if q.label == "out_of_scope"]
    assert kept == [asked[0], *asked[1], asked[2], asked[3]]
    record = _asked_run(tmp_path, asked, max_oos=2, unstated_per_sentence=2)
    assert [q.question for q in record.questions if q.label == "out_of_scope"] == kept[:2]
    # the third came in the second's reply: dropped with the reason; later sentences are not asked
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons[kept[2]] == "the document has its 2 out-of-scope questions (max_oos)"
    assert kept[3] not in reasons and kept[4] not in reasons
    # a run saved without the cap is not resumed under it
    with pytest.raises(ConfigurationError, match="max_oos: None -> 3"):
        _asked_run(tmp_path / "all", asked, unstated_per_sentence=2, max_oos=3)


def test_max_oos_below_min_oos_is_refused_and_a_larger_minimum_raises_the_default_cap() -> None:
    with pytest.raises(ValueError, match=r"max_oos \(2\) is below min_oos \(4\)"):
        GenerationConfig(min_oos=4, max_oos=2)
    assert GenerationConfig(min_oos=5).max_oos == 5
    assert GenerationConfig().max_oos == 3 and GenerationConfig.paper().max_oos is None


def test_an_unstated_question_may_call_the_subject_by_its_kind(tmp_path: Path) -> None:
    # a film named "Wrenfield"; "the movie" is no word of the subject's, its sentence's or the document's
    movie = "Who is the director of the movie?"
    kept = _unstated_oos(tmp_path, {2: movie}, subject=("Wrenfield", "film"))
    assert movie in kept
    # "the place" is the subject, not a detail asked for: "range" alone is no word of the document's
    place = "What is the price range of the place?"
    assert place in _unstated_oos(tmp_path / "place", {2: place}, subject=("Wrenfield", "place"))


def test_an_unstated_question_asking_when_it_is_available_is_dropped(tmp_path: Path) -> None:
    when = "When is the ferry Marlin available?"
    record = _asked_run(tmp_path, {2: when})
    assert {d.question: d.reason for d in record.dropped}[when] == (
        "not a usable question: asks when it is available or open (no detail a reader of the document "
        "would ask)"
    )
    # switched off (with about_subject), the filter decides and keeps it
    screens = tuple(s for s in DEFAULT_SCREENS if s not in ("odd_details", "about_subject"))
    assert when in _unstated_oos(tmp_path / "off", {2: when}, screens=screens)


def test_an_unstated_question_naming_what_the_document_never_writes_is_dropped(tmp_path: Path) -> None:
    abroad = "How many passengers did the ferry Marlin carry to France?"
    record = _asked_run(tmp_path, {2: abroad})
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons[abroad] == "not a usable question: names what its document never writes (France)"
    # a name the document writes, in any case, is its own
    named = "What did the ferry MARLIN cost the Council of Wrenfield?"
    assert named in _unstated_oos(tmp_path / "written", {2: named})
    # switched off (with about_subject: the ferry is not the fake's subject), the filter decides and
    # keeps it
    screens = tuple(s for s in DEFAULT_SCREENS if s not in ("unwritten_name", "about_subject"))
    assert abroad in _unstated_oos(tmp_path / "off", {2: abroad}, screens=screens)


def test_a_question_asking_the_publisher_is_no_copy_of_one_asking_when_it_was_published(
    tmp_path: Path,
) -> None:
    year, publisher = (
        "When was the harbour plan of Wrenfield published?",
        "Who was the publisher of the harbour plan of Wrenfield?",
    )
    assert {year, publisher} <= set(_unstated_oos(tmp_path, {0: year, 1: publisher}))


def test_the_centre_of_a_city_the_document_does_not_name_is_the_city_centre(tmp_path: Path) -> None:
    guessed = "How far is the harbour of Wrenfield from the centre of Paris?"
    named = "How far is the new pier from the centre of Wrenfield?"
    questions = _unstated_oos(tmp_path, {0: guessed, 2: named})
    assert "How far is the harbour of Wrenfield from the city centre?" in questions
    assert named in questions  # Wrenfield is the document's own


# P(out of scope) of the unstated questions about the first five ferries (threshold 0.5, margin 0.25)
FILL_SCORES = {
    "Who owns the Arlow ferry company?": 0.95,  # kept
    "Who owns the Bexley ferry company?": 0.7,  # within the margin; a copy of Corran's once kept
    "Who owns the Bexley ferry?": 0.72,  # within the margin, the most confident
    "Who sells the tickets for the Dunmore ferry?": 0.6,  # within the margin
    "Who owns the Elston ferry company?": 0.3,  # answerable: never filled
}


def _fill_script(prompt: str) -> str:
    if "does not answer" in prompt:
        town = next(t for t in TOWNS if t in prompt.split("Sentence", 1)[-1])
        question = next((q for q in FILL_SCORES if town in q), None)
        if town == "Corran":
            question = "Who owns the Bexley ferry?"
        return json.dumps({"questions": [question or f"Who owns the {town} ferry company?"]})
    return _ferries(prompt)


def _fill_run(path: Path, score, **settings: Any) -> Any:  # type: ignore[no-untyped-def]
    llm = ScriptedChatModel(_fill_script, model="fake")
    config = CONFIG.model_copy(update={"mode": "unstated", "extra_rounds": 0, "more_in_scope": 0, **settings})
    gen = Generator(llm, config=config, judge=ScriptedDetector(score), concurrency=1, progress=False)
    summary = gen.run([{"doc_id": "ferries", "text": GLUED}], path, length_rule=RULE)
    record = CheckpointStore(path).load_all()["ferries"]
    assert summary.filled == sum(bool(q.filled) for q in record.questions)
    if summary.filled:
        assert f"({summary.filled} kept from within the filter's margin" in summary.table()
    else:
        assert "within the filter's margin" not in summary.table()
    return record


def test_a_document_short_of_min_oos_keeps_the_most_confident_within_the_margin(tmp_path: Path) -> None:
    record = _fill_run(tmp_path, lambda q: FILL_SCORES.get(q, 0.1), min_oos=3)
    kept = [(q.question, q.filled) for q in record.questions if q.label == "out_of_scope"]
    assert kept == [
        ("Who owns the Arlow ferry company?", None),
        ("Who owns the Bexley ferry?", True),
        ("Who sells the tickets for the Dunmore ferry?", True),
    ]
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons["Who owns the Bexley ferry company?"].startswith("filter: out of scope within the margin")
    assert "Who owns the Bexley ferry?" not in reasons  # kept, no longer dropped
    assert reasons["Who owns the Elston ferry company?"] == "filter: answerable from the document"
    assert any(i.step == "fill_from_margin" for i in record.issues)
    rows = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    assert [r["provenance"].get("filled") for r in rows if r["label"] == "out_of_scope"] == [None, True, True]
    # enough kept without them: nothing is filled
    record = _fill_run(tmp_path / "enough", lambda q: FILL_SCORES.get(q, 0.1), min_oos=1)
    assert [q.question for q in record.questions if q.label == "out_of_scope"] == [
        "Who owns the Arlow ferry company?"
    ]


def test_a_document_short_of_in_scope_questions_keeps_the_least_doubted_within_the_margin(
    tmp_path: Path,
) -> None:
    doubt = {"Arlow": 0.1, "Bexley": 0.7, "Corran": 0.6, "Dunmore": 0.9}  # Dunmore's beyond the margin

    def score(question: str) -> float:
        town = next((t for t in doubt if f"from {t} leave" in question), None)
        return doubt[town] if town else 0.99

    record = _fill_run(tmp_path, score, min_oos=0)
    kept = [(q.question, q.filled) for q in record.questions if q.label == "in_scope"]
    assert kept == [
        ("When does the ferry from Arlow leave the harbour?", None),
        ("When does the ferry from Corran leave the harbour?", True),
        ("When does the ferry from Bexley leave the harbour?", True),
    ]
    assert [q.true_claim for q in record.questions if q.filled] == [
        "The ferry from Corran leaves the harbour every morning at a fixed hour.",
        "The ferry from Bexley leaves the harbour every morning at a fixed hour.",
    ]


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("What is Sheraton's address?", None),  # four words that name something
        ("When was it published?", "too short (4 words)"),
        ("Who wrote the book?", "too short (4 words)"),
        ("What is Sheraton?", "too short (3 words)"),
    ],
)
def test_a_four_word_question_is_long_enough_when_it_names_something(
    question: str, reason: str | None
) -> None:
    from scopeguard.generation.offline._natural import degenerate

    assert degenerate(question) == reason


def test_the_overlap_rule_does_not_count_the_details_an_unstated_question_asks_for(tmp_path: Path) -> None:
    far = "How far is the Kelso ferry from the city centre?"  # 2 of 5 content words in the document

    def script(prompt: str) -> str:
        if "does not answer" in prompt:
            return json.dumps({"questions": [far]})
        return _ferries(prompt)

    settings = {"mode": "unstated", "min_oos": 1, "extra_rounds": 0, "more_in_scope": 0}
    _, record = _ferry_run(tmp_path, script=script, **settings)
    assert [q.question for q in record.questions if q.label == "out_of_scope"] == [far]


@pytest.mark.parametrize("kind", ["product", "place", "book", "film", ""])
def test_every_detail_the_unstated_prompt_hints_at_is_one_the_overlap_rule_skips(kind: str) -> None:
    from scopeguard.detection.read.text import content_stems
    from scopeguard.generation.offline._keeper import DETAIL_STEMS
    from scopeguard.prompts import render

    prompt = render(
        "gen_unstated_question",
        sentence="Fine.",
        n=2,
        subject="the hotel",
        kind=kind,
        firm=False,
    )
    hints = prompt.split("such as ", 1)[1].split(", never", 1)[0]
    assert set(content_stems(hints)) - {"its"} <= DETAIL_STEMS, hints


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("What is the director of the film?", "Who is the director of the film?"),
        ("What was the author of Quiet?", "Who was the author of Quiet?"),
        ("Where is the location of the BART?", "Where is the BART?"),
        ("What is the owner of Westin St. Francis?", "Who is the owner of Westin St. Francis?"),
        ("When was The book published?", "When was the book published?"),  # halves P and U
        ("Who directed The Lord of the Rings?", "Who directed The Lord of the Rings?"),  # a name
        ("What is the director's name?", "What is the director's name?"),
        ("What is the publisher of Quiet?", "What is the publisher of Quiet?"),  # may be a firm
        ("What is the directory of the files?", "What is the directory of the files?"),
    ],
)
def test_a_slip_no_person_would_make_is_mended(written: str, kept: str) -> None:
    from scopeguard.generation.offline._natural import standalone

    assert standalone(written) == kept


def _copy_run(path: Path, asked: list[str], **settings: Any) -> Any:
    """A ferry run whose unstated step asks ``asked[0]`` and whose follow-ups ask the rest."""

    def script(prompt: str) -> str:
        if "does not answer" in prompt:
            return json.dumps({"questions": asked[:1]})
        if "follow-up questions" in prompt:
            return json.dumps({"questions": asked[1:]})
        return _ferries(prompt)

    config = {
        "mode": "offline",
        "min_oos": 9,
        "extra_rounds": 0,
        "more_in_scope": 0,
        "followups": len(asked) - 1,
    }
    return _ferry_run(path, script=script, **config, **settings)[1]


def test_a_question_asking_the_same_detail_of_the_same_thing_as_one_kept_is_a_copy(tmp_path: Path) -> None:
    asked = [
        "What is the price of the Kelso ferry today?",
        "What is the price of the ferry today?",  # the same detail of the same thing, fewer words
        "Who built the Kelso ferry today?",  # another detail
        "What is the price of the Lanark ferry today?",  # another thing
        "What is the price range of the Kelso ferry today?",  # the same detail, more words
    ]

    record = _copy_run(tmp_path, asked)
    kept = [q.question for q in record.questions if q.label == "out_of_scope"]
    assert kept == [asked[0], asked[2], asked[3]]
    reasons = {d.question: d.reason for d in record.dropped}
    copy = "a copy of a question already kept (the same detail of the same thing)"
    assert reasons[asked[1]] == reasons[asked[4]] == copy


def test_a_question_asking_the_same_detail_in_a_synonym_is_a_copy(tmp_path: Path) -> None:
    asked = [
        "What is the price of the Kelso ferry today?",
        "Where can I buy a ticket for the Kelso ferry?",
        "How much does the Kelso ferry cost today?",  # price, in other words
        "Where is a ticket for the Kelso ferry sold?",  # where to buy, in other words
        "How far is the Kelso ferry from the harbour?",
        "What is the distance of the Kelso ferry from the harbour?",  # how far, in other words
    ]

    record = _copy_run(tmp_path, asked)
    assert [q.question for q in record.questions if q.label == "out_of_scope"] == [
        asked[0],
        asked[1],
        asked[4],
    ]
    reasons = {d.question: d.reason for d in record.dropped}
    copy = "a copy of a question already kept (the same detail of the same thing)"
    assert reasons[asked[2]] == reasons[asked[3]] == reasons[asked[5]] == copy


def _answerable_run(
    path: Path, out_of_scope: str, in_scope: str | None = None, **settings: Any
) -> tuple[Any, Any]:
    """A run on GLUED whose unstated reply for the Dunmore sentence is ``out_of_scope`` and whose
    in-scope reply for the Bexley sentence is ``in_scope``; the filter finds both answerable."""

    def script(prompt: str) -> str:
        if in_scope and IN_SCOPE_ASK in prompt and "Bexley" in prompt:
            return answered(in_scope, prompt)
        if "does not answer" in prompt and "Dunmore" in prompt.split("Sentence", 1)[-1]:
            return json.dumps({"questions": [out_of_scope]})
        return _fill_script(prompt)

    llm = ScriptedChatModel(script, model="fake")
    config = CONFIG.model_copy(
        update={"mode": "unstated", "extra_rounds": 0, "more_in_scope": 0, "min_oos": 0, **settings}
    )
    score = lambda q: 0.2 if q in (out_of_scope, in_scope) else FILL_SCORES.get(q, 0.1)  # noqa: E731
    gen = Generator(llm, config=config, judge=ScriptedDetector(score), concurrency=1, progress=False)
    summary = gen.run([{"doc_id": "ferries", "text": GLUED}], path, length_rule=RULE)
    return summary, CheckpointStore(path).load_all()["ferries"]


def test_a_question_asking_a_price_of_a_document_stating_none_is_out_of_scope_whatever_the_filter_says(
    tmp_path: Path,
) -> None:
    price = "What does a ticket on the Dunmore ferry cost?"
    in_scope_price = "What is the fare of the ferry from Bexley?"

    summary, record = _answerable_run(tmp_path, price, in_scope_price)  # the filter finds both answerable
    kept = {q.question: q for q in record.questions}
    assert kept[price].label == "out_of_scope" and kept[price].absent_detail == "price"
    assert kept[price].filter is not None and kept[price].filter.label == "in_scope"  # what it said
    assert kept["Who owns the Arlow ferry company?"].absent_detail is None  # the filter agreed
    reasons = {d.question: d.reason for d in record.dropped}
    assert reasons[in_scope_price] == "not answerable from the document: it states no price"
    assert in_scope_price not in kept
    assert summary.absent == 1
    assert "(1 out-of-scope kept though the filter found them answerable" in summary.table()
    rows = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    assert [r["provenance"].get("absent_detail") for r in rows if r["question"] == price] == ["price"]
    # a document that names an amount of money leaves a price question to the filter
    assert absent_detail(price, GLUED + " A ticket costs $4.") is None


def test_where_to_buy_of_a_document_naming_no_shop_is_out_of_scope(tmp_path: Path) -> None:
    where = "Where can I buy a ticket for the Dunmore ferry?"
    assert absent_detail(where, GLUED) == "store"  # GLUED names no shop, chain or website

    kept = {q.question: q for q in _answerable_run(tmp_path, where)[1].questions}
    assert kept[where].label == "out_of_scope" and kept[where].absent_detail == "store"


def test_who_wrote_it_of_a_document_naming_no_writer_is_out_of_scope(
    tmp_path: Path,
) -> None:
    who = "Who wrote the timetable of the Dunmore ferry?"
    assert absent_detail(who, GLUED) == "author"  # GLUED names no writer

    kept = {q.question: q for q in _answerable_run(tmp_path, who)[1].questions}
    assert kept[who].label == "out_of_scope" and kept[who].absent_detail == "author"
    # a document naming one leaves it to the filter
    named = GLUED + " Its timetable is by Ada Voss."
    assert absent_detail(who, named) is None


def test_an_unstated_question_asking_for_a_name_is_dropped(tmp_path: Path) -> None:
    name = "What is the name of the ferry Marlin's captain?"
    record = _asked_run(tmp_path, {2: name})
    assert {d.question: d.reason for d in record.dropped}[name] == (
        "not a usable question: asks for a name (the document names it elsewhere, or nothing of the kind)"
    )
    # switched off (with about_subject), the filter decides and keeps it
    screens = tuple(s for s in DEFAULT_SCREENS if s not in ("no_name", "about_subject"))
    assert name in _unstated_oos(tmp_path / "off", {2: name}, screens=screens)


def test_a_question_kept_again_with_one_count_changed_is_dropped(tmp_path: Path) -> None:
    # asked of two sentences, so no one reply holds the series
    sixties = "What did the harbour of Wrenfield ship in the 1960s?"
    seventies = "What did the harbour of Wrenfield ship in the 1970s?"
    record = _asked_run(tmp_path, {0: sixties, 1: seventies})
    assert sixties in [q.question for q in record.questions]
    assert {d.question: d.reason for d in record.dropped}[seventies] == (
        "not a usable question: an enumeration (a question kept with one count changed)"
    )
    # without the natural screen, the filter decides and keeps both
    screens = tuple(s for s in DEFAULT_SCREENS if s not in ("natural", "about_subject"))
    assert {sixties, seventies} <= set(
        _unstated_oos(tmp_path / "off", {0: sixties, 1: seventies}, screens=screens)
    )
