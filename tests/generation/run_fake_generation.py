"""Helper for the kill-and-resume test: runs ``scopeguard generate`` with a slow fake LLM.

Usage: python run_fake_generation.py CORPUS OUT DELAY_SECONDS
"""

from __future__ import annotations

import sys

from scopeguard.llm import register_backend
from scopeguard.testing import EloqChatModel


def _factory(arg: str, **_: object) -> EloqChatModel:
    return EloqChatModel(latency=float(arg or 0))


if __name__ == "__main__":
    corpus, out, delay = sys.argv[1:4]
    register_backend("fake", _factory)
    from scopeguard.cli._app import app

    app(
        ["generate", corpus, "--out", out, "--llm", f"fake:{delay}", "--concurrency", "2", "--no-progress"],
        standalone_mode=True,
    )
