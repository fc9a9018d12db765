"""The loader applies GGUF LoRA adapters: over the base as llama.cpp reads it, in the caches' keys,
and a bad adapter is a clear error, never a native crash."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

from scopeguard.errors import ModelError
from scopeguard.llamacpp import _canary, check_gguf, extra_buffers_decision, run_canary

RANK = 8
#: SmolLM2-135M: 30 blocks, width 576, 3 KV heads of 64
DIM, KV = 576, 192


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache of this test's own, nothing remembered in-process, nothing forced."""
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(_canary.ENV_VAR, raising=False)
    monkeypatch.setattr(_canary, "_MEMO", {})


def _lora(*, b_std: float, seed: int = 0, blocks: range = range(30), dim: int = DIM, kv: int = KV) -> dict:
    """PEFT-named LoRA weights on q/k/v/o of every block: random A, B ~ N(0, b_std) (0: all zero)."""
    rng = np.random.default_rng(seed)
    out = {}
    for block in blocks:
        for module, rows in (("q_proj", dim), ("k_proj", kv), ("v_proj", kv), ("o_proj", dim)):
            name = f"base_model.model.model.layers.{block}.self_attn.{module}"
            out[f"{name}.lora_A.weight"] = rng.uniform(-0.04, 0.04, (RANK, dim)).astype(np.float32)
            out[f"{name}.lora_B.weight"] = (rng.normal(0.0, 1.0, (rows, RANK)) * b_std).astype(np.float32)
    return out


def _adapter(path: Path, base: Path, **kwargs: object) -> Path:
    pytest.importorskip("gguf", reason="writing GGUF adapters needs scopeguard[train]")
    from scopeguard.detection.tune.export import gguf_base_info, write_gguf_adapter

    return write_gguf_adapter(_lora(**kwargs), path, alpha=16, **gguf_base_info(base))  # type: ignore[arg-type]


# -- the canary's key --------------------------------------------------------------------------------


def test_the_adapter_content_enters_the_canary_key_and_the_child_reads_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    adapter = tmp_path / "adapter.gguf"
    adapter.write_bytes(b"GGUF" + bytes(30))
    ok = functools.partial(run_canary, command=[sys.executable, "-c", "print('{\"agree\": true}')"])
    bare = extra_buffers_decision(model, canary=ok)
    tuned = extra_buffers_decision(model, adapter=adapter, canary=ok)
    assert bare.key != tuned.key and bare.adapter is None and tuned.adapter == str(adapter.resolve())
    assert _canary.decision_file(tuned.key).is_file()
    adapter.write_bytes(b"GGUF" + bytes(29) + b"\x01")  # retrained: the same name, other weights
    retrained = extra_buffers_decision(model, adapter=adapter, canary=ok)
    assert len({bare.key, tuned.key, retrained.key}) == 3
    # the real child is given the adapter to read with
    seen: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> object:
        seen.append(argv)
        raise OSError("not started")

    monkeypatch.setattr(_canary.subprocess, "run", fake_run)
    assert "not started" in run_canary(model, adapter=adapter).detail
    assert seen[0][-3:] == ["scopeguard.llamacpp._child", str(model), str(adapter)]


# -- real reads with SmolLM2 -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.integration
def test_a_zero_adapter_reads_like_the_base_and_a_random_one_does_not(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.reader import verdict_messages

    monkeypatch.setenv(_canary.ENV_VAR, "off")  # the canary's own test is below
    zero = _adapter(tmp_path / "zero.gguf", smollm2, b_std=0.0)
    noisy = _adapter(tmp_path / "noisy.gguf", smollm2, b_std=0.2)
    doc = "The Harrow ferry crosses the estuary every forty minutes. Tickets cost 3 euros."
    prompts = [verdict_messages(q, doc) for q in ("How much is a ticket?", "Who owns the ferry?")]

    def read(adapter: Path | None) -> tuple[LlamaCppVerdicts, list[float]]:
        scorer = LlamaCppVerdicts(
            "smollm2", adapter=adapter, n_threads=1, n_ctx=512, state_dir=tmp_path / "s"
        )
        return scorer, [s.margin for s in scorer.score_many(prompts, progress=False)]

    base, base_margins = read(None)
    same, same_margins = read(zero)
    other, other_margins = read(noisy)
    assert same_margins == pytest.approx(base_margins, abs=1e-4)
    assert max(abs(a - b) for a, b in zip(other_margins, base_margins, strict=True)) > 0.1
    # names and kept states are the adapter's own
    assert (
        base.name == "smollm2"
        and same.name.startswith("smollm2+lora-")
        and other.name.startswith("smollm2+lora-")
    )
    assert len({base.name, same.name, other.name}) == 3
    ids = list(range(1, 40))
    files = {scorer: scorer._kept.file(ids) for scorer in (base, same, other)}
    assert len(set(files.values())) == 3
    for scorer, file in files.items():  # SmolLM2-135M-Instruct.Q4_1+lora-...-<digest>.state
        assert file is not None and file.name.startswith(scorer.path.stem + scorer.name[len("smollm2") :])
    assert "adapter=" in repr(other)


@pytest.mark.slow
@pytest.mark.integration
def test_the_real_canary_reads_with_the_adapter(smollm2: Path, tmp_path: Path) -> None:
    adapter = _adapter(tmp_path / "noisy.gguf", smollm2, b_std=0.2)
    result = run_canary(smollm2, adapter=adapter)
    assert result.returncode == 0 or result.signal is not None, result.detail  # a crash only by the fast path
    if result.returncode == 0:
        assert "logits correlation" in result.detail
        assert result.extra_reads_s is not None and len(result.extra_reads_s) == 3  # timed both ways
        assert result.plain_reads_s is not None and all(t > 0 for t in result.plain_reads_s)
    bad = run_canary(smollm2, adapter=_text(tmp_path / "text.gguf"))  # the child says why, never hangs
    assert not bad.passed and "not a GGUF file" in bad.detail


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("missing", r"LoRA adapter not found: .*missing\.gguf \(for the base model SmolLM2"),
        ("text", r"text\.gguf is not a GGUF file"),
        ("other architecture", r"arch\.gguf to the base model SmolLM2.*arch mismatch"),
        ("other shapes", r"shape\.gguf to the base model SmolLM2.*incorrect shape"),
        ("no such block", r"block\.gguf to the base model SmolLM2.*does not exist in base model"),
        ("a model, not an adapter", r"to the base model SmolLM2.*general\.type to be 'adapter'"),
        ("truncated", r"truncated\.gguf to the base model SmolLM2.*not within the file bounds"),
    ],
)
def test_a_bad_adapter_is_a_model_error_naming_the_adapter_the_base_and_why(
    smollm2: Path, tmp_path: Path, case: str, reason: str
) -> None:
    pytest.importorskip("gguf", reason="writing GGUF adapters needs scopeguard[train]")
    from scopeguard.detection.tune.export import write_gguf_adapter
    from scopeguard.llamacpp._loader import construct

    one = range(1)
    adapter = {
        "missing": lambda: tmp_path / "missing.gguf",
        "text": lambda: _text(tmp_path / "text.gguf"),
        "other architecture": lambda: write_gguf_adapter(
            _lora(b_std=0.1, blocks=one), tmp_path / "arch.gguf", architecture="qwen2", alpha=16
        ),
        "other shapes": lambda: write_gguf_adapter(
            _lora(b_std=0.1, blocks=one, dim=896, kv=128),
            tmp_path / "shape.gguf",
            architecture="llama",
            alpha=16,
            n_head=14,
            n_head_kv=2,
        ),
        "no such block": lambda: _adapter(tmp_path / "block.gguf", smollm2, b_std=0.1, blocks=range(99, 100)),
        "a model, not an adapter": lambda: smollm2,
        "truncated": lambda: _truncated(_adapter(tmp_path / "full.gguf", smollm2, b_std=0.1), tmp_path),
    }[case]()
    with pytest.raises(ModelError, match=reason):
        construct(smollm2, extra_buffers=False, adapter=adapter, n_ctx=128, n_threads=1)
    # the process goes on: the base loads and reads after the failure
    llm = construct(check_gguf(smollm2), extra_buffers=False, n_ctx=128, n_threads=1)
    assert llm.tokenize(b"still here")
    llm.close()


def _text(path: Path) -> Path:
    path.write_text("not an adapter")
    return path


def _truncated(full: Path, folder: Path) -> Path:
    cut = folder / "truncated.gguf"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 3])
    return cut
