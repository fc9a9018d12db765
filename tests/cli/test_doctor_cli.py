"""``scopeguard doctor``: the report a user sends when something is slow or dies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scopeguard.cli._app import app
from scopeguard.llamacpp import _canary, supports_sequences
from scopeguard.testing import calibration_profile

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


# -- --calibration ----------------------------------------------------------------------------
def _profile(folder: Path, identity: dict[str, str]) -> Path:
    """A profile at threshold 0.7, without a hedge band."""
    return calibration_profile(
        identity["detector"], identity=identity, threshold=0.7, hedge_from=None, folder=folder
    )


def test_doctor_names_a_calibration_profile_and_checks_its_detector(
    smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_canary.ENV_VAR, "off")
    base = ["doctor", "--no-speed", "--model", "smollm2"]
    assert json.loads(runner.invoke(app, [*base, "--json"]).stdout)["calibration"] is None  # as before
    made = _profile(tmp_path / "lexical", {"detector": "lexical"})
    res = runner.invoke(app, [*base, "--json", "--calibration", str(made), "--detector", "lexical"])
    assert res.exit_code == 0, res.output
    check = json.loads(res.stdout)["calibration"]
    assert check["path"] == str(made / "profile.json") and check["matches"] is True
    assert check["summary"].startswith("lexical at threshold 0.700") and check["error"] is None
    res = runner.invoke(app, [*base, "--calibration", str(made), "--detector", "lexical"])
    assert f"calibration     {made / 'profile.json'}: lexical at threshold 0.700" in res.stdout
    assert "made for lexical" in res.stdout
    # a profile for another detector, or none there: said in the report (exit 0, like a missing model)
    other = _profile(tmp_path / "fast", {"detector": "fast"})
    res = runner.invoke(app, [*base, "--json", "--calibration", str(other), "--detector", "lexical"])
    check = json.loads(res.stdout)["calibration"]
    assert res.exit_code == 0 and check["matches"] is False and check["summary"].startswith("fast at")
    assert "made for another detector (detector: profile 'fast', detector 'lexical')" in check["error"]
    res = runner.invoke(app, [*base, "--calibration", str(other), "--detector", "lexical"])
    assert "NOT usable with lexical: this calibration profile was made for another detector" in res.stdout
    res = runner.invoke(app, [*base, "--json", "--calibration", str(tmp_path / "nowhere")])
    check = json.loads(res.stdout)["calibration"]
    assert check["summary"] is None and "no calibration profile at" in check["error"]


def test_doctor_checks_a_profile_against_the_default_detectors_identity(
    local_gguf: Path, tmp_path: Path
) -> None:
    from scopeguard._doctor import check_calibration
    from scopeguard.detection.detectors import get_detector
    from scopeguard.detection.profile import detector_identity

    identity = detector_identity(get_detector("default"))  # head weights and reading model, not loaded
    assert set(identity) == {"detector", "head", "reader"}
    made = _profile(tmp_path / "made", identity)
    assert check_calibration(made).matches is True
    stale = _profile(tmp_path / "stale", {**identity, "head": "000000000000"})
    check = check_calibration(stale)
    assert check.matches is False and "head: profile '000000000000'" in (check.error or "")


def test_doctor_gives_its_reader_to_a_detector_that_reads_only(tmp_path: Path, reading_detector) -> None:
    from scopeguard._doctor import check_calibration
    from scopeguard.testing import ScriptedDetector

    specs = reading_detector("reading", lambda: ScriptedDetector(lambda q: 0.2, name="reading"))
    assert check_calibration(calibration_profile("reading", folder=tmp_path / "r"), "reading", "mine").matches
    assert specs == ["local:mine"]
    # a detector that reads with no model is checked as it is built, the reader aside
    assert check_calibration(calibration_profile("lexical", folder=tmp_path / "l"), "lexical", "mine").matches


def test_doctor_reports_the_saved_states_folder_against_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#60 item 2: the saved-states folder's files and size, and its budget (or why it is bad)."""
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path))
    (tmp_path / "llama-states").mkdir()
    (tmp_path / "llama-states" / "m-1.state").write_bytes(bytes(3 * 2**20))
    monkeypatch.setenv("SCOPEGUARD_STATE_DISK_MB", "512")
    res = runner.invoke(app, ["doctor", "--no-speed", "--model", "/no/such/model.gguf"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("saved states"))
    assert "1 files, 3.0 MB of the 512 MB budget" in line and str(tmp_path / "llama-states") in line
    assert "1 older files without a token count" in line


def test_doctor_reports_the_saved_states_bytes_per_token_and_kv_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#60 item 2: bytes per token by KV type, from the files' sizes and the token counts in their names."""
    from scopeguard.detection.read.llama_states import DEFAULT_KV_TYPE

    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path))
    folder = tmp_path / "llama-states"
    folder.mkdir()
    digest = "0123456789abcdef01234567"
    (folder / f"model-q8_0-100t-{digest}.state").write_bytes(bytes(100 * 15 * 1024))
    (folder / f"model-q8_0-300t-{digest}.state").write_bytes(bytes(300 * 15 * 1024))
    (folder / f"model-f16-200t-{digest}.state").write_bytes(bytes(200 * 28 * 1024))
    res = runner.invoke(app, ["doctor", "--no-speed", "--model", "/no/such/model.gguf"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("saved states"))
    assert f"new states in {DEFAULT_KV_TYPE}" in line
    assert "1 f16, 28.0 KB per token" in line and "2 q8_0, 15.0 KB per token" in line
    report = json.loads(runner.invoke(app, ["doctor", "--json", "--no-speed", "--model", "/no/such"]).stdout)
    q8 = report["saved_states"]["by_kv_type"]["q8_0"]
    assert (q8["files"], q8["tokens"], q8["bytes_per_token"]) == (2, 400, 15 * 1024)
    assert report["saved_states"]["kv_type"] == DEFAULT_KV_TYPE
    monkeypatch.setenv("SCOPEGUARD_STATE_DISK_MB", "lots")
    report = json.loads(runner.invoke(app, ["doctor", "--json", "--no-speed", "--model", "/no/such"]).stdout)
    assert report["saved_states"]["budget_mb"] is None
    assert "SCOPEGUARD_STATE_DISK_MB must be a number" in report["saved_states"]["error"]


def test_doctor_says_whether_the_bindings_can_read_sets(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import scopeguard._doctor as doctor

    monkeypatch.setenv(_canary.ENV_VAR, "off")
    res = runner.invoke(app, ["doctor", "--json", "--no-speed", "--model", "smollm2"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["set_reads"] is supports_sequences()
    monkeypatch.setattr(doctor, "supports_sequences", lambda: False)  # bindings older than kv_unified
    res = runner.invoke(app, ["doctor", "--no-speed", "--model", "smollm2"])
    assert res.exit_code == 0, res.output
    (line,) = [x for x in res.stdout.splitlines() if x.startswith("set reads")]
    assert line.split()[2] == "no:" and "upgrade" in line
