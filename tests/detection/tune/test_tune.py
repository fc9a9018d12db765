"""Tuning the reader: examples, schedule, GGUF export, run folders, and real training on SmolLM2."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from scopeguard.cli import app
from scopeguard.detection.read.adapter import GGUF_ADAPTER, READER_FILE, tuned_reader
from scopeguard.detection.tune import TuneConfig, build_examples, train_reader, write_gguf_adapter
from scopeguard.detection.tune.loop import _schedule
from scopeguard.errors import ConfigurationError, ModelError

# invented paragraphs, each with questions it answers and questions it does not
_DOCS = {
    "kiln": (
        "The pottery on Marsh Lane fires its kiln every Thursday. Orla Penhaligon runs the studio and "
        "teaches two evening classes a week. The kiln reaches 1,240 degrees and takes nine hours to cool.",
        [
            ("Who runs the studio?", "in_scope"),
            ("How hot does the kiln get?", "in_scope"),
            ("How much does an evening class cost?", "out_of_scope"),
            ("When was the kiln built?", "out_of_scope"),
        ],
    ),
    "ferry": (
        "The Carrow ferry crosses the estuary six times a day in summer. It carries twelve cars and was "
        "repainted green last spring. Tickets are sold on board by the deckhand, Tobias Venn.",
        [
            ("How many cars does the Carrow ferry carry?", "in_scope"),
            ("Who sells the tickets?", "in_scope"),
            ("How long does the crossing take?", "out_of_scope"),
            ("Who is the ferry's captain?", "out_of_scope"),
        ],
    ),
    "orchard": (
        "Fenwick orchard grows four kinds of apple and one pear. Its cider press was bought from a dairy in "
        "1998. Pickers are paid by the crate, and the harvest festival is on the last Sunday of September.",
        [
            ("When is the harvest festival?", "in_scope"),
            ("Where did the cider press come from?", "in_scope"),
            ("How much is a picker paid per crate?", "out_of_scope"),
            ("Which pear does the orchard grow?", "out_of_scope"),
        ],
    ),
    "library": (
        "The Alder Street library opened a maker room in March with two 3D printers and a sewing machine. "
        "Members book the room for an hour at a time. The librarian, Sunniva Holt, trained eight volunteers.",
        [
            ("What is in the maker room?", "in_scope"),
            ("How many volunteers were trained?", "in_scope"),
            ("Who paid for the 3D printers?", "out_of_scope"),
            ("How many members does the library have?", "out_of_scope"),
        ],
    ),
}


def _write(folder: Path, docs: dict[str, tuple[str, list[tuple[str, str]]]]) -> Path:
    folder.mkdir(parents=True)
    with (folder / "documents.jsonl").open("w") as fh:
        for doc_id, (text, _) in docs.items():
            fh.write(json.dumps({"doc_id": doc_id, "text": text}) + "\n")
    with (folder / "questions.jsonl").open("w") as fh:
        for doc_id, (_, qs) in docs.items():
            for i, (q, label) in enumerate(qs):
                fh.write(
                    json.dumps({"id": f"{doc_id}-{i}", "doc_id": doc_id, "question": q, "label": label})
                    + "\n"
                )
    return folder


def _words(question: str, passage: str) -> int:
    return len(question.split()) + len(passage.split())


def test_examples_split_by_document_and_weigh_datasets_and_classes_equally(tmp_path: Path) -> None:
    big = _write(tmp_path / "big", _DOCS)
    small = _write(
        tmp_path / "small", {"kiln2": (_DOCS["kiln"][0], [*_DOCS["kiln"][1], ("Who fires it?", "in_scope")])}
    )
    held = _write(tmp_path / "held", {"ferry2": _DOCS["ferry"]})
    sets = build_examples([big, small], count_tokens=_words, evaluate=[held], val_fraction=0.25, seed=3)
    val_docs = {e.doc_id for e in sets.validation["big"]}
    assert len(val_docs) == 1 and val_docs.isdisjoint({e.doc_id for e in sets.train})
    assert sets.validation["small"] == []  # one document: nothing to hold out
    assert {e.dataset for e in sets.train} == {"big", "small"}
    assert [e.question for e in sets.evaluation["held"]] == [q for q, _ in _DOCS["ferry"][1]]
    weight: dict[tuple[str, int], float] = {}
    for e in sets.train:
        weight[(e.dataset, e.label)] = weight.get((e.dataset, e.label), 0.0) + e.weight
    assert np.allclose(list(weight.values()), weight[("big", 0)])  # each dataset and class the same
    assert np.isclose(np.mean([e.weight for e in sets.train]), 1.0)


def test_examples_draw_balanced_quotas_and_leave_out_long_prompts(tmp_path: Path) -> None:
    data = _write(tmp_path / "d", _DOCS)
    sets = build_examples([data], count_tokens=_words, max_questions=6, val_fraction=0, seed=0)
    assert len(sets.train) == 6 and sum(e.label for e in sets.train) == 3
    short = build_examples([data], count_tokens=_words, max_tokens=40, val_fraction=0)
    assert (
        short.skipped["d"]
        == sum(
            1
            for e in build_examples([data], count_tokens=_words, val_fraction=0).train
            if _words(e.question, e.passage) > 40
        )
        > 0
    )
    assert all(_words(e.question, e.passage) <= 40 for e in short.train)


def test_schedule_warms_up_then_decays_to_zero() -> None:
    factors = [_schedule(u, 100, 0.1) for u in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in itertools.pairwise(factors[9:]))
    assert factors[-1] < 0.01
    assert _schedule(0, 10, 0.0) == pytest.approx(1.0)


def test_config_and_cli_refuse_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="lr"):
        TuneConfig(datasets=["x"], lr=2.0).check()
    with pytest.raises(ConfigurationError, match="rank"):
        TuneConfig(datasets=["x"], rank=0).check()
    res = CliRunner().invoke(
        app, ["train-reader", str(tmp_path), "--out", str(tmp_path / "o"), "--same-source", "x"]
    )
    assert res.exit_code == 2 and "NAME=OTHER" in res.output


def test_gguf_adapter_layout_and_llama_row_order(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 16)).astype(np.float32)
    b = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    lora = {
        "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight": a,
        "base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight": b,
        "base_model.model.model.layers.3.mlp.down_proj.lora_B.weight": b,
    }
    path = write_gguf_adapter(
        lora, tmp_path / "a.gguf", architecture="llama", alpha=8.0, n_head=2, n_head_kv=2
    )
    reader = gguf.GGUFReader(str(path))
    fields = {
        k: reader.fields[k]
        for k in ("general.type", "adapter.type", "adapter.lora.alpha", "general.architecture")
    }
    text = {k: bytes(f.parts[f.data[0]]).decode() for k, f in fields.items() if k != "adapter.lora.alpha"}
    assert text == {"general.type": "adapter", "adapter.type": "lora", "general.architecture": "llama"}
    assert float(fields["adapter.lora.alpha"].parts[-1][0]) == 8.0
    tensors = {
        t.name: np.asarray(t.data).reshape([int(x) for x in reversed(t.shape)]) for t in reader.tensors
    }
    assert np.array_equal(tensors["blk.3.attn_q.weight.lora_a"], a)
    # q rows: per head, the two rotary halves interleaved (head 0 rows 0..15: 0, 8, 1, 9, ...)
    q_rows = tensors["blk.3.attn_q.weight.lora_b"][:, 0] / 4
    assert q_rows[:4].tolist() == [0, 8, 1, 9] and q_rows[16:18].tolist() == [16, 24]
    assert np.array_equal(tensors["blk.3.ffn_down.weight.lora_b"], b)  # not a q/k weight: as is
    qwen = write_gguf_adapter(lora, tmp_path / "q.gguf", architecture="qwen2", alpha=8.0)
    q2 = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(qwen)).tensors}
    assert np.array_equal(q2["blk.3.attn_q.weight.lora_b"].reshape(32, 4), b)
    with pytest.raises(ModelError, match="architecture 'gpt2'"):
        write_gguf_adapter(lora, tmp_path / "g.gguf", architecture="gpt2", alpha=8.0)
    with pytest.raises(ModelError, match="cannot place"):
        write_gguf_adapter({"lm_head.lora_A.weight": a}, tmp_path / "h.gguf", architecture="qwen2", alpha=8.0)


def test_a_broken_tuned_reader_folder_is_named(tmp_path: Path) -> None:
    assert tuned_reader(tmp_path) is None
    (tmp_path / READER_FILE).write_text("{}")
    with pytest.raises(ModelError, match="not a tuned reader"):
        tuned_reader(tmp_path)
    (tmp_path / READER_FILE).write_text(json.dumps({"base": "smollm2", "rank": 8, "alpha": 16}))
    with pytest.raises(ModelError, match="neither"):
        tuned_reader(tmp_path)
    (tmp_path / GGUF_ADAPTER).write_bytes(b"GGUF-partial")
    sha = hashlib.sha256(b"GGUF-complete").hexdigest()
    (tmp_path / READER_FILE).write_text(
        json.dumps({"base": "smollm2", "rank": 8, "alpha": 16, "sha256": {GGUF_ADAPTER: sha}})
    )
    with pytest.raises(ModelError, match="does not match the sha256"):
        tuned_reader(tmp_path)


# -- real training on the packaged SmolLM2 (torch, peft, transformers) -----------------------------


@pytest.fixture(scope="module")
def smollm2_base(smollm2: Path) -> str:
    pytest.importorskip("peft", reason="needs scopeguard[train]")
    pytest.importorskip("transformers", reason="needs scopeguard[train]")
    return "smollm2"


def _config(data: Path, base: str, **kw: object) -> TuneConfig:
    settings: dict[str, object] = {
        "rank": 4,
        "alpha": 8.0,
        "batch": 2,
        "eval_every": 2,
        "val_fraction": 0.25,
        "seed": 1,
    }
    settings.update(kw)
    return TuneConfig(datasets=[str(data)], base=base, **settings)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_training_learns_and_writes_a_tuned_reader(tmp_path: Path, smollm2_base: str) -> None:
    data = _write(tmp_path / "toy", _DOCS)
    # the adapter on the top 4 blocks: the 26 below are read once per prompt, not once an update
    config = _config(data, smollm2_base, lr=2e-3, epochs=4, val_fraction=0.0, top_layers=4)
    report = train_reader(config, tmp_path / "run", threads=2, progress=False)
    assert report is not None
    # the training set is its own yardstick here (no held-out documents): the loss on it must fall
    losses = [row["loss"] for row in json.loads((tmp_path / "run" / "curve.json").read_text())["train"]]
    assert len(losses) == report.updates == 4 * 16 // 2  # 16 questions, 2 an update, 4 epochs
    assert np.mean(losses[-4:]) < np.mean(losses[:4]) - 0.05, losses
    assert all(
        np.isfinite(row["grad_norm"])
        for row in json.loads((tmp_path / "run" / "curve.json").read_text())["train"]
    )
    info = tuned_reader(tmp_path / "run")
    assert info is not None and info.base == "smollm2" and info.gguf is not None and info.peft is not None
    card = (tmp_path / "run" / "card.md").read_text()
    assert "Validation curve" in card and "r=4" in card


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_run_resumes_to_the_same_adapter(
    tmp_path: Path, smollm2_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped after two updates and resumed writes the adapter and curve of a run never
    stopped; a run killed between checkpoints has its curve so far on disk. The adapter sits on the
    top 4 blocks (what is saved and restored is the same for any blocks), so each run reads the
    26 below once per prompt instead of sending every update's gradient through all 30."""
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    from scopeguard.detection.tune.loop import TuneRun

    data = _write(tmp_path / "toy", _DOCS)
    config = _config(data, smollm2_base, lr=1e-3, epochs=1, top_layers=4)
    whole = train_reader(config, tmp_path / "whole", threads=2, progress=False)
    assert whole is not None and whole.updates >= 4
    assert train_reader(config, tmp_path / "split", threads=2, progress=False, stop_after=2) is None
    with pytest.raises(ConfigurationError, match="--resume"):
        train_reader(config, tmp_path / "split", threads=2, progress=False)
    with pytest.raises(ConfigurationError, match="another configuration"):
        train_reader(
            _config(data, smollm2_base, lr=5e-4, epochs=1, top_layers=4), tmp_path / "split", resume=True
        )
    resumed = train_reader(config, tmp_path / "split", resume=True, threads=2, progress=False)
    assert resumed is not None and resumed.updates == whole.updates
    a = load_file(str(tmp_path / "whole" / "peft" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "split" / "peft" / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert any(float(a[k].abs().max()) > 0 for k in a if "lora_B" in k)  # it trained
    assert [r["update"] for r in resumed.curve] == [r["update"] for r in whole.curve]  # no duplicate points

    # killed between checkpoints (no save at all): the curve so far is on disk at every point
    step = TuneRun.step

    def dies_at_the_third(run: Any, batch: Any) -> Any:
        if run.update == 2:
            raise KeyboardInterrupt
        return step(run, batch)

    monkeypatch.setattr(TuneRun, "step", dies_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        train_reader(config, tmp_path / "killed", threads=2, progress=False, checkpoint_minutes=60)
    assert not (tmp_path / "killed" / "checkpoint").exists()
    on_disk = json.loads((tmp_path / "killed" / "curve.json").read_text())["validation"]
    assert [r["update"] for r in on_disk] == [0, 2]
    expected = [r["validation_loss"] for r in whole.curve if r["update"] <= 2]  # the whole run's points
    assert [r["validation_loss"] for r in on_disk] == pytest.approx(expected, abs=1e-5)


def _moving_adapter(base: str, top_layers: int = 0) -> Any:
    """SmolLM2 with a LoRA (r=4 on q/v) whose B matrices are random, so it moves the margin; in
    evaluation mode."""
    import torch

    from scopeguard.detection.tune.model import load_tunable

    reader, _, _ = load_tunable(
        base,
        rank=4,
        alpha=8,
        dropout=0.0,
        targets=["q_proj", "v_proj"],
        template="answerability_verdict",
        top_layers=top_layers,
    )
    torch.manual_seed(0)
    for name, p in reader.model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    reader.model.eval()
    return reader


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_kept_lower_blocks_read_the_same_margin_as_a_whole_pass(smollm2_base: str) -> None:
    torch = pytest.importorskip("torch")
    reader = _moving_adapter(smollm2_base, top_layers=6)
    assert reader.split == 30 - 6
    text, questions = _DOCS["ferry"][0], [q for q, _ in _DOCS["ferry"][1]]
    with torch.no_grad():
        for q in questions:
            ids, _ = reader.prompt(q, text)
            whole = float(reader.margins([ids])[0])
            split = float(reader.upper_margin(reader.lower(ids)))
            assert split == pytest.approx(whole, abs=1e-4)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_batch_reads_each_prompt_as_alone_and_a_non_finite_update_is_not_applied(
    tmp_path: Path, smollm2_base: str
) -> None:
    """Prompts of different lengths in one micro-batch (CUDA's default of 8) give the margins they
    give alone; an update whose gradient is NaN leaves the adapter as it was, and a run whose
    updates keep coming out NaN stops as diverged instead of training on."""
    torch = pytest.importorskip("torch")
    from scopeguard.detection.tune.train import DocumentStates, prepare_run

    reader = _moving_adapter(smollm2_base)
    prompts = [reader.prompt(q, text)[0] for text, qs in _DOCS.values() for q, _ in qs[:2]]
    assert len({len(ids) for ids in prompts}) > 2  # padding happens
    with torch.no_grad():
        alone = [float(reader.margins([ids])[0]) for ids in prompts]
        together = reader.margins(prompts).tolist()
    assert together == pytest.approx(alone, abs=1e-4)

    config = _config(_write(tmp_path / "toy", _DOCS), smollm2_base, micro_batch=4, lr=1e-3, val_fraction=0.0)
    run = prepare_run(config, tmp_path / "run", reader, DocumentStates())
    examples = run.examples
    before = {k: v.clone() for k, v in reader.lora_state().items()}
    real = run.margins
    run.margins = lambda chunk: real(chunk) * float("nan")  # type: ignore[method-assign]
    row = run.step(examples.train[:2])
    assert row["skipped"] and run.update == 1
    assert all(torch.equal(before[k], v) for k, v in reader.lora_state().items())
    run.margins = real  # type: ignore[method-assign]
    row = run.step(examples.train[2:4])
    assert "skipped" not in row and np.isfinite(row["grad_norm"])
    assert any(not torch.equal(before[k], v) for k, v in reader.lora_state().items())
    # updates that keep coming out NaN: the rule counts what an update's loss and gradient are, not
    # what made them, so this NaN reaches every adapter weight without reading the prompts
    weights = reader.trainable()

    def nan_margins(chunk: Sequence[Any]) -> Any:
        return sum(p.sum() for p in weights) * torch.full((len(chunk),), float("nan"))

    run.margins = nan_margins  # type: ignore[method-assign]
    with pytest.raises(ModelError, match="diverged"):
        for _ in range(20):
            run.step(examples.train[:2])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_question_side_adapter_trains_on_what_the_readers_read(tmp_path: Path, smollm2_base: str) -> None:
    """adapt="question": the tuner's margin (documents' state from the bare base, the question on
    through the adapter) is the margin transformers reads from the tuned reader's folder."""
    pytest.importorskip("torch")
    from scopeguard.detection.read.reader import verdict_messages
    from scopeguard.detection.read.transformers import TransformersVerdicts
    from scopeguard.detection.tune.model import load_tunable

    data = _write(tmp_path / "toy", _DOCS)
    config = _config(data, smollm2_base, lr=2e-3, epochs=2, val_fraction=0.0, adapt="question")
    report = train_reader(config, tmp_path / "run", threads=2, progress=False)
    assert report is not None
    losses = [row["loss"] for row in json.loads((tmp_path / "run" / "curve.json").read_text())["train"]]
    assert np.mean(losses[-4:]) < np.mean(losses[:4]), losses
    info = tuned_reader(tmp_path / "run")
    assert info is not None and info.adapt == "question"

    tuner, _, _ = load_tunable(
        str(tmp_path / "run"), rank=1, alpha=1, dropout=0.0, targets=[], template="answerability_verdict"
    )
    assert tuner.adapt == "question"  # kept from the folder, whatever was asked
    tuner.model.eval()
    text, questions = _DOCS["ferry"][0], [q for q, _ in _DOCS["ferry"][1]]
    scorer = TransformersVerdicts(tmp_path / "run", device="cpu")
    read = scorer.score_many([verdict_messages(q, text) for q in questions], progress=False)
    import torch

    with torch.no_grad():
        for q, score in zip(questions, read, strict=True):
            ids, split = tuner.prompt(q, text)
            assert 0 < split < len(ids) - 5  # the question and the instruction after it are adapted
            mine = float(tuner.suffix_margin(tuner.prefix_state(ids[:split]), ids[split:]))
            assert score.margin == pytest.approx(mine, abs=1e-3)
            everywhere = float(tuner.margins([ids])[0])  # the adapter on every token: another number
            assert abs(everywhere - mine) > 1e-3
