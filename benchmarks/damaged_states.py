"""What a saved reader state damaged on disk does to a verdict, and what the seal makes of it.

    python benchmarks/damaged_states.py

A pre-read document's state is kept in ``$SCOPEGUARD_CACHE/llama-states`` and restored by any later
process. This pre-reads one invented 250-word passage with the packaged ``default`` detector (in a
fresh temporary cache), checks one question against it, then damages the passage's state file
three ways and checks the same question in a new process each time:

* **16 bytes flipped** three quarters of the way into the file;
* **39 values overwritten** with a large f16 value, spread over the file;
* **cut short** to half its length.

Each row gives P(out of scope) from the damaged file, whether the file is still there afterwards
(removed: it failed its checksum, or llama.cpp refused it) and the reader's warning, against the
fresh verdict. ``--unsealed`` writes and loads the files as scopeguard did before the seal (the
bytes handed to llama.cpp unchecked), to show what the seal prevents. Prints the table and writes
``benchmarks/results/damaged_states.json`` (``damaged_states_unsealed.json``), with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report, run_header

RESULT = Path(__file__).resolve().parent / "results" / "damaged_states.json"
SENTENCE = (
    "The library opens at nine on weekdays and closes at six; members may borrow ten books for "
    "three weeks and renew them twice online."
)
QUESTION = "When does the library open on weekdays?"

# run in a child process: a damaged state must be loaded by a process that did not write it
CHILD = """
import json, logging, sys
from scopeguard import Guard
from scopeguard.types import Document
if sys.argv[3] == "unsealed":
    import scopeguard.detection.read.llama_states as states
    from pathlib import Path
    states.unseal = lambda blob: blob  # as before the seal: the file's bytes, unchecked, to llama.cpp
    def write_unsealed(path, payload):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(payload)
    states.atomic_write_sealed = write_unsealed
warnings = []
class Keep(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger("scopeguard").addHandler(Keep(level=logging.WARNING))
doc = Document(text=sys.argv[1], id="passage")
guard = Guard(detector="default")
if sys.argv[2] == "preread":
    guard.preread([doc], progress=False)
print(json.dumps({"score": guard.check(sys.argv[4], [doc]).score, "warnings": warnings}))
"""


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "16 bytes flipped":
        at = 3 * len(data) // 4
        for i in range(at, at + 16):
            data[i] ^= 0xFF
    elif how == "39 values overwritten":
        for k in range(1, 40):
            i = (k * len(data)) // 41 & ~1
            data[i : i + 2] = b"\x00\x7e"
    elif how == "cut short":
        del data[len(data) // 2 :]
    path.write_bytes(bytes(data))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unsealed", action="store_true", help="load as before the seal (nothing checked)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    out = args.out or (RESULT.with_name("damaged_states_unsealed.json") if args.unsealed else RESULT)
    text = " ".join([SENTENCE] * 10)
    cache = Path(tempfile.mkdtemp(prefix="scopeguard-damaged-"))
    env = {**os.environ, "SCOPEGUARD_CACHE": str(cache)}
    mode = "unsealed" if args.unsealed else "sealed"

    def check(step: str) -> dict[str, Any]:
        stdout = subprocess.run(
            [sys.executable, "-c", CHILD, text, step, mode, QUESTION],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(stdout.strip().splitlines()[-1])

    fresh = check("preread")["score"]
    states = sorted((cache / "llama-states").glob("*.state"), key=lambda p: p.stat().st_size)
    passage = states[-1]  # the instruction's state is the smaller one
    good = passage.read_bytes()
    rows: list[dict[str, Any]] = [
        {"file": "as written", "p_out_of_scope": round(fresh, 4), "file_kept": True, "warning": ""}
    ]
    for how in ("16 bytes flipped", "39 values overwritten", "cut short"):
        passage.write_bytes(good)
        damage(passage, how)
        got = check("check")
        rows.append(
            {
                "file": how,
                "p_out_of_scope": round(got["score"], 4),
                "file_kept": passage.exists(),
                "warning": "; ".join(got["warnings"])[:160],
            }
        )
    result = {
        **run_header("damaged_states"),
        "loaded": mode,
        "state_bytes": len(good),
    }
    report(rows, result, out)


if __name__ == "__main__":
    main()
