"""The layers of the architecture map (docs/concepts/architecture.md) hold: a module imports only
from its own layer or below.

Every ``import scopeguard...`` counts, at module level or inside a function (a lazy import is still
a dependency). The layers are listed bottom to top, as in that map.
"""

from __future__ import annotations

import ast
from pathlib import Path

import scopeguard

ROOT = Path(scopeguard.__file__).parent

# bottom to top; names are the first component under scopeguard ("" is the package __init__), and
# the second one inside the detection wing (read -> signals -> head -> detectors)
LAYERS: list[set[str]] = [
    {"errors", "types", "prompts", "parsing", "_optional", "_paths", "_progress", "_sentences", "_bert"},
    {"data", "querylog", "models", "_gguf", "llamacpp"},
    {"runs", "judging", "llm", "batch"},
    {"voting"},
    # the detection wing, in the order its data flows
    {"detection.read"},
    {"detection.signals"},
    {"detection.head"},
    {"detection.tune"},
    {"detection.detectors", "detection.profile", "detection"},
    {"guard", "policies", "_prereading", "_speculation", "_batching", "_answering"},
    {"generation", "evaluation", "retrieval", "review", "serve", "client"},
    {"verification", "demo", "scale", "calibration", "_doctor"},
    {"testing", "_fake_openai", "_scripted_llm", "_test_servers"},
    {"cli", "__main__", ""},
]


def _top(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "detection":
        return f"detection.{parts[2]}"
    return parts[1] if len(parts) > 1 else ""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "scopeguard":  # from scopeguard import calibration
                found.update(f"scopeguard.{a.name}" for a in node.names)
            elif node.module.startswith("scopeguard."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("scopeguard."))
    return found


def _rank(top: str) -> int:
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(
        f"scopeguard.{top} is in no layer: add it to LAYERS and to docs/concepts/architecture.md"
    )


def test_no_module_imports_from_a_layer_above_it() -> None:
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        here = _rank(_top(module))
        for target in _imports(path):
            if _rank(_top(target)) > here:
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_every_top_level_module_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    tops = {p.stem for p in ROOT.glob("*.py")} | packages
    wing = ROOT / "detection"
    tops |= {f"detection.{p.stem}" for p in wing.glob("*.py")} | {
        f"detection.{p.name}" for p in wing.iterdir() if (p / "__init__.py").is_file()
    }
    tops.discard("__init__")
    tops.discard("detection.__init__")
    for top in tops:
        _rank(top)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    fake = tmp_path / "mod.py"
    fake.write_text("def f():\n    from scopeguard.cli import app\n    import scopeguard.guard\n")
    assert _imports(fake) == {"scopeguard.cli", "scopeguard.guard"}
    assert _rank("cli") > _rank("errors")
    assert _top("scopeguard.detection.read.reader") == "detection.read"
    assert _rank("detection.head") > _rank("detection.signals") > _rank("detection.read")
