"""``benchmarks/README.md`` indexes every script in ``benchmarks/`` and ``benchmarks/studies/``, and
every result file it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


def test_every_benchmark_script_is_indexed() -> None:
    index = (BENCHMARKS / "README.md").read_text()
    scripts = [p for p in [*BENCHMARKS.glob("*.py"), *BENCHMARKS.glob("*.sh")] if p.name != "__init__.py"]
    studies = list((BENCHMARKS / "studies").glob("*.py"))
    assert studies, "the design studies live in benchmarks/studies/"
    missing = [p.name for p in scripts if f"`{p.name}`" not in index]
    missing += [f"studies/{p.name}" for p in studies if f"`studies/{p.name}`" not in index]
    assert not missing, f"add to benchmarks/README.md: {missing}"


def test_the_result_files_the_index_names_exist() -> None:
    index = (BENCHMARKS / "README.md").read_text()
    named = set(re.findall(r"`((?:studies/)?results/[\w./-]+\.(?:json|md))`", index))
    named |= {f"results/{n}" for n in re.findall(r"`(\w+\.json)`", index)}
    assert named
    missing = [n for n in named if not (BENCHMARKS / n).is_file()]
    assert not missing, missing
