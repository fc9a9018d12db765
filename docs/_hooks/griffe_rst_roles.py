"""Griffe extension: the docstrings' Sphinx roles (``:class:`~scopeguard.Guard```) as Markdown code.

The package's docstrings cite objects the Sphinx way; mkdocstrings renders Markdown, where such a
role would show its colons and backquotes. A role becomes a code span of its target (the last part
only with ``~``, as Sphinx shows it; the text of ``text <target>``). The docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|exc|mod|data|obj|const):`([^`]+)`")


def _plain(match: re.Match[str]) -> str:
    target = match.group(1).strip()
    text = re.fullmatch(r"(.+?)\s*<[^>]+>", target)
    if text:
        target = text.group(1)
    elif target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_plain, obj.docstring.value)
