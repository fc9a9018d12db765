"""The documentation site builds with ``mkdocs build --strict``, and its references are complete:
every public name (``scopeguard.__all__`` and the integrations' ``__all__``) has an API entry and
every ``scopeguard`` command a CLI entry. Skips without the docs tools (the ``dev`` extra)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mkdocs", reason="the docs tools are in the dev extra")
pytest.importorskip("material", reason="mkdocs-material is in the dev extra")
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is in the dev extra")

import typer.main

import scopeguard
from scopeguard.cli import app

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = [
    "scopeguard.calibration",
    "scopeguard.client",
    "scopeguard.testing",
    "scopeguard.verification",
    "scopeguard.retrieval",
    "scopeguard.judging",
    "scopeguard.scale",
    "scopeguard.batch",
]
OUR_PACKAGES = {"scopeguard", "langchain_scopeguard", "llama_index_scopeguard"}
INTEGRATIONS = {
    "langchain_scopeguard": ROOT / "integrations/langchain-scopeguard/langchain_scopeguard/__init__.py",
    "llama_index_scopeguard": ROOT / "integrations/llama-index-scopeguard/llama_index_scopeguard/__init__.py",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _declared_all(init: Path) -> list[str]:
    """A package's ``__all__`` read from its source (the integrations' libraries need not be installed)."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"no __all__ in {init}")


def test_site_builds_strict(site: Path) -> None:
    assert (site / "getting-started" / "index.html").is_file()
    assert (site / "reference" / "api" / "index.html").is_file()


def test_every_public_name_has_an_api_entry(site: Path) -> None:
    page = (site / "reference" / "api" / "index.html").read_text()
    missing = [name for name in scopeguard.__all__ if f'id="scopeguard.{name}"' not in page]
    assert not missing, f"add to docs/reference/api.md: {missing}"


@pytest.mark.parametrize("module", SUBPACKAGES)
def test_every_subpackage_name_has_an_api_entry(site: Path, module: str) -> None:
    page = (site / "reference" / "subpackages" / "index.html").read_text()
    names = importlib.import_module(module).__all__
    # a function named like its own module (retrieval.study) has its entry under the module's path
    missing = [n for n in names if f'id="{module}.{n}"' not in page and f'id="{module}.{n}.{n}"' not in page]
    assert not missing, f"add to docs/reference/subpackages.md: {missing}"


@pytest.mark.parametrize("package", sorted(INTEGRATIONS))
def test_every_integration_name_has_an_api_entry(site: Path, package: str) -> None:
    page = (site / "reference" / "integrations" / "index.html").read_text()
    names = _declared_all(INTEGRATIONS[package])
    missing = [name for name in names if f'id="{package}.{name}"' not in page]
    assert not missing, f"add to docs/reference/integrations.md: {missing}"


def test_every_command_has_a_cli_entry(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text()
    commands = list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert len(commands) > 10
    missing = [name for name in commands if f'id="scopeguard-{name}"' not in page]
    assert not missing, f"the CLI reference lacks: {missing}"


def _python_blocks() -> list[tuple[str, str, str, str]]:
    """Every Python example of the README and the docs: where it is, its run marker, the setup it
    needs, its code. An example preceded by ``<!-- doctest: slow -->`` (invisible once rendered) is
    also run; ``<!-- doctest: slow setup=NAME -->`` runs it after :data:`SETUPS` ``[NAME]`` has made
    the objects a user's app would already have (a vector store, an index, a chat model)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pattern = re.compile(r"^(?:<!-- doctest: (\w+)(?: setup=(\w+))? -->\n)?```python\n(.*?)^```", re.S | re.M)
    return [
        (f"{path.relative_to(ROOT)}#{i}", marker, setup, code)
        for path in files
        for i, (marker, setup, code) in enumerate(pattern.findall(path.read_text()))
    ]


BLOCKS = _python_blocks()
CORPUS = [
    "Brazil won the 1998 World Cup semi-final against the Netherlands on penalties.",
    "France beat Brazil 3-0 in the 1998 World Cup final at the Stade de France.",
]


@contextlib.contextmanager
def _langchain_app() -> Iterator[dict[str, Any]]:
    """A LangChain app's own objects: the chunks it indexed in an in-memory vector store
    (LangChain's deterministic test embeddings) and a chat model (LangChain's scripted one)."""
    pytest.importorskip("langchain_scopeguard", reason="needs the LangChain integration")
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    chunks = [Document(page_content=text) for text in CORPUS]
    store.add_documents(chunks)
    chat_model = FakeListChatModel(responses=["France won it."] * 4)
    yield {"vector_store": store, "chunks": chunks, "chat_model": chat_model}


@contextlib.contextmanager
def _llamaindex_app() -> Iterator[dict[str, Any]]:
    """A LlamaIndex app's own objects: a vector index (LlamaIndex's mock embeddings) and its mock
    LLM, also the app's default (``Settings.llm``) as an app would configure it; the process's
    settings are put back afterwards."""
    pytest.importorskip("llama_index_scopeguard", reason="needs the LlamaIndex integration")
    from llama_index.core import Document, Settings, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    saved = Settings._llm, Settings._embed_model
    Settings.llm, Settings.embed_model = MockLLM(), MockEmbedding(embed_dim=32)
    try:
        index = VectorStoreIndex.from_documents([Document(text=t) for t in CORPUS])
        yield {"index": index, "llm": Settings.llm}
    finally:
        Settings._llm, Settings._embed_model = saved


SETUPS = {"langchain": _langchain_app, "llamaindex": _llamaindex_app}


@pytest.mark.parametrize(
    ("where", "code"), [(w, c) for w, _, _, c in BLOCKS], ids=[w for w, _, _, _ in BLOCKS]
)
def test_python_examples_parse_and_import(where: str, code: str) -> None:
    """Every Python example parses, and the names it imports from scopeguard and its integrations
    exist (an example that names a renamed class fails here)."""
    tree = ast.parse(code, filename=where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OUR_PACKAGES:
            module = pytest.importorskip(node.module)
            missing = [alias.name for alias in node.names if not hasattr(module, alias.name)]
            assert not missing, f"{where}: {node.module} has no {missing}"


RUN = [(w, setup, c) for w, marker, setup, c in BLOCKS if marker == "slow"]


def test_every_named_setup_exists() -> None:
    assert {setup for _, setup, _ in RUN if setup} <= set(SETUPS)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(("where", "setup", "code"), RUN, ids=[w for w, _, _ in RUN])
def test_marked_examples_run(where: str, setup: str, code: str) -> None:
    """The examples marked to run do, as written, with the packaged models (they are offline)."""
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    app: contextlib.AbstractContextManager[dict[str, Any]] = (
        SETUPS[setup]() if setup else contextlib.nullcontext({})
    )
    with app as names:
        exec(compile(code, where, "exec"), {"__name__": "__doc_example__", **names})


def _shell_commands() -> list[tuple[str, str]]:
    """Every ``scopeguard COMMAND ...`` line of the README's and the docs' shell examples."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for path in files:
        for block in re.findall(r"^```(?:bash|sh|console)\n(.*?)^```", path.read_text(), re.S | re.M):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split(" #")[0]
                if not line.lstrip().startswith("pip") and re.search(r"(?:^|\s)scopeguard\s+[a-z]", line):
                    found.append((str(path.relative_to(ROOT)), line.strip()))
    return found


def test_shell_examples_name_real_commands_and_options() -> None:
    """An example that names a command or an option the CLI no longer has fails here."""
    root = typer.main.get_command(app)
    options = {
        name: {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        for name, command in root.commands.items()  # type: ignore[attr-defined]
    }
    examples = _shell_commands()
    assert len(examples) > 10
    wrong = []
    for where, line in examples:
        match = re.search(r"(?:^|\s)scopeguard\s+([a-z-]+)(.*)", line)
        assert match
        command, rest = match.groups()
        if command not in options:
            wrong.append(f"{where}: no command {command!r}: {line}")
            continue
        wrong += [
            f"{where}: {command} has no {option}: {line}"
            for option in re.findall(r"(?<!\S)(--?[a-zA-Z][\w-]*)", rest)
            if option not in options[command]
        ]
    assert not wrong, "\n".join(wrong)
