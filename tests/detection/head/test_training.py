"""Training the learned detectors: grouped splits, seeds, cross-validation, the CLI, bad heads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs scopeguard[probe]")

from typer.testing import CliRunner

import scopeguard.detection.head.training as training
from scopeguard.data import load_dataset
from scopeguard.detection.detectors.registry import get_detector
from scopeguard.detection.head.mlp import WEIGHTS_FILE
from scopeguard.errors import ConfigurationError, DatasetError, ModelError
from scopeguard.types import Document

TEAMS = ["Falcons", "Otters", "Comets", "Herons", "Bisons", "Lynxes", "Ravens", "Vipers"]


def write_toy_dataset(root: Path, n_docs: int = 8) -> Path:
    """Invented match reports: 2 in-scope and 2 out-of-scope questions per document."""
    docs, qs = [], []
    for i in range(n_docs):
        team, other = TEAMS[i % len(TEAMS)], TEAMS[(i + 3) % len(TEAMS)]
        docs.append(
            {"doc_id": f"d{i}", "text": f"The {team} beat the {other} {i + 2}-1 at home on Saturday."}
        )
        qs += [
            {"id": f"q{i}a", "doc_id": f"d{i}", "question": f"Who did the {team} beat?", "label": "in_scope"},
            {
                "id": f"q{i}b",
                "doc_id": f"d{i}",
                "question": f"When did the {team} play?",
                "label": "in_scope",
            },
            {
                "id": f"q{i}c",
                "doc_id": f"d{i}",
                "question": f"Why was the {team} coach fined by the league?",
                "label": "out_of_scope",
            },
            {
                "id": f"q{i}d",
                "doc_id": f"d{i}",
                "question": f"How many tickets did the {team} sell for the final?",
                "label": "out_of_scope",
            },
        ]
    root.mkdir(parents=True, exist_ok=True)
    (root / "documents.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in qs) + "\n")
    return root


class KeywordFeatures:
    """A deterministic stand-in extractor (control flow only): flags question words absent from the doc."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "embeddings", "model": "keyword-fake", "pooling": "cls"}

    def _row(self, question: str, doc: Document) -> np.ndarray:
        words = [w.strip("?.,").lower() for w in question.split()]
        missing = sum(w not in doc.text.lower() for w in words)
        return np.array([missing, len(words), missing / len(words)], dtype=np.float32)

    def pair_features(
        self, question: str, documents: Sequence[Document]
    ) -> tuple[np.ndarray, tuple[str, ...]]:
        return np.stack([self._row(question, d) for d in documents]), ()

    def batch_features(
        self, pairs: Sequence[tuple[str, Document]], *, progress: bool | None = None
    ) -> np.ndarray:
        return np.stack([self._row(q, d) for q, d in pairs])


@pytest.fixture
def fake_features(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training, "get_extractor", lambda detector, **kw: KeywordFeatures(**kw))


def test_grouped_folds_never_split_a_document() -> None:
    groups = [f"d{i % 7}" for i in range(40)]
    folds = training.grouped_folds(groups, 5, seed=1)
    seen = np.concatenate(folds)
    assert sorted(seen.tolist()) == list(range(40))
    for test in folds:
        train = np.setdiff1d(np.arange(40), test)
        assert not {groups[i] for i in test} & {groups[i] for i in train}
    assert [f.tolist() for f in training.grouped_folds(groups, 5, seed=1)] == [f.tolist() for f in folds]
    assert [f.tolist() for f in training.grouped_folds(groups, 5, seed=2)] != [f.tolist() for f in folds]


def test_grouped_split_and_errors() -> None:
    groups = [f"d{i % 10}" for i in range(50)]
    train, val = training.grouped_split(groups, 0.2, seed=0)
    assert len({groups[i] for i in val}) == 2
    assert not {groups[i] for i in val} & {groups[i] for i in train}
    with pytest.raises(DatasetError, match="3 documents"):
        training.grouped_folds(["a", "b", "c"], 5)
    with pytest.raises(ConfigurationError):
        training.grouped_split(groups, 1.5)


def test_cross_validate_returns_one_out_of_fold_verdict_per_question(
    tmp_path: Path, fake_features: None
) -> None:
    ds = load_dataset(write_toy_dataset(tmp_path / "ds"))
    kw: dict[str, Any] = {"epochs": 30, "lr": 1e-2}
    verdicts = training.cross_validate(ds, "nli", folds=4, seed=0, **kw)
    assert len(verdicts) == len(ds.questions)
    assert all(v.label in ("in_scope", "out_of_scope") and v.score is not None for v in verdicts)
    assert all("out-of-fold" in v.rationale for v in verdicts)
    acc = np.mean([v.label == q.label for v, q in zip(verdicts, ds.questions, strict=True)])
    assert acc >= 0.75  # the keyword feature separates the toy labels
    again = training.cross_validate(ds, "nli", folds=4, seed=0, **kw)
    assert [v.score for v in again] == [v.score for v in verdicts]


def test_train_detector_saves_a_head_that_loads_by_path(tmp_path: Path, fake_features: None) -> None:
    out = training.train_detector(
        write_toy_dataset(tmp_path / "ds"), "nli", tmp_path / "head", seed=3, epochs=3
    )
    cfg = json.loads((out / "head.json").read_text())
    assert cfg["detector"] == "nli" and cfg["training"]["seed"] == 3 and cfg["training"]["epochs"] == 3
    assert cfg["features"]["model"] == "keyword-fake"
    assert cfg["metrics"]["n_documents"] == 8.0 and cfg["metrics"]["n_val"] > 0


def test_unknown_detector_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="nli, probe"):
        training.train_detector(write_toy_dataset(tmp_path / "ds"), "judge", tmp_path / "h")


def test_corrupt_head_file_gives_model_error_naming_it(tmp_path: Path, fake_features: None) -> None:
    out = training.train_detector(write_toy_dataset(tmp_path / "ds"), "nli", tmp_path / "head", epochs=1)
    data = (out / WEIGHTS_FILE).read_bytes()
    (out / WEIGHTS_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match=str(out / WEIGHTS_FILE)):
        get_detector("nli", model=out)


def test_cli_rejects_bad_detector_and_options(tmp_path: Path) -> None:
    import scopeguard.cli.train  # noqa: F401  (registers the command)
    from scopeguard.cli._app import app

    ds = write_toy_dataset(tmp_path / "ds")
    runner = CliRunner()
    res = runner.invoke(app, ["train-detector", str(ds), "--detector", "judge", "--out", str(tmp_path / "h")])
    assert res.exit_code == 2 and all(name in res.output for name in ("default", "fast", "nli", "probe"))
    res = runner.invoke(
        app, ["train-detector", str(ds), "--detector", "nli", "--reader", "x", "--out", str(tmp_path / "h")]
    )
    assert res.exit_code == 2 and "--reader do(es) not apply to --detector nli" in res.output
    res = runner.invoke(
        app, ["train-detector", str(ds), "--detector", "logprob", "--llm", "x", "--out", str(tmp_path / "h")]
    )
    assert res.exit_code == 2 and "as --reader SPEC, not --llm (renamed)" in res.output


@pytest.mark.slow
@pytest.mark.integration
def test_cli_trains_a_real_minilm_nli_head(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="needs scopeguard[embeddings]")
    import scopeguard.cli.train  # noqa: F401
    from scopeguard.cli._app import app

    ds = write_toy_dataset(tmp_path / "ds", n_docs=4)
    out = tmp_path / "head"
    args = ["train-detector", str(ds), "--detector", "nli", "--embedding-model", "minilm"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--epochs", "2", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "saved nli head" in res.output
    verdict = get_detector("nli", model=out).detect(
        "Who did the Falcons beat?", "The Falcons beat the Herons."
    )
    assert verdict.label in ("in_scope", "out_of_scope") and verdict.detector == "nli"


class LayeredKeywordFeatures(KeywordFeatures):
    """The keyword stand-in with the probe's identity: what it was built with ends up in the head."""

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": "hidden_states", "model": "keyword-fake", "layer": self.kwargs.get("layer", -1)}


@pytest.fixture
def probe_features(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def fake(detector: str, **kw: Any) -> KeywordFeatures:
        calls.append({"detector": detector, **kw})
        return LayeredKeywordFeatures(**kw)

    monkeypatch.setattr(training, "get_extractor", fake)
    return calls


def test_layer_reaches_the_probe_extractor_and_the_head(
    tmp_path: Path, probe_features: list[dict[str, Any]]
) -> None:
    ds = write_toy_dataset(tmp_path / "ds")
    out = training.train_detector(ds, "probe", tmp_path / "head", layer=-4, epochs=1)
    assert probe_features[-1] == {"detector": "probe", "layer": -4}  # not taken for a training setting
    assert json.loads((out / "head.json").read_text())["features"]["layer"] == -4
    verdicts = training.cross_validate(ds, "probe", folds=2, layer=-3, epochs=1)
    assert probe_features[-1] == {"detector": "probe", "layer": -3} and len(verdicts) == 32


def test_cli_layer_option_trains_a_probe_head_on_that_layer(
    tmp_path: Path, probe_features: list[dict[str, Any]]
) -> None:
    import scopeguard.cli.train  # noqa: F401  (registers the command)
    from scopeguard.cli._app import app

    ds, out = write_toy_dataset(tmp_path / "ds"), tmp_path / "head"
    args = ["train-detector", str(ds), "--detector", "probe", "--layer", "-4", "--reader", "smollm2"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--epochs", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert probe_features[-1] == {"detector": "probe", "layer": -4, "llm": "smollm2"}
    assert json.loads((out / "head.json").read_text())["features"]["layer"] == -4
    res = CliRunner().invoke(
        app, ["train-detector", str(ds), "--detector", "nli", "--layer", "-4", "--out", str(out)]
    )
    assert res.exit_code == 2 and "--layer" in res.output


def test_cli_paper_trains_on_raw_features(tmp_path: Path, probe_features: list[dict[str, Any]]) -> None:
    import scopeguard.cli.train  # noqa: F401  (registers the command)
    from scopeguard.cli._app import app
    from scopeguard.detection.head.mlp import TrainedHead

    ds = write_toy_dataset(tmp_path / "ds")
    args = ["train-detector", str(ds), "--detector", "probe", "--epochs", "1", "--no-progress"]
    for paper, out in ((False, tmp_path / "ours"), (True, tmp_path / "paper")):
        res = CliRunner().invoke(app, [*args, *(["--paper"] if paper else []), "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert json.loads((out / "head.json").read_text())["training"]["standardize"] is not paper
        head = TrainedHead.load(out)
        raw = bool(np.all(head.standardizer.mean == 0) and np.all(head.standardizer.std == 1))
        assert raw is paper  # the paper's head reads the features as they are
    res = CliRunner().invoke(app, ["train-detector", str(ds), "--detector", "fast", "--paper", "--out", "x"])
    assert res.exit_code == 2 and "--paper do(es) not apply to --detector fast" in res.output
    res = CliRunner().invoke(
        app, ["train-detector", str(ds), "--detector", "logprob", "--layer", "21", "--out", "x"]
    )
    assert res.exit_code == 2 and "--layer do(es) not apply to --detector logprob" in res.output
    res = CliRunner().invoke(
        app,
        ["train-detector", str(ds), str(ds), "--detector", "default", "--max-docs", "1,2,3", "--out", "x"],
    )
    assert res.exit_code == 2 and "3 values for 2 datasets" in res.output
    res = CliRunner().invoke(
        app, ["train-detector", str(ds), "--detector", "default", "--same-source", "oops", "--out", "x"]
    )
    assert res.exit_code == 2 and "NAME=OTHER" in res.output
