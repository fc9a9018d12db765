"""scopeguard.generation's public surface."""

from __future__ import annotations

import scopeguard.generation as generation


def test_all_names_exist_and_are_unique() -> None:
    assert len(generation.__all__) == len(set(generation.__all__))
    assert [n for n in generation.__all__ if not hasattr(generation, n)] == []
    for name in ("Generator", "GenerationConfig", "load_generation_corpus", "export_eloq", "import_eloq"):
        assert name in generation.__all__
