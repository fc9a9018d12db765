"""Pack a reader-tuning run for a GPU machine that downloads nothing and takes 64 MiB a call.

    python benchmarks/gpu_pack.py --base qwen2.5-coder-0.5b --sets ../shared/data/squad2-train \\
        ../shared/data/eloq-gold-dev ../shared/data/subjqa --out .dev

The packaged GGUF is too big for one call (the 0.5B is 491 MB), but most of it is rows of the token
embedding and of the output matrix that no prompt of the run uses. This writes a copy of the GGUF
with those rows zeroed (same layout and size, every used row byte for byte; the verdict margin reads
only the Yes/No rows of the output), xz-compressed and split into chunks that fit a call with the
working tree beside them, plus the datasets as one archive and the copy's sha256. ``OUT/README``
lists the calls: one per chunk (appended to /tmp on the warm machine), the last one running
``benchmarks/reader_tuning_gpu.sh``. Every prompt of ``--sets`` and of ``benchmarks/data/*`` is
tokenized here, exactly as the tuner renders it, to find the rows to keep.

For the 0.5B and the three shared sets: 34,363 of 151,936 embedding rows kept, 12 output rows,
269 MB compressed, five chunks of 54 MB; llama.cpp reads the copy's margins identically (12
near-miss prompts). Nothing here is a figure of the detector; it only moves the model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import tarfile
from pathlib import Path

import numpy as np

from scopeguard.data import load_dataset
from scopeguard.detection.read.base import NO_WORDS, YES_WORDS
from scopeguard.detection.read.reader import TEMPLATE
from scopeguard.detection.read.transformers import model_location, verdict_token_ids
from scopeguard.detection.tune.model import TunableReader
from scopeguard.models import local_gguf
from scopeguard.prompts import render_documents

HERE = Path(__file__).resolve().parent
CHUNK = 54 * 2**20  # with a 4 MB working tree, under the 64 MiB a call carries
#: rows always kept: the first token ids (bytes, punctuation) and the special tokens at the end
ALWAYS = 2048


def used_ids(base: str, folders: list[Path]) -> tuple[set[int], list[int]]:
    """Every token id of every verdict prompt of ``folders``, and the verdict words' ids."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_location(base))
    reader = TunableReader(tokenizer, None, "cpu", [], [], TEMPLATE)
    verdict = verdict_token_ids(tokenizer, YES_WORDS) + verdict_token_ids(tokenizer, NO_WORDS)
    specials = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    keep = set(range(ALWAYS)) | specials | set(verdict)
    for folder in folders:
        data = load_dataset(folder)
        passages: dict[str, str] = {}
        for q in data.questions:
            passage = passages.setdefault(q.doc_id, render_documents([data.documents[q.doc_id]]))
            keep.update(reader.prompt(q.question, passage)[0])
    return keep, verdict


def zero_unused(src: Path, keep: set[int], verdict: list[int]) -> bytes:
    """``src``'s bytes with the unused rows of ``token_embd`` and ``output`` set to zero."""
    from gguf import GGUFReader

    data = bytearray(src.read_bytes())
    for tensor in GGUFReader(src).tensors:
        if tensor.name not in ("token_embd.weight", "output.weight"):
            continue
        rows = int(tensor.shape[1])
        wanted = keep if tensor.name == "token_embd.weight" else set(verdict)
        drop = np.ones(rows, dtype=bool)
        drop[[i for i in wanted if i < rows]] = False
        block = np.frombuffer(data, np.uint8, count=tensor.n_bytes, offset=tensor.data_offset)
        block = block.reshape(rows, -1).copy()
        block[drop] = 0
        data[tensor.data_offset : tensor.data_offset + tensor.n_bytes] = block.tobytes()
        print(f"{tensor.name}: {int((~drop).sum())} of {rows} rows kept")
    return bytes(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="qwen2.5-coder-0.5b")
    ap.add_argument("--sets", nargs="+", type=Path, required=True, help="dataset folders the run reads")
    ap.add_argument("--out", type=Path, required=True, help="a folder .git/info/exclude ignores")
    args = ap.parse_args()
    src = Path(local_gguf(args.base))
    folders = [*args.sets, *sorted(p for p in (HERE / "data").iterdir() if p.is_dir())]
    keep, verdict = used_ids(args.base, folders)
    compact = zero_unused(src, keep, verdict)
    digest = hashlib.sha256(compact).hexdigest()
    packed = lzma.compress(compact, preset=3)
    args.out.mkdir(parents=True, exist_ok=True)
    parts = []
    for n, start in enumerate(range(0, len(packed), CHUNK)):
        part = args.out / f"c{n}"
        part.mkdir(exist_ok=True)
        (part / "chunk").write_bytes(packed[start : start + CHUNK])
        parts.append(part)
    run = args.out / "run"
    run.mkdir(exist_ok=True)
    with tarfile.open(run / "data.tar.xz", "w:xz") as tar:
        for folder in args.sets:
            tar.add(folder, arcname=folder.name)
    target = f"/tmp/model/{src.name}"
    (run / "model.sha256").write_text(f"{digest}  {target}\n")
    copy = "mkdir -p /tmp/m /tmp/model /tmp/data && cp {0}/chunk /tmp/m/{0.name}"
    calls = [
        f"carry [{p}] (and the wheels the machine lacks, first call): {copy.format(p)}" for p in parts[:-1]
    ]
    calls.append(
        f"carry [{parts[-1]}, {run}]: {copy.format(parts[-1])} && cat $(ls /tmp/m/* | sort -V) | "
        f"xz -d -T16 > {target} && sha256sum -c {run}/model.sha256 && tar xJf {run}/data.tar.xz -C /tmp/data "
        f"&& bash benchmarks/reader_tuning_gpu.sh {target} /tmp/data $OUT"
    )
    (args.out / "README").write_text("\n".join(calls) + "\n")
    print(
        json.dumps(
            {"rows_kept": len(keep), "compressed_mb": round(len(packed) / 1e6), "calls": calls}, indent=1
        )
    )


if __name__ == "__main__":
    main()
