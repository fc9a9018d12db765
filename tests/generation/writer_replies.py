"""The scripted writer's reply to the offline in-scope prompt (gen_offline_in_scope), for the tests."""

from __future__ import annotations

import json

from scopeguard.generation.offline._replies import MAX_ANSWER_CHARS

#: words only the in-scope prompt has
IN_SCOPE_ASK = "Then write one question whose answer is exactly that detail"


def answered(question: str, prompt: str, answer: str | None = None) -> str:
    """The reply ``{"answer": ..., "question": question}`` to an in-scope ``prompt``: ``answer``, or by
    default the words of the prompt's sentence (up to MAX_ANSWER_CHARS), which the sentence holds and
    which say more than the question."""
    if answer is None:
        sentence = prompt.split('Sentence: "', 1)[1].split('"\n', 1)[0]
        short = len(sentence) <= MAX_ANSWER_CHARS
        answer = sentence if short else sentence[:MAX_ANSWER_CHARS].rsplit(" ", 1)[0]
    return json.dumps({"answer": answer, "question": question})
