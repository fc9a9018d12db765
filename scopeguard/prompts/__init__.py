"""Prompt templates, one named ``.j2`` file each, rendered in one place.

``render("oos_judgement", document=..., question=...)`` loads ``oos_judgement.j2`` from this
package and renders it with jinja2 (``StrictUndefined``: a missing variable is an error).
Templates that carry a seed paper's published instructions cite the paper in a comment.

Untrusted text (documents, passages, questions, responses being judged, facts an LLM wrote) goes
through the ``fenced`` filter, ``{{ document|fenced }}``. The paper's prompts wrap documents in
triple double quotes; a document containing three double quotes would otherwise close its own
block, and the text after them would read as instructions. :func:`fenced` breaks every run of
three or more double quotes (or backticks, the Markdown fence) by turning every second one into a
typographic look-alike, so untrusted text never contains a template's delimiter. It is
idempotent and leaves all other text unchanged. Every template passes each untrusted variable
through it (``tests/prompts`` renders every template with hostile values to check).
"""

from __future__ import annotations

from scopeguard.prompts._render import (
    available_templates,
    fenced,
    render,
    render_documents,
    template_examples,
    template_source,
)

__all__ = [
    "available_templates",
    "fenced",
    "render",
    "render_documents",
    "template_examples",
    "template_source",
]
