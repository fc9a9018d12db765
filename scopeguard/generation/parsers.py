"""Strict parsers for the generator's LLM replies.

Every parser either returns exactly what was asked for or raises :class:`ReplyParseError` with a
short ``reason`` (recorded in provenance when the retry also fails). Nothing is ever re-indexed
silently: a list whose numbers skip, repeat or run past the expected count is an error, and a
recovered list whose kept facts moved is an error.

Reply shapes handled (seen from small local models and API models): preamble lines ("Here are the
facts:"), markdown bold numbers (``**1.**``), ``1)`` / ``1 -`` / ``Fact 1:`` numbering, bullets before
numbers, continuation lines, closing remarks after a blank line, a truncated last item (reply cut by
``max_tokens``), and "None" for an empty list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from scopeguard.errors import LLMResponseError

__all__ = [
    "MISSING",
    "NumberedItem",
    "ReplyParseError",
    "parse_claims",
    "parse_guesses",
    "parse_numbered",
    "parse_question_list",
    "parse_questions_by_number",
    "parse_recovered",
    "parse_remaining",
    "similarity",
]

MISSING = "(missing)"

_ITEM = re.compile(
    r"""^\s*(?:[-*•]\s*)?            # optional bullet
        (?:\*\*|__)?\s*                # optional bold
        (?:(?:fact|claim|question|q)\s*)?#?\s*
        (\d{1,3})\s*                   # the number
        (?:\*\*|__)?\s*[.):\-]\s*      # separator
        (?:\*\*|__)?\s*(.*?)\s*$""",
    re.IGNORECASE | re.VERBOSE,
)
_NONE_REPLY = re.compile(r"^\W*(none|no remaining( hallucinated)? facts?|n/?a)\W*$", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+")


class ReplyParseError(LLMResponseError):
    """A reply does not have the asked structure; ``reason`` is a short machine-friendly tag."""

    def __init__(self, reason: str, message: str, *, reply: str | None = None) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {message}", reply=reply)


@dataclass(frozen=True)
class NumberedItem:
    number: int
    text: str


def _clean(text: str) -> str:
    text = text.strip().strip("*_").strip()
    if len(text) >= 2 and text[0] in "\"'“" and text[-1] in "\"'”":
        text = text[1:-1].strip()
    return re.sub(r"\s+", " ", text)


_LABEL = re.compile(
    r"^(?:\*\*|__)?(?:missing\s+)?(?:fact|claim|guess|question)\s*#?\s*(\d{1,3})\s*[:.)\-]\s*", re.I
)


def _strip_label(text: str, number: int) -> str:
    """``"1. Fact 1: The ..."`` -> ``"The ..."``: a label repeating the item's own number is no content."""
    text = text.strip()
    m = _LABEL.match(text)
    return text[m.end() :] if m and int(m.group(1)) == number else text


def parse_numbered(text: str, *, truncated: bool = False) -> list[NumberedItem]:
    """All numbered items of ``text`` in order.

    Unnumbered lines before the first item are preamble (ignored); an unnumbered line right after an
    item continues it; after a blank line, unnumbered text is a closing remark (ignored). When
    ``truncated`` (the reply hit ``max_tokens``), the last item is dropped because it may be cut.
    """
    items: list[NumberedItem] = []
    open_item = False
    for line in text.splitlines():
        m = _ITEM.match(line)
        if m and m.group(2).strip():
            number = int(m.group(1))
            items.append(NumberedItem(number, _clean(_strip_label(m.group(2), number))))
            open_item = True
        elif not line.strip():
            open_item = False
        elif open_item and items:
            last = items[-1]
            items[-1] = NumberedItem(last.number, _clean(f"{last.text} {line}"))
    items = [it for it in items if it.text]
    if truncated and items:
        items = items[:-1]
    return items


def _consecutive(items: list[NumberedItem], reply: str) -> list[NumberedItem]:
    """Items numbered 1..k without gaps; a second list starting again at 1 is ignored (a repeat)."""
    if not items:
        raise ReplyParseError("no_list", "the reply has no numbered list", reply=reply)
    if items[0].number != 1:
        raise ReplyParseError("bad_numbering", f"the list starts at {items[0].number}, not 1", reply=reply)
    out = [items[0]]
    for it in items[1:]:
        if it.number == out[-1].number + 1:
            out.append(it)
        elif it.number == 1:
            break  # the model repeated its list: keep the first one
        else:
            raise ReplyParseError(
                "bad_numbering", f"item {it.number} follows item {out[-1].number}", reply=reply
            )
    return out


def parse_claims(
    text: str, n: int, *, truncated: bool = False, lenient: bool = False, min_items: int = 2
) -> list[str]:
    """Exactly ``n`` facts numbered 1..n (strict).

    ``lenient`` (used only after a retry with a firmer instruction) accepts a well-formed list of at
    least ``min_items`` and at most ``n`` items, or the first ``n`` of a longer one.
    """
    items = _consecutive(parse_numbered(text, truncated=truncated), text)
    if len(items) == n:
        return [it.text for it in items]
    if lenient and len(items) >= min_items:
        return [it.text for it in items[:n]]
    reason = "truncated" if truncated and len(items) < n else "wrong_count"
    raise ReplyParseError(reason, f"expected {n} numbered items, got {len(items)}", reply=text)


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of lower-cased word sets (0..1)."""
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def _unusable_guess(guess: str, others: Sequence[str], threshold: float) -> bool:
    """Empty, still "(missing)", or a copy (word overlap >= ``threshold``) of one of ``others``."""
    return not guess or MISSING in guess.lower() or any(similarity(guess, o) >= threshold for o in others)


def parse_recovered(
    text: str,
    facts: Sequence[str],
    masked: Sequence[int],
    *,
    truncated: bool = False,
    keep_threshold: float = 0.35,
    lenient: bool = False,
) -> dict[int, str]:
    """The recovered facts for the ``masked`` positions (0-based), checked by round trip.

    Accepted shapes: the full list of ``len(facts)`` items (kept facts must still be at their
    numbers, else the indices shifted), or exactly ``len(masked)`` items (only the guesses, mapped
    in order). A guess that is empty, still "(missing)", or a copy of another listed fact (word
    overlap >= 0.8, so a copy with a changed word or two counts) is an error.

    ``lenient`` (only after a firmer retry) aligns by content instead of by number: items that match
    no kept fact are the guesses, assigned to the masked positions in order (small models often drop
    the "(missing)" lines and renumber). It still fails when there are too few new items.
    """
    try:
        return _parse_recovered_strict(
            text, facts, masked, truncated=truncated, keep_threshold=keep_threshold
        )
    except ReplyParseError:
        if not lenient:
            raise
    kept = [facts[i] for i in range(len(facts)) if i not in set(masked) and facts[i] != MISSING]
    new: list[str] = []
    for it in parse_numbered(text, truncated=truncated):
        if _unusable_guess(it.text, kept, keep_threshold):
            continue
        if all(similarity(it.text, other) < 0.8 for other in new):
            new.append(it.text)
    if len(new) < len(masked):
        raise ReplyParseError(
            "not_recovered", f"{len(new)} new fact(s) for {len(masked)} missing ones", reply=text
        )
    return dict(zip(sorted(masked), new[: len(masked)], strict=True))


def _parse_recovered_strict(
    text: str,
    facts: Sequence[str],
    masked: Sequence[int],
    *,
    truncated: bool,
    keep_threshold: float,
    copy_threshold: float = 0.8,
) -> dict[int, str]:
    n = len(facts)
    items = _consecutive(parse_numbered(text, truncated=truncated), text)
    masked_set = set(masked)
    if len(items) == n:
        for i, it in enumerate(items):
            if i not in masked_set and facts[i] != MISSING and similarity(it.text, facts[i]) < keep_threshold:
                raise ReplyParseError(
                    "shifted", f"item {i + 1} does not match the kept fact {i + 1}", reply=text
                )
        guesses = {i: items[i].text for i in masked}
    elif len(items) == len(masked):
        guesses = {i: items[k].text for k, i in enumerate(sorted(masked))}
    else:
        reason = "truncated" if truncated else "wrong_count"
        raise ReplyParseError(
            reason, f"expected {n} facts (or the {len(masked)} missing ones), got {len(items)}", reply=text
        )
    kept = [facts[i] for i in range(n) if i not in masked_set and facts[i] != MISSING]
    for i, guess in guesses.items():
        if not guess or MISSING in guess.lower():
            raise ReplyParseError("not_recovered", f"fact {i + 1} is still missing", reply=text)
        if _unusable_guess(guess, kept, copy_threshold):
            raise ReplyParseError("copied", f"fact {i + 1} copies another listed fact", reply=text)
    return guesses


def parse_guesses(
    text: str,
    facts: Sequence[str],
    masked: Sequence[int],
    *,
    truncated: bool = False,
    copy_threshold: float = 0.8,
    lenient: bool = False,
) -> tuple[dict[int, str], list[int]]:
    """Guesses for the ``masked`` positions (0-based) from a reply that lists only the guesses.

    Items must carry the numbers of the missing facts (1-based, any order), or be exactly
    ``len(masked)`` items numbered 1..k, mapped in order. A guess that is empty, still
    "(missing)", or a copy of a listed fact or of an earlier guess (word overlap >= ``copy_threshold``)
    is left out and its
    position returned in the second value; the claim there keeps its previous version. Raises
    :class:`ReplyParseError` when no usable guess remains or the numbers match neither shape.

    ``lenient`` (only after a firmer retry) also takes, from a reply with other numbers, the items
    whose number is a missing fact's (first occurrence); items under other numbers are ignored,
    never moved to another position.
    """
    items = parse_numbered(text, truncated=truncated)
    wanted = sorted(masked)
    numbers = [it.number for it in items]
    if items and sorted(numbers) == [i + 1 for i in wanted]:
        raw = {it.number - 1: it.text for it in items}
    elif numbers == list(range(1, len(wanted) + 1)):
        raw = {i: it.text for i, it in zip(wanted, items, strict=True)}
    elif lenient and any(it.number - 1 in wanted for it in items):
        raw = {}
        for it in items:
            if it.number - 1 in wanted:
                raw.setdefault(it.number - 1, it.text)
    else:
        reason = "truncated" if truncated else ("no_list" if not items else "bad_numbering")
        raise ReplyParseError(
            reason, f"expected guesses numbered {[i + 1 for i in wanted]}, got {numbers}", reply=text
        )
    kept = [f for i, f in enumerate(facts) if i not in set(masked) and f != MISSING]
    guesses: dict[int, str] = {}
    rejected: list[int] = [i for i in wanted if i not in raw]
    for i, guess in sorted(raw.items()):
        earlier = [*kept, *guesses.values()]  # a guess repeating another guess is a copy too
        if _unusable_guess(guess, earlier, copy_threshold):
            rejected.append(i)
        else:
            guesses[i] = guess
    rejected.sort()
    if not guesses:
        raise ReplyParseError("not_recovered", "every guess is missing or copies a listed fact", reply=text)
    return guesses, rejected


def parse_remaining(
    text: str, false_facts: Sequence[str], *, truncated: bool = False, match_threshold: float = 0.5
) -> list[int]:
    """0-based indices of the hallucinated facts the model kept ("None" means none).

    Each returned item must carry an original number in 1..len(false_facts) and its text must match
    the fact at that number; a number that points at a different fact is an error, never re-mapped.
    """
    if not text.strip():
        raise ReplyParseError("empty", "the reply is empty", reply=text)
    if _NONE_REPLY.match(text.strip().splitlines()[0]):
        return []
    items = parse_numbered(text, truncated=truncated)
    if not items:
        raise ReplyParseError("no_list", "no numbered facts and no 'None'", reply=text)
    out: list[int] = []
    for it in items:
        if not 1 <= it.number <= len(false_facts):
            raise ReplyParseError(
                "bad_numbering", f"number {it.number} is not in 1..{len(false_facts)}", reply=text
            )
        idx = it.number - 1
        if similarity(it.text, false_facts[idx]) < match_threshold:
            raise ReplyParseError(
                "mismatch", f"item {it.number} does not match hallucinated fact {it.number}", reply=text
            )
        if idx in out:
            continue  # the model repeated an item: idempotent
        out.append(idx)
    return sorted(out)


def _as_question(text: str) -> str:
    q = re.sub(r"^(question|q)\s*[:\-]\s*", "", _clean(text), flags=re.IGNORECASE)
    return _clean(q)


def parse_questions_by_number(
    text: str, n_facts: int, *, truncated: bool = False, lenient: bool = False
) -> dict[int, str]:
    """Questions keyed by the 0-based index of their fact (facts without a question are omitted).

    Numbers must lie in 1..n_facts and not repeat; every item must be a question (ends with "?").

    ``lenient`` (only after a firmer retry) keeps the items that satisfy those rules under their own
    numbers and ignores the rest: items numbered past ``n_facts`` (small models repeat the one
    question they were asked for down a list), a second item under a number, and items that are
    not questions. An item is never moved to another number. It still fails when nothing is left.
    """
    items = parse_numbered(text, truncated=truncated)
    if not items:
        raise ReplyParseError("no_list", "the reply has no numbered questions", reply=text)
    out: dict[int, str] = {}
    for it in items:
        q = _as_question(it.text)
        if not 1 <= it.number <= n_facts:
            error = ReplyParseError("bad_numbering", f"number {it.number} is not in 1..{n_facts}", reply=text)
        elif it.number - 1 in out:
            error = ReplyParseError("bad_numbering", f"two questions numbered {it.number}", reply=text)
        elif not q.endswith("?"):
            error = ReplyParseError("not_a_question", f"item {it.number} is not a question", reply=text)
        else:
            out[it.number - 1] = q
            continue
        if not lenient:
            raise error
    if not out:
        raise ReplyParseError("no_question", f"no question numbered 1..{n_facts}", reply=text)
    return out


def parse_question_list(text: str, n: int, *, truncated: bool = False, lenient: bool = False) -> list[str]:
    """``n`` questions numbered 1..n, each ending with "?"; ``lenient`` accepts 1..n of them."""
    items = _consecutive(parse_numbered(text, truncated=truncated), text)
    questions = [_as_question(it.text) for it in items]
    bad = [i + 1 for i, q in enumerate(questions) if not q.endswith("?")]
    if bad:
        raise ReplyParseError("not_a_question", f"item(s) {bad} are not questions", reply=text)
    if len(questions) == n or (lenient and len(questions) >= 1):
        return questions[:n]
    reason = "truncated" if truncated and len(questions) < n else "wrong_count"
    raise ReplyParseError(reason, f"expected {n} questions, got {len(questions)}", reply=text)
