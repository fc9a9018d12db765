"""``scopeguard doctor``: versions, CPU features, the llama.cpp loader's decision, read speed."""

from __future__ import annotations

from pathlib import Path

import typer

from scopeguard.cli._app import command
from scopeguard.cli._options import AS_JSON


@command("doctor")
def doctor(
    as_json: bool = AS_JSON,
    speed: bool = typer.Option(
        True, "--speed/--no-speed", help="Time a read of the reading model (a few s)."
    ),
    model: str = typer.Option(
        "qwen2.5-coder-1.5b",
        "--model",
        "--reader",
        help="The reading model to check and time: a GGUF name or path, or a tuned reader's folder "
        "(its base with its LoRA adapter).",
    ),
    recheck: bool = typer.Option(
        False, "--recheck", help="Run the extra-buffer canary again instead of trusting its cached verdict."
    ),
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        metavar="DIR",
        help="A calibration profile (scopeguard calibrate's folder): name it and check that it was made "
        "for --detector (reading with --reader when that is given).",
    ),
    detector: str = typer.Option(
        "default", "--detector", help="The detector a --calibration profile is checked against."
    ),
) -> None:
    """Show what matters when scopeguard is slow or dies: versions, CPU features (AVX2, AVX-512, AMX),
    whether llama.cpp's extra buffer types are used and why, the packaged models and their checksum
    state, and the reading model's measured speed on this machine; with --calibration, whether the
    profile was made for the detector."""
    from scopeguard._doctor import diagnose, render

    report = diagnose(speed=speed, recheck=recheck, model=model, calibration=calibration, detector=detector)
    typer.echo(report.model_dump_json(indent=2) if as_json else render(report))
