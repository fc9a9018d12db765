"""Helper for the kill-and-resume test: runs ``scopeguard generate`` with a slow fake LLM.

Usage: python run_fake_generation.py CORPUS OUT DELAY_SECONDS
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_eloq import slow_eloq_reply

from scopeguard.llm import register_backend
from scopeguard.testing import ScriptedChatModel


def _factory(arg: str, **_: object) -> ScriptedChatModel:
    return ScriptedChatModel(slow_eloq_reply(float(arg or 0)), model="fake-eloq")


if __name__ == "__main__":
    corpus, out, delay = sys.argv[1:4]
    register_backend("fake", _factory)
    from scopeguard.cli._app import app

    app(
        ["generate", corpus, "--out", out, "--llm", f"fake:{delay}", "--concurrency", "2", "--no-progress"],
        standalone_mode=True,
    )
