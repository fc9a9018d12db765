"""A rule-based fake LLM that answers every generator prompt in the expected shapes (for fast tests).

It reads the prompt (which template, which facts) and replies like a cooperative model would; tests
use it through :class:`scopeguard.testing.ScriptedChatModel` (a callable script).
"""

from __future__ import annotations

import re
import time

_ITEM = re.compile(r"^(\d+)\. (.+)$", re.MULTILINE)


def _last_block(prompt: str, header: str) -> list[str]:
    block = prompt.rsplit(header, 1)[1]
    block = re.split(r"\n\n", block.strip(), maxsplit=1)[0]
    return [m.group(2) for m in _ITEM.finditer(block)]


def eloq_reply(prompt: str, *, answerable_word: str = "ANSWERABLE") -> str:
    """The reply a cooperative model would give to ``prompt``."""
    if "The answer is: Yes or No" in prompt:
        verdict = "No" if answerable_word in prompt.rsplit("Question:", 1)[-1] else "Yes"
        return f"The question names a detail the document never mentions.\nThe answer is: {verdict}"
    if prompt.rstrip().endswith("most important facts:"):
        n = int(re.search(r"list (\d+) most important facts", prompt).group(1))  # type: ignore[union-attr]
        return "Here are the facts:\n" + "\n".join(
            f"{i}. The council of Alderby approved spending plan {i} for the harbour district."
            for i in range(1, n + 1)
        )
    if prompt.rstrip().endswith("Completed list of facts:"):
        facts = [m.group(2) for m in _ITEM.finditer(prompt.split('"""')[1])]
        out = [
            f"{i}. A regional ferry operator {i} agreed to sponsor the plan in {2020 + i}."
            if f == "(missing)"
            else f"{i}. {f}"
            for i, f in enumerate(facts, 1)
        ]
        return "\n".join(out)
    if "Write only your guesses" in prompt:
        numbers = re.findall(r"^(\d+)\. <your guess for fact \d+>$", prompt, re.MULTILINE)
        return "\n".join(
            f"{m}. A regional ferry operator {m} agreed to sponsor the plan in {2020 + int(m)}."
            for m in numbers
        )
    if prompt.rstrip().endswith("Remaining hallucinated facts:"):
        facts = _last_block(prompt, "hallucinated facts:\n")
        return "\n".join(f"{i}. {f}" for i, f in enumerate(facts, 1) if i != 1)
    if "hallucinated facts:" in prompt and prompt.rstrip().endswith("Questions:"):
        facts = _last_block(prompt, "hallucinated facts:\n")
        qs = []
        for i, f in enumerate(facts, 1):
            word = f" {answerable_word}" if i == 1 else ""
            op = re.search(r"operator (\d+)", f)
            ref = op.group(1) if op else "X"
            qs.append(
                f"{i}. Why did regional ferry operator {ref} decide to sponsor"
                f" the harbour plan{word} that year?"
            )
        return "\n".join(qs)
    if "questions that the document directly answers" in prompt:
        n = int(re.search(r"top (\d+) questions", prompt).group(1))  # type: ignore[union-attr]
        return "\n".join(
            f"{i}. Which spending plan number {i} did the council of Alderby approve for the harbour?"
            for i in range(1, n + 1)
        )
    raise AssertionError(f"fake LLM got an unexpected prompt: {prompt[:200]!r}")


def slow_eloq_reply(delay: float):  # type: ignore[no-untyped-def]
    def reply(prompt: str) -> str:
        time.sleep(delay)
        return eloq_reply(prompt)

    return reply


def make_text(topic: str, words: int = 180) -> str:
    """An invented document of about ``words`` words (never real news)."""
    sentence = (
        f"The council of Alderby discussed the {topic} plan for the harbour district on Monday evening. "
    )
    n = len(sentence.split())
    return (sentence * (words // n + 1)).strip()
