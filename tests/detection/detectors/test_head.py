"""The trainable MLP head: training, one sigmoid, float32, standardisation, save/load, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs scopeguard[probe]")
pytest.importorskip("safetensors", reason="needs scopeguard[probe]")

from scopeguard.detection.detectors.registry import get_detector  # noqa: E402
from scopeguard.detection.head.mlp import (  # noqa: E402
    CONFIG_FILE,
    WEIGHTS_FILE,
    Standardizer,
    TrainedHead,
    TrainSettings,
    train_head,
)
from scopeguard.errors import ConfigurationError, ModelError  # noqa: E402

IDENTITY = {"kind": "embeddings", "model": "minilm", "pooling": "cls"}


def _blobs(n: int = 80, dim: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two Gaussian blobs far apart on a large offset, like near-identical hidden states."""
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 2).astype(np.float32)
    x = 500.0 + rng.normal(0, 0.01, size=(n, dim)) + 0.02 * y[:, None]
    return x.astype(np.float32), y


def _train(seed: int = 0, **kw: float) -> TrainedHead:
    x, y = _blobs()
    settings = TrainSettings(seed=seed, epochs=int(kw.pop("epochs", 8)), lr=float(kw.pop("lr", 1e-2)))
    return train_head(x[:60], y[:60], x[60:], y[60:], detector="nli", features=IDENTITY, settings=settings)


def test_learns_separable_features_only_after_standardisation() -> None:
    head = _train()
    x, y = _blobs()
    acc = float(((head.predict_proba(x[60:]) >= 0.5) == (y[60:] == 1)).mean())
    assert acc >= 0.9
    # the standardiser was fitted on the training split: the offset of 500 is gone
    z = head.standardizer.transform(x[:60])
    assert abs(float(z.mean())) < 1e-3
    assert head.config.metrics["val_accuracy"] >= 0.9
    assert 1 <= head.config.metrics["best_epoch"] <= 8


def test_paper_defaults_and_float32() -> None:
    s = TrainSettings()
    assert (s.epochs, s.lr, s.batch_size, s.hidden, s.dropout) == (10, 1e-4, 8, 128, 0.1)
    head = _train(epochs=2)
    layers = list(head.mlp)
    assert [type(m).__name__ for m in layers] == ["Linear", "ReLU", "Dropout", "Linear"]
    assert layers[0].out_features == 128 and layers[3].out_features == 1
    assert all(p.dtype == torch.float32 for p in head.mlp.parameters())


def test_paper_settings_feed_the_features_raw(tmp_path: Path) -> None:
    paper = TrainSettings.paper()
    assert paper == TrainSettings(standardize=False) and TrainSettings().standardize
    x, y = _blobs()
    head = train_head(
        x[:60],
        y[:60],
        x[60:],
        y[60:],
        detector="nli",
        features=IDENTITY,
        settings=TrainSettings.paper(epochs=2),
    )
    np.testing.assert_array_equal(head.standardizer.transform(x[:5]), x[:5])  # the offset of 500 stays
    assert head.config.training["standardize"] is False
    again = TrainedHead.load(head.save(tmp_path / "paper"))
    np.testing.assert_allclose(again.predict_proba(x[60:]), head.predict_proba(x[60:]), rtol=1e-6)


def test_one_sigmoid_on_logits() -> None:
    head = _train(epochs=3)
    x, _ = _blobs()
    with torch.no_grad():
        logits = head.mlp(torch.from_numpy(head.standardizer.transform(x[:5]))).squeeze(-1).numpy()
    np.testing.assert_allclose(head.predict_proba(x[:5]), 1 / (1 + np.exp(-logits)), rtol=1e-5)


def test_seeded_training_is_reproducible() -> None:
    a, b, c = _train(seed=3, epochs=2), _train(seed=3, epochs=2), _train(seed=4, epochs=2)
    x, _ = _blobs()
    np.testing.assert_array_equal(a.predict_proba(x), b.predict_proba(x))
    assert not np.array_equal(a.predict_proba(x), c.predict_proba(x))


def test_save_load_roundtrip(tmp_path: Path) -> None:
    head = _train(epochs=3)
    head.save(tmp_path / "h")
    loaded = TrainedHead.load(tmp_path / "h", detector="nli")
    x, _ = _blobs()
    np.testing.assert_allclose(loaded.predict_proba(x), head.predict_proba(x), rtol=1e-6)
    assert loaded.config.features == IDENTITY
    cfg = json.loads((tmp_path / "h" / CONFIG_FILE).read_text())
    assert cfg["training"]["lr"] == 1e-2 and "val_accuracy" in cfg["metrics"]


def test_corrupt_or_mismatched_files_raise_model_error_naming_the_file(tmp_path: Path) -> None:
    _train(epochs=1).save(tmp_path / "h")
    with pytest.raises(ModelError, match="probe"):
        TrainedHead.load(tmp_path / "h", detector="probe")
    (tmp_path / "h" / WEIGHTS_FILE).write_bytes(b"\x00garbage")
    with pytest.raises(ModelError, match=WEIGHTS_FILE):
        TrainedHead.load(tmp_path / "h")
    (tmp_path / "h" / CONFIG_FILE).write_text("{not json")
    with pytest.raises(ModelError, match=CONFIG_FILE):
        TrainedHead.load(tmp_path / "h")
    with pytest.raises(ModelError, match="not found"):
        TrainedHead.load(tmp_path / "missing")


def test_weights_of_another_size_are_rejected(tmp_path: Path) -> None:
    _train(epochs=1).save(tmp_path / "h")
    cfg = json.loads((tmp_path / "h" / CONFIG_FILE).read_text())
    cfg["input_dim"] = 7
    (tmp_path / "h" / CONFIG_FILE).write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match=WEIGHTS_FILE):
        TrainedHead.load(tmp_path / "h")


def test_wrong_feature_size_at_prediction() -> None:
    with pytest.raises(ModelError, match="feature size"):
        _train(epochs=1).predict_proba(np.zeros((1, 5), dtype=np.float32))


def test_bad_settings_and_labels() -> None:
    with pytest.raises(ConfigurationError):
        TrainSettings(lr=0)
    x, _ = _blobs(10)
    with pytest.raises(ConfigurationError, match="labels"):
        train_head(x, np.full(10, 2.0), None, None, detector="nli", features=IDENTITY)


def test_standardizer_keeps_constant_features_finite() -> None:
    s = Standardizer.fit(np.ones((4, 3), dtype=np.float32))
    assert np.isfinite(s.transform(np.ones((2, 3)))).all()


@pytest.mark.parametrize("name", ["nli", "probe"])
def test_untrained_detector_explains_how_to_train(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import scopeguard.detection.detectors.probe as probe

    monkeypatch.setattr(probe, "PACKAGED_HEAD", "no-such-head")
    with pytest.raises(ConfigurationError, match="scopeguard train-detector"):
        get_detector(name)


def test_detector_rejects_a_head_of_the_other_kind(tmp_path: Path) -> None:
    _train(epochs=1).save(tmp_path / "h")
    with pytest.raises(ModelError, match="trained for detector 'nli'"):
        get_detector("probe", model=tmp_path / "h")
