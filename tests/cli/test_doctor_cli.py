"""``scopeguard doctor``: the report a user sends when something is slow or dies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.llamacpp import _canary

runner = CliRunner()


@pytest.fixture(autouse=True)
def _nothing_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_canary, "_MEMO", {})
    monkeypatch.delenv(_canary.ENV_VAR, raising=False)


def test_doctor_json_names_versions_cpu_features_and_a_forced_decision(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_canary.ENV_VAR, "off")
    res = runner.invoke(app, ["doctor", "--json", "--no-speed", "--model", "smollm2"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["packages"]["scopeguard"] and report["packages"]["llama-cpp-python"]
    assert report["avx2"] == ("avx2" in report["cpu_features"])
    assert report["amx"] == any(f.startswith("amx") for f in report["cpu_features"])
    assert report["loader"]["extra_buffers"] is False and report["loader"]["source"] == "forced"
    assert "SCOPEGUARD_LLAMA_EXTRA_BUFFERS=off" in report["loader"]["reason"]
    models = {m["name"]: m for m in report["models"]}
    assert models["smollm2"]["state"] in ("verified", "unverified") and models["smollm2"]["path"]
    assert report["read_speed"] is None


@pytest.mark.integration
def test_doctor_runs_the_canary_and_measures_the_read_speed(smollm2: Path) -> None:
    res = runner.invoke(app, ["doctor", "--model", "smollm2", "--recheck"])
    assert res.exit_code == 0, res.output
    assert "extra buffers" in res.stdout and "(canary)" in res.stdout
    speed = [line for line in res.stdout.splitlines() if line.startswith("read speed")]
    assert speed and float(speed[0].split()[2]) > 0  # "read speed  116.1 tokens/s (...)"


def test_doctor_without_a_model_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    res = runner.invoke(app, ["doctor", "--json", "--model", "/no/such/model.gguf"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["loader"] is None and "/no/such/model.gguf" in report["loader_error"]


@pytest.mark.slow
@pytest.mark.integration
def test_doctor_checks_and_times_a_tuned_reader_with_its_adapter(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("gguf", reason="writing GGUF adapters needs scopeguard[train]")
    from scopeguard.detection.tune.export import gguf_base_info, write_gguf_adapter, write_reader_json

    monkeypatch.setenv(_canary.ENV_VAR, "off")
    folder = tmp_path / "tuned"
    name = "base_model.model.model.layers.0.self_attn.q_proj"
    lora = {f"{name}.lora_A.weight": np.zeros((8, 576)), f"{name}.lora_B.weight": np.zeros((576, 8))}
    adapter = write_gguf_adapter(lora, folder / "adapter.gguf", alpha=16, **gguf_base_info(smollm2))
    write_reader_json(folder, base="smollm2", rank=8, alpha=16)
    res = runner.invoke(app, ["doctor", "--json", "--no-speed", "--reader", str(folder)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["adapter"] == str(adapter) and report["adapter_key"].startswith("lora-")
    assert report["loader"]["adapter"] == str(adapter.resolve()) and report["loader_error"] is None
    res = runner.invoke(app, ["doctor", "--reader", str(folder)])  # timed with the adapter applied
    assert res.exit_code == 0, res.output
    assert f"adapter         {report['adapter_key']} ({adapter})" in res.stdout
    speed = [line for line in res.stdout.splitlines() if line.startswith("read speed")]
    assert speed and float(speed[0].split()[2]) > 0
