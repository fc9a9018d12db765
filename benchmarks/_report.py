"""Shared output of the benchmark scripts: a plain table on stdout and a JSON file of the figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def report(rows: list[dict[str, Any]], result: dict[str, Any], path: Path) -> None:
    """Print ``rows`` as a ``|``-separated table, then write ``result`` (with the rows) to ``path``."""
    cols = list(rows[0])
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**result, "rows": rows}, indent=1), encoding="utf-8")
    print(f"wrote {path}")
