"""The paper's wing: Algorithm 1 of ELOQ (guided hallucination) for one document, one module per step.

Steps (paper numbering): 1 extract ``n`` claims (``_extract``); 2-7 partition them (``i mod k``)
and, for each round and subset, mask the subset as "(missing)" and have the LLM recover it without
the document (``_recover``; faithful: every subset in every round, ``rounds x k`` calls; efficient:
one subset per round, ``rounds`` calls); 8 remove hallucinated claims supported by the document or
the true claims (``_remove``); 9 write one question per remaining claim (``_questions``); 10 drop
the questions the judge finds answerable from the document (the filter, shared with the offline
wing: :meth:`~scopeguard.generation._context.DocumentContext.filter_question`). In-scope questions
come from appendix B.9 (``_in_scope``). :func:`generate_paper` runs them in order (``_algorithm``).

Every reply is parsed strictly; an unusable reply is retried once with a firmer instruction, and every
failure is recorded as a :class:`~scopeguard.generation.checkpoint.StepIssue` with the reply id.
The prompts are the ``gen_*`` templates of :mod:`scopeguard.prompts` that these steps name.
"""

from scopeguard.generation.paper._algorithm import generate_paper

__all__ = ["generate_paper"]
