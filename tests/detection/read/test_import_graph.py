"""The read wing's modules import one another without a circle: an engine (llama.cpp, transformers)
needs nothing from the reader that builds it, an extractor nothing from the lookup that builds it.
Function-level imports count too (a lazy import only hides a circle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import scopeguard.detection.read as read

PACKAGE = Path(read.__file__).parent
PREFIX = "scopeguard.detection.read."


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[path.stem] = {
            node.module.removeprefix(PREFIX)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX)
        }
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle among the package's modules (``__init__`` aside), or ``None``."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done or module not in graph:
            return None
        for target in sorted(graph[module]):
            found = visit(target, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(set(graph) - {"__init__"}):
        found = visit(module, [])
        if found:
            return found
    return None


def test_no_module_of_the_read_wing_imports_itself_back() -> None:
    graph = _graph()
    assert {"reader", "scorer", "llamacpp", "transformers"} <= set(graph)
    circle = _circle(graph)
    assert circle is None, " -> ".join(circle or [])


def test_the_check_finds_a_circle() -> None:
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"))
def test_each_module_imports_alone(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {PREFIX}{module}"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
