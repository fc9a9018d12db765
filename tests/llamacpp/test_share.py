"""Reading threads sized to the cores other processes leave free."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scopeguard.llamacpp import _share
from scopeguard.llamacpp._share import CoreShare


def _write_proc(root: Path, machine_busy: int, own: int) -> None:
    """A fake /proc: ``stat``'s first line with ``machine_busy`` user ticks, ``self/stat`` with ``own``."""
    (root / "self").mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"cpu  {machine_busy} 0 0 100000 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0\n")
    # the command name may hold spaces and parentheses: fields are counted after the last ')'
    fields = ["S"] + ["0"] * 10 + [str(own), "0"] + ["0"] * 30
    (root / "self" / "stat").write_text(f"123 (python (x) y) {' '.join(fields)}\n")


def test_the_others_busy_cores_are_the_machine_less_this_process(tmp_path: Path) -> None:
    share = CoreShare(tmp_path)
    share.cores = 2
    share._hz = 100
    _write_proc(tmp_path, machine_busy=1000, own=300)
    # one second later: the machine ran 150 ticks, 50 of them ours -> the others kept one core busy
    _write_proc(tmp_path, machine_busy=1150, own=350)
    for _ in range(8):  # smoothed: converges on the steady value
        share._fold((1000, 300, _share.time.monotonic() - 1.0))
    assert share.others == pytest.approx(1.0, abs=0.02)
    assert share.threads(2) == 1
    assert share.threads(1) == 1


def test_a_quiet_machine_keeps_every_thread_and_never_fewer_than_one(tmp_path: Path) -> None:
    share = CoreShare(tmp_path)
    share.cores = 2
    assert share.threads(2) == 2  # nothing measured yet: the others are idle
    share._others = 0.4  # a little background work: below a busy core
    assert share.threads(2) == 2
    share._others = 2.0  # the others hold every core: still one thread to read with
    assert share.threads(2) == 1
    share.cores, share._others = 8, 2.7
    assert share.threads(8) == 5
    assert share.threads(4) == 4


def test_sampling_runs_on_this_machine_and_off_turns_it_off(monkeypatch) -> None:
    if not Path("/proc/stat").is_file():
        pytest.skip("no /proc here: the threads stay as configured")
    share = CoreShare()
    assert share.start()
    assert 0.0 <= share.sample(0.05) <= share.cores
    monkeypatch.setenv(_share.CPU_SHARE_ENV, "off")
    assert _share.core_share() is None
    assert _share.threads_for(4) == 4


def test_no_proc_keeps_the_configured_threads(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(_share.CPU_SHARE_ENV, raising=False)
    monkeypatch.setattr(_share, "_SHARE", None)
    monkeypatch.setattr(_share, "CoreShare", lambda: CoreShare(tmp_path / "missing"))
    assert _share.core_share() is None
    assert _share.threads_for(3) == 3


def test_a_decode_sets_the_shared_threads_on_the_context(smollm2: Path, monkeypatch) -> None:
    from scopeguard.llamacpp import decode, load_llama

    llm = load_llama(smollm2, purpose="test", n_ctx=128, n_threads=2)
    try:
        ids = list(llm.tokenize(b"The ferry leaves at nine.", add_bos=False))
        monkeypatch.setattr(_share, "threads_for", lambda limit: 1)
        monkeypatch.setattr("scopeguard.llamacpp._decode.threads_for", lambda limit: 1)
        decode(llm, ids, 0)
        import llama_cpp

        assert llama_cpp.llama_n_threads(llm._ctx.ctx) == 1
        assert llama_cpp.llama_n_threads_batch(llm._ctx.ctx) == 1
        monkeypatch.setattr("scopeguard.llamacpp._decode.threads_for", lambda limit: limit)
        llm._ctx.kv_cache_clear()
        decode(llm, ids, 0)
        assert llama_cpp.llama_n_threads_batch(llm._ctx.ctx) == 2
    finally:
        llm.close()


def test_available_cores_is_positive() -> None:
    assert _share._available_cores() >= 1
    assert _share._available_cores() <= (os.cpu_count() or 1)
