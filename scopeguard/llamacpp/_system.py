"""What the loader's decision depends on: the CPU's features and the llama.cpp build."""

from __future__ import annotations

import platform
import re
from functools import cache
from pathlib import Path

__all__ = ["CPU_FEATURES", "cpu_features", "cpu_name", "llama_cpp_build"]

#: the CPU flags that select llama.cpp's kernels and extra buffer types (repacking, AMX)
CPU_FEATURES = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "amx_fp16",
)


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""


@cache
def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    match = re.search(r"^model name\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or platform.machine())


@cache
def cpu_features() -> tuple[str, ...]:
    """The :data:`CPU_FEATURES` this CPU reports (Linux; elsewhere the machine type only)."""
    match = re.search(r"^flags\s*:\s*(.+)$", _cpuinfo(), re.MULTILINE)
    if not match:
        return (platform.machine(),)
    flags = set(match.group(1).split())
    return tuple(f for f in CPU_FEATURES if f in flags)


def llama_cpp_build() -> tuple[str, str]:
    """``(llama-cpp-python version, llama.cpp's system info line)``; empty strings without it."""
    try:
        import llama_cpp
    except ImportError:
        return "", ""
    info = llama_cpp.llama_print_system_info()
    return str(llama_cpp.__version__), (info.decode("utf-8", "replace") if info else "").strip()
