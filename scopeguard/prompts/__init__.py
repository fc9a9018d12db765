"""Prompt templates, one named ``.j2`` file each, rendered in one place.

``render("oos_judgement", document=..., question=...)`` loads ``oos_judgement.j2`` from this
package and renders it with jinja2 (``StrictUndefined``: a missing variable is an error).
Templates that carry a seed paper's published instructions cite the paper in a comment.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from scopeguard.errors import ConfigurationError

__all__ = ["available_templates", "render", "render_documents"]


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("scopeguard", "prompts"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def available_templates() -> list[str]:
    """Names of all shipped templates (without the ``.j2`` suffix)."""
    files = resources.files("scopeguard.prompts").iterdir()
    return sorted(p.name[:-3] for p in files if p.name.endswith(".j2"))


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
