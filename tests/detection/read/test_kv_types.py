"""Compact saved states (#60 item 2): the KV-cache type is an option, checked by name, part of every
state's key and file name and of the feature cache's identity, and a folder's bytes per token are
read from its files' names; no model is loaded."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from scopeguard.detection.read.llama_states import (
    DEFAULT_KV_TYPE,
    KV_TYPES,
    KeptStates,
    KeptStateStats,
    SavedStatesSummary,
    get_kv_type,
    saved_states_summary,
    states_on_disk,
)
from scopeguard.detection.signals import read_identity
from scopeguard.errors import ConfigurationError


def test_a_kv_type_is_found_by_name_and_a_bad_one_lists_the_valid_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SCOPEGUARD_KV_TYPE", raising=False)
    assert get_kv_type(None).name == DEFAULT_KV_TYPE == "f16"
    monkeypatch.setenv("SCOPEGUARD_KV_TYPE", "q8_0")  # the environment chooses when the code does not
    assert get_kv_type(None).name == "q8_0" and get_kv_type("f16").name == "f16"
    monkeypatch.setenv("SCOPEGUARD_KV_TYPE", "q4")
    with pytest.raises(ConfigurationError, match=r"unknown KV-cache type 'q4'"):
        get_kv_type(None)
    assert get_kv_type("q8_0").flash_attn and not get_kv_type("f16").flash_attn
    with pytest.raises(ConfigurationError, match=r"unknown KV-cache type 'q4'; valid: f16, q8_0"):
        get_kv_type("q4")
    lib = types.SimpleNamespace(GGML_TYPE_F16=1, GGML_TYPE_Q8_0=8)
    assert KV_TYPES["q8_0"].llama_params(lib) == {"type_k": 8, "type_v": 8, "flash_attn": True}
    assert KV_TYPES["f16"].llama_params(lib) == {"type_k": 1, "type_v": 1, "flash_attn": False}


def test_the_llama_cpp_reader_refuses_an_unknown_kv_type_before_loading_anything() -> None:
    pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts

    with pytest.raises(ConfigurationError, match="valid: f16, q8_0"):
        LlamaCppVerdicts("/no/such/model.gguf", kv_type="q4_0")


def _kept(folder: Path, kv: str) -> KeptStates:
    return KeptStates(None, limit_bytes=10_000, directory=folder, file_key="m:1:v:", stem="m", kv=kv)


def test_states_of_two_kv_types_never_share_a_file(tmp_path: Path) -> None:
    ids = list(range(40))
    f16, q8 = _kept(tmp_path, "f16").file(ids), _kept(tmp_path, "q8_0").file(ids)
    assert f16 is not None and q8 is not None and f16 != q8
    assert f16.name.startswith("m-f16-40t-") and q8.name.startswith("m-q8_0-40t-")
    assert _kept(tmp_path, "q8_0").file(ids) == q8  # stable: the next process finds it
    with pytest.raises(ConfigurationError, match="valid"):
        _kept(tmp_path, "bf16")


def test_a_folder_is_summarised_by_kv_type_with_its_bytes_per_token(tmp_path: Path) -> None:
    for kv, size in (("f16", 2800), ("q8_0", 1500)):
        kept = _kept(tmp_path, kv)
        for n in (40, 60):
            key = tuple(range(n))
            kept.keep(key, bytes(size * n // 100))
            file = kept.file(key)
            assert file is not None
            kept.write(key, file)
    (tmp_path / "m-0123abcd.state").write_bytes(bytes(7))  # named before the type joined the name
    summary = saved_states_summary(tmp_path)  # bytes on disk: each state behind a 20-byte seal
    assert (summary.files, summary.bytes) == states_on_disk(tmp_path) == (5, 2840 + 1540 + 7)
    assert summary.kv_types == {"?": (1, 7, 0), "f16": (2, 2840, 100), "q8_0": (2, 1540, 100)}
    assert summary.bytes_per_token("q8_0") == 15.4 and summary.bytes_per_token("f16") == 28.4
    assert summary.bytes_per_token("?") is None and summary.bytes_per_token("bf16") is None
    assert saved_states_summary(tmp_path / "missing") == SavedStatesSummary()


def test_the_hit_rate_is_hits_over_lookups() -> None:
    stats = KeptStateStats(
        kv_type="q8_0", lookups=4, hits=3, memory_states=2, memory_bytes=10, directory=None, saved=None
    )
    assert stats.hit_rate == 0.75
    assert KeptStateStats("f16", 0, 0, 0, 0, None, None).hit_rate is None


def test_the_feature_cache_keys_a_quantised_read_apart_and_an_f16_one_as_before() -> None:
    def reader(**scorer: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(scorer=types.SimpleNamespace(name="m", **scorer), chunk_tokens=512)

    before = read_identity(reader(), "answerability_verdict")
    assert read_identity(reader(kv_type="f16"), "answerability_verdict") == before
    quantised = read_identity(reader(kv_type="q8_0"), "answerability_verdict")
    assert quantised == {**before, "kv_type": "q8_0"}
