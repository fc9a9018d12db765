"""Template loading and rendering: what :mod:`scopeguard.prompts` exports (its ``__all__`` names
them; see its docs)."""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from scopeguard.errors import ConfigurationError

_DELIMITER_RUN = re.compile(r'"{3,}|`{3,}')
_LOOKALIKE = {'"': "\u201d", "`": "\u02cb"}  # right double quotation mark, modifier letter grave


def _soften(match: re.Match[str]) -> str:
    return "".join(ch if i % 2 == 0 else _LOOKALIKE[ch] for i, ch in enumerate(match.group()))


def fenced(text: Any) -> str:
    """``text`` made unable to close a block delimited by three double quotes or three backticks.

    Every second character of a run of three or more ``"`` becomes U+201D (and of backticks,
    U+02CB), so ``'say ""\" now'`` becomes ``'say "\u201d" now'``. Idempotent; other text is kept.
    """
    return _DELIMITER_RUN.sub(_soften, str(text))


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("scopeguard", "prompts"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["fenced"] = fenced
    return env


def available_templates() -> list[str]:
    """Names of all shipped templates (without the ``.j2`` suffix)."""
    files = resources.files("scopeguard.prompts").iterdir()
    return sorted(p.name[:-3] for p in files if p.name.endswith(".j2"))


def template_source(name: str) -> str:
    """The source text of the template ``name`` (for cache keys that must change with the wording)."""
    path = resources.files("scopeguard.prompts").joinpath(f"{name}.j2")
    if not path.is_file():
        raise ConfigurationError(
            f"unknown prompt template {name!r}; available: {', '.join(available_templates())}"
        )
    return path.read_text(encoding="utf-8")


@cache
def template_examples(name: str) -> tuple[str, ...]:
    """Every string the template ``name`` sets with ``{% set %}`` (its worked examples and their
    parts), longest first: text a model may copy from the prompt into its reply, which the question
    generator screens for (:func:`scopeguard.generation.offline.copied_phrase`). Strings written
    inline in a template's body are not found: a template that shows examples sets them."""
    import jinja2.nodes

    tree = _env().parse(template_source(name))
    found = {
        node.value
        for assign in tree.find_all(jinja2.nodes.Assign)
        for node in assign.node.find_all(jinja2.nodes.Const)
        if isinstance(node.value, str)
    }
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def render(name: str, /, **variables: Any) -> str:
    """Render the template ``name`` with ``variables`` and strip surrounding whitespace."""
    import jinja2

    try:
        template = _env().get_template(f"{name}.j2")
    except jinja2.TemplateNotFound:
        raise ConfigurationError(
            f"unknown prompt template {name!r}; available: {', '.join(available_templates())}"
        ) from None
    try:
        return str(template.render(**variables)).strip()
    except jinja2.UndefinedError as exc:
        raise ConfigurationError(f"prompt template {name!r}: {exc}") from None


def render_documents(documents: Any) -> str:
    """Join retrieved documents into the single ``{document}`` slot of the paper's prompts."""
    return render("documents_block", documents=list(documents))
