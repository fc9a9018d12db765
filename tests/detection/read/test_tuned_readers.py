"""A tuned reader's folder read by llama.cpp (base GGUF + GGUF adapter) and by transformers (base +
PEFT adapter): the same model in both engines, named apart from its base."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scopeguard.detection.read.adapter import GgufReading, gguf_reading
from scopeguard.errors import ConfigurationError, MissingDependencyError, ModelError
from scopeguard.llamacpp import ENV_VAR

# -- which base and adapter a model option names (no model needed) ----------------------------------


def _folder(root: Path, *, gguf: bool = True, peft: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if gguf:
        (root / "adapter.gguf").write_bytes(b"GGUF" + bytes(28))
    if peft:
        (root / "peft").mkdir()
        (root / "peft" / "adapter_model.safetensors").write_bytes(b"weights")
    (root / "reader.json").write_text(json.dumps({"base": "smollm2", "rank": 8, "alpha": 16}))
    return root


def test_a_tuned_reader_folder_names_its_base_and_gguf_adapter(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "tuned")
    reading = gguf_reading(folder)
    assert reading.base == "smollm2" and reading.adapter == folder / "adapter.gguf"
    assert reading.key is not None and reading.suffix == f"+{reading.key}" and len(reading.key) == 17
    # the same adapter given for the base, as a folder or as the file, is the same reading
    assert gguf_reading("smollm2", adapter=folder) == reading
    assert gguf_reading("smollm2", adapter=folder / "adapter.gguf") == reading
    assert gguf_reading("smollm2") == GgufReading("smollm2") and GgufReading("smollm2").suffix == ""


def test_adapter_mistakes_are_clear_errors(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "tuned")
    with pytest.raises(ConfigurationError, match="tuned reader with its own adapter"):
        gguf_reading(folder, adapter=folder / "adapter.gguf")
    with pytest.raises(
        ModelError, match=r"LoRA adapter not found: .*absent\.gguf \(for the base model smollm2\)"
    ):
        gguf_reading("smollm2", adapter=tmp_path / "absent.gguf")
    (tmp_path / "plain").mkdir()
    with pytest.raises(ModelError, match=r"folder without reader\.json"):
        gguf_reading("smollm2", adapter=tmp_path / "plain")
    peft_only = _folder(tmp_path / "peft-only", gguf=False, peft=True)
    with pytest.raises(ModelError, match=r"holds no GGUF adapter .*transformers:"):
        gguf_reading(peft_only)


# -- the same tuned reader in both engines (SmolLM2) -------------------------------------------------

DOCS = {
    "The Brindlewick library opened in March 2019. The building cost 4 million pounds and was designed "
    "by the local firm Harrow & Pike.": (
        "When did the library open?",
        "How much did the building cost?",
        "Who designed the library?",
        "How many books does the library hold?",
        "Who was the first librarian?",
        "What is the library's roof made of?",
        "In which month did the library open?",
        "How many visitors came in 2020?",
        "Is the library in a city centre?",
        "Who paid for the building?",
    ),
    "The Harrow ferry crosses the estuary every forty minutes. Tickets cost 3 euros and the crossing "
    "takes twelve minutes in calm weather.": (
        "How often does the ferry cross?",
        "How much is a ticket?",
        "How long is the crossing?",
        "Who owns the ferry?",
        "How many cars fit on the ferry?",
        "When was the ferry built?",
        "What is the captain's name?",
        "Does the ferry run at night?",
        "How long does the crossing take in calm weather?",
        "What does a child ticket cost?",
    ),
    "Mount Kelvar is 2,310 metres high. It was first climbed in 1887 by a team of four guides from the "
    "village of Ostra.": (
        "How high is Mount Kelvar?",
        "When was it first climbed?",
        "How many guides made the first climb?",
        "Where were the guides from?",
        "How cold is the summit in winter?",
        "Who led the first climb?",
        "How many people climb it each year?",
        "Is there a hut on the summit?",
        "What rock is the mountain made of?",
        "In which country is Mount Kelvar?",
    ),
    "The Pellan orchard grows twelve kinds of apple. Its cider won a regional prize in 2021 and is sold "
    "in forty shops.": (
        "How many kinds of apple does the orchard grow?",
        "When did the cider win a prize?",
        "In how many shops is the cider sold?",
        "Who owns the orchard?",
        "How big is the orchard?",
        "What does a bottle of cider cost?",
        "When was the orchard planted?",
        "Which apple is the most popular?",
        "Does the orchard sell pears?",
        "What was the prize called?",
    ),
    "Dr Ines Marlo studies river otters. Her 2018 survey counted 140 otters along the Dunne, twice the "
    "2008 count.": (
        "What animal does Dr Marlo study?",
        "How many otters did the 2018 survey count?",
        "Along which river were the otters counted?",
        "Where does Dr Marlo work?",
        "How many otters were counted in 2008?",
        "Why did the otter numbers rise?",
        "How old is Dr Marlo?",
        "What do the otters eat?",
        "Who paid for the survey?",
        "How many otters live in the sea?",
    ),
}
#: lora_B ~ N(0, B_STD): margins move by about 1-3 nats (a question-side adapter reads ~30 of the
#: ~150 tokens: 0.2 moves them by 0.1)
B_STD = {"all": 0.2, "question": 0.6}


def _build_tuned_reader(folder: Path, base_gguf: Path, adapt: str = "all") -> None:
    """A PEFT LoRA on transformers' SmolLM2 (r=8, alpha=16, q/k/v/o) with seeded random B, saved
    as a tuned reader's folder: ``peft/``, ``adapter.gguf``, ``reader.json`` (``adapt``: where it
    acts, every token or from the question on)."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft", reason="needs scopeguard[train]")
    transformers = pytest.importorskip("transformers")
    from scopeguard.detection.tune.export import gguf_base_info, write_gguf_adapter, write_reader_json
    from scopeguard.models import converted_gguf_dir

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(converted_gguf_dir(base_gguf)), dtype=torch.float32
    )
    config = peft.LoraConfig(
        r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    tuned = peft.get_peft_model(model, config)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, weight in tuned.named_parameters():
            if "lora_B" in name:
                weight.copy_(torch.randn(weight.shape, generator=generator) * B_STD[adapt])
    tuned.save_pretrained(str(folder / "peft"))
    write_gguf_adapter(
        peft.get_peft_model_state_dict(tuned), folder / "adapter.gguf", alpha=16, **gguf_base_info(base_gguf)
    )
    write_reader_json(folder, base="smollm2", rank=8, alpha=16, adapt=adapt)


def _margins(scorer: Any, prompts: list[Any]) -> np.ndarray:
    return np.array([s.margin for s in scorer.score_many(prompts, progress=False)])


def _prompts() -> list[Any]:
    from scopeguard.detection.read.reader import verdict_messages

    return [verdict_messages(q, doc) for doc, questions in DOCS.items() for q in questions]


#: llama.cpp settings of the agreement test: no kept states, the same read on every machine
LLAMA = {"n_threads": 2, "n_ctx": 512, "persist_states": False}


@pytest.fixture(scope="module")
def base_margins(smollm2: Path) -> tuple[np.ndarray, np.ndarray]:
    """The bare SmolLM2's margins on the 50 prompts, by transformers and by llama.cpp: read once for
    both adapters of the agreement test (they do not depend on the adapter)."""
    pytest.importorskip("transformers")
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.transformers import TransformersVerdicts

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, "off")  # no canary child: the same read on every machine
        prompts = _prompts()
        hf_base = _margins(TransformersVerdicts("smollm2", device="cpu"), prompts)
        cpp_base = _margins(LlamaCppVerdicts("smollm2", **LLAMA), prompts)
    return hf_base, cpp_base


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("adapt", ["all", "question"])
def test_llamacpp_and_transformers_read_a_tuned_reader_alike(
    smollm2: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    adapt: str,
    base_margins: tuple[np.ndarray, np.ndarray],
) -> None:
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.reader import verdict_messages
    from scopeguard.detection.read.scorer import verdict_scorer

    monkeypatch.setenv(ENV_VAR, "off")  # no canary child: the same read on every machine
    folder = tmp_path / "tuned"
    _build_tuned_reader(folder, smollm2, adapt)
    prompts = _prompts()
    assert len(prompts) == 50
    hf_base, cpp_base = base_margins
    hf_tuned_scorer = verdict_scorer(f"transformers:{folder}", device="cpu")
    hf_tuned = _margins(hf_tuned_scorer, prompts)
    cpp_tuned_scorer = verdict_scorer(f"local:{folder}", **LLAMA)
    cpp_tuned = _margins(cpp_tuned_scorer, prompts)

    key = hf_tuned_scorer.name.split("+")[1]
    assert key.startswith("lora-") and hf_tuned_scorer.name == cpp_tuned_scorer.name == f"smollm2+{key}"
    moved = np.abs(hf_tuned - hf_base)
    assert 0.5 < float(np.median(moved)) < 5.0  # the adapter matters
    # The packaged base is Q4_1: llama.cpp reads the quantised weights (and quantises activations),
    # transformers their bfloat16 dequantisation, so the engines differ by about 0.1 nat per prompt
    # before any adapter (base margins correlated 0.92: this small base barely tells prompts apart).
    # Measured on a busy 2-core Xeon: tuned margins 0.950, adapter-induced change 0.904 (median move
    # 1.6 nats). With the GGUF adapter's q/k rows left in transformers' order: 0.50 and 0.38. Over an
    # F32 copy of the same (bfloat16) weights both engines agree to 0.007 nat: 1.0000 and 1.0000.
    tuned_r = float(np.corrcoef(hf_tuned, cpp_tuned)[0, 1])
    change_r = float(np.corrcoef(hf_tuned - hf_base, cpp_tuned - cpp_base)[0, 1])
    assert tuned_r >= 0.9, (tuned_r, change_r)
    assert change_r >= 0.8, (tuned_r, change_r)  # what catches a wrong q/k row order
    if adapt == "question":
        # the documents' states are the bare base's: a document the base read and kept on disk is
        # the tuned reader's too, and its margins from that state are its own fresh read's
        slot = "SCOPEGUARD-QUESTION-SLOT"
        kept = {"n_threads": 2, "n_ctx": 512, "state_dir": tmp_path / "states"}
        doc = next(iter(DOCS))
        base_reader = LlamaCppVerdicts("smollm2", **kept)
        assert base_reader.prime(verdict_messages(slot, doc), upto=slot) > 0
        tuned_reader = LlamaCppVerdicts(folder, **kept)
        assert tuned_reader.prime(verdict_messages(slot, doc), upto=slot, create=False) > 0
        from_state = _margins(tuned_reader, prompts[:10])
        assert np.abs(from_state - cpp_tuned[:10]).max() < 0.15, (from_state, cpp_tuned[:10])


@pytest.mark.slow
def test_a_tuned_reader_without_peft_names_the_train_extra(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    from scopeguard.detection.read.transformers import TransformersVerdicts

    folder = _folder(tmp_path / "tuned", peft=True)
    monkeypatch.setitem(sys.modules, "peft", None)  # import peft fails as where it is not installed
    with pytest.raises(MissingDependencyError, match=r"scopeguard\[train\]"):
        TransformersVerdicts(folder, device="cpu")
    gguf_only = _folder(tmp_path / "gguf-only")
    with pytest.raises(ModelError, match=r"holds no PEFT adapter .*local:"):
        TransformersVerdicts(gguf_only, device="cpu")
