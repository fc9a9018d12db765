"""Writing a tuned reader's folder: the PEFT adapter, the GGUF LoRA adapter, ``reader.json``.

The GGUF adapter is written with the ``gguf`` package alone, in the layout llama.cpp's adapter
loader reads (``llama_adapter_lora_init``): metadata ``general.architecture`` (the base's),
``general.type = adapter``, ``adapter.type = lora``, ``adapter.lora.alpha``; for every adapted
weight ``blk.N.<tensor>.weight.lora_a`` (rank x in) and ``.lora_b`` (out x rank), float32.
llama.cpp scales the product by alpha / rank, as PEFT does.

Where the GGUF conversion of an architecture reorders the rows of the query and key weights
(``llama``: rotary halves interleaved), the ``lora_b`` rows of those two are reordered the same
way, so the adapter meets the base's rows; transformers undoes that order when it loads the GGUF.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scopeguard._optional import require
from scopeguard.data import atomic_write_text
from scopeguard.detection.read.adapter import GGUF_ADAPTER, PEFT_DIR, READER_FILE, file_sha256
from scopeguard.errors import ModelError

__all__ = ["GGUF_TENSOR_NAMES", "gguf_base_info", "write_gguf_adapter", "write_reader_json"]

#: transformers module name -> llama.cpp tensor name, for the decoder blocks' linear layers
GGUF_TENSOR_NAMES: dict[str, str] = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}
#: architectures whose GGUF conversion reorders the query / key rows (see the module docstring)
_REORDERED_QK = frozenset({"llama"})
#: architectures whose GGUF tensor names and row order are known here
GGUF_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen3"})

_PEFT_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")


def gguf_base_info(path: str | Path) -> dict[str, Any]:
    """The base GGUF's architecture, heads and KV heads (what the adapter must match)."""
    gguf = require("gguf", extra="train", feature="writing GGUF LoRA adapters")
    reader = gguf.GGUFReader(str(path))

    def field(name: str) -> Any:
        f = reader.fields.get(name)
        if f is None:
            return None
        value = f.parts[f.data[0]]
        if f.types and f.types[0] == gguf.GGUFValueType.STRING:
            return bytes(value).decode("utf-8")
        return int(value[0]) if value.dtype.kind in "iu" else value[0]

    arch = field("general.architecture")
    if not arch:
        raise ModelError(f"{path} has no general.architecture: not a model GGUF")
    return {
        "architecture": arch,
        "n_head": field(f"{arch}.attention.head_count"),
        "n_head_kv": field(f"{arch}.attention.head_count_kv") or field(f"{arch}.attention.head_count"),
    }


def _reorder_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """The rows of a query / key projection in the order the llama GGUF conversion stores them:
    within each head, the two rotary halves interleaved."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf_adapter(
    lora: Mapping[str, Any],
    out: str | Path,
    *,
    architecture: str,
    alpha: float,
    n_head: int | None = None,
    n_head_kv: int | None = None,
) -> Path:
    """Write the LoRA weights ``lora`` (PEFT state-dict names -> tensors or arrays) to ``out`` as a
    GGUF adapter for a base of ``architecture`` (see the module docstring)."""
    gguf = require("gguf", extra="train", feature="writing GGUF LoRA adapters")
    if architecture not in GGUF_ARCHITECTURES:
        raise ModelError(
            f"no GGUF adapter export for architecture {architecture!r} (known: "
            f"{', '.join(sorted(GGUF_ARCHITECTURES))}); use the PEFT adapter with transformers"
        )
    tensors: dict[str, np.ndarray] = {}
    for key, value in lora.items():
        match = _PEFT_KEY.search(key)
        if match is None:
            raise ModelError(f"cannot place LoRA weight {key!r} in a GGUF adapter (not a decoder block's)")
        block, module, ab = match.groups()
        if module not in GGUF_TENSOR_NAMES:
            raise ModelError(f"no GGUF tensor for module {module!r} (known: {', '.join(GGUF_TENSOR_NAMES)})")
        arr = value.detach().float().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if ab == "B" and architecture in _REORDERED_QK and module in ("q_proj", "k_proj"):
            heads = n_head if module == "q_proj" else (n_head_kv or n_head)
            if not heads:
                raise ModelError(f"reordering {key} needs the base's head counts")
            arr = np.ascontiguousarray(_reorder_rows(arr, int(heads)))
        tensors[f"blk.{block}.{GGUF_TENSOR_NAMES[module]}.weight.lora_{ab.lower()}"] = arr
    if not tensors:
        raise ModelError("the adapter has no LoRA weights to write")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(tmp), architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(alpha))
    for name in sorted(tensors):
        writer.add_tensor(name, tensors[name])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(path)
    return path


def write_reader_json(folder: str | Path, *, base: str, rank: int, alpha: float, **extra: Any) -> Path:
    """``reader.json`` of a tuned reader's folder, with the sha256 of the adapter files in it."""
    root = Path(folder)
    shas = {}
    for name in (GGUF_ADAPTER, f"{PEFT_DIR}/adapter_model.safetensors"):
        if (root / name).is_file():
            shas[name] = file_sha256(root / name)
    meta = {"base": base, "rank": rank, "alpha": alpha, "sha256": shas, **extra}
    path = root / READER_FILE
    atomic_write_text(path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path
