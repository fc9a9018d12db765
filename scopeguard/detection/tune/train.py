"""``train_reader``: LoRA on the reading model, trained on the verdict, checkpointed and resumable.

One optimizer update sees ``batch`` examples (gradient accumulation over micro-batches: one prompt
at a time on the CPU, where padding only costs, ``micro_batch`` prompts on CUDA). The learning rate
warms up linearly over the first ``warmup`` share of the updates and then follows a cosine to
zero; gradients are clipped to ``max_grad_norm`` and their norm logged with every update. Every
``eval_every`` updates (and before the first and after the last) the margins of the validation
documents (held out of each training dataset) and of the evaluation-only datasets are read:
loss, AUROC, accuracy and false refusals at the reader's own threshold (margin 0) make the
validation curve in the run folder.

The run folder (``out``) holds ``config.json`` (a resumed run must have the same settings),
``curve.json`` (the curve so far, rewritten at every validation point), ``checkpoint/`` (adapter,
optimizer, schedule, random state and the curve; written atomically every ``checkpoint_minutes``
and at the end) and, when done, the tuned reader (:mod:`scopeguard.detection.read.adapter`):
``peft/``, ``adapter.gguf`` where the base is a GGUF model, ``reader.json`` and ``card.md``. The
order of the examples is a function of the seed and the epoch alone, so a killed run resumed from
its checkpoint gives the same adapter as one that was never stopped.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np

from scopeguard._progress import progress_meter, show_progress
from scopeguard.data import atomic_write_json
from scopeguard.detection.read.adapter import GGUF_ADAPTER, PEFT_DIR
from scopeguard.detection.tune.card import CURVE_FILE, machine, render_card
from scopeguard.detection.tune.config import DEFAULT_TARGETS, TuneConfig, TuneReport
from scopeguard.detection.tune.examples import build_examples
from scopeguard.detection.tune.loop import CHECKPOINT, DocumentStates, TuneRun
from scopeguard.detection.tune.model import TunableReader, _torch, load_tunable
from scopeguard.errors import ConfigurationError
from scopeguard.runs import RunFolder

__all__ = ["DEFAULT_TARGETS", "DocumentStates", "TuneConfig", "TuneReport", "prepare_run", "train_reader"]

logger = logging.getLogger(__name__)


def prepare_run(config: TuneConfig, root: Path, reader: TunableReader, documents: DocumentStates) -> TuneRun:
    """The run's examples (drawn by :func:`build_examples`, each prompt tokenised once) and its
    state before the first update."""
    cache: dict[tuple[str, str], tuple[list[int], int]] = {}

    def count(question: str, passage: str) -> int:
        key = (question, passage)
        if key not in cache:
            cache[key] = reader.prompt(question, passage)
        return len(cache[key][0])

    examples = build_examples(
        config.datasets,
        count_tokens=count,
        evaluate=config.evaluate,
        max_questions=config.max_questions,
        max_tokens=config.max_tokens,
        val_fraction=config.val_fraction,
        val_questions=config.val_questions,
        same_source=config.same_source,
        seed=config.seed,
    )
    run = TuneRun(config, root, examples, reader, documents=documents)
    for items in (examples.train, *examples.validation.values(), *examples.evaluation.values()):
        for e in items:
            run.ids[e.qid], run.splits[e.qid] = cache[(e.question, e.passage)]
    return run


def train_reader(
    config: TuneConfig,
    out: str | os.PathLike[str],
    *,
    resume: bool = False,
    checkpoint_minutes: float = 5.0,
    stop_after: int | None = None,
    device: str | None = None,
    threads: int | None = None,
    progress: bool | None = None,
    prefix_cache_mb: float = 4096,
    documents: DocumentStates | None = None,
) -> TuneReport | None:
    """Tune a reader (see the module docstring); the report, or ``None`` when ``stop_after``
    updates ended the run early (its checkpoint kept, for ``resume=True``). ``prefix_cache_mb``:
    the memory kept for the documents' states with ``adapt="question"`` (a document not kept is
    read again when next needed; the result is the same); ``documents``: a :class:`DocumentStates`
    to keep them in instead (shared by runs on the same base)."""
    config.check()
    torch = _torch()
    if threads:
        torch.set_num_threads(threads)
    root = Path(out)
    folder = RunFolder(root, TuneConfig)
    if (root / CHECKPOINT / "state.pt").is_file() and not resume:
        raise ConfigurationError(
            f"{root} holds a started run: pass --resume to continue it, or use a new --out"
        )
    folder.open(config)
    reader, base_name, _ = load_tunable(
        config.base,
        rank=config.rank,
        alpha=config.alpha,
        dropout=config.dropout,
        targets=config.targets,
        template=config.template,
        top_layers=config.top_layers,
        adapt=config.adapt,
        device=device,
        dtype=config.dtype,
        seed=config.seed,
    )
    run = prepare_run(config, root, reader, documents or DocumentStates(prefix_cache_mb))
    started = time.strftime("%Y-%m-%d")
    if not (resume and run.load()):
        run.evaluate()
    last_save = time.monotonic()
    bar = progress_meter(total=run.total, initial=run.update, desc="train-reader", enabled=progress)
    recent: list[float] = []
    t0 = time.monotonic()
    done_here = 0
    try:
        while run.update < run.total:
            epoch, within = divmod(run.update, run.per_epoch)
            order = run.order(epoch)
            batch = order[within * config.batch : (within + 1) * config.batch]
            t = time.monotonic()
            row = run.step(batch)
            run.seconds += time.monotonic() - t
            done_here += 1
            recent = [*recent[-19:], row["loss"]]
            bar.update(1)
            bar.set_postfix_str(f"loss {np.mean(recent):.4f} |g| {row['grad_norm']:.2f} lr {row['lr']:.1e}")
            if run.update % config.eval_every == 0 or run.update == run.total:
                run.evaluate()
            if not show_progress(progress) and run.update % 10 == 0:
                rate = (time.monotonic() - t0) / done_here
                logger.info(
                    "update %d/%d: loss (last 20) %.4f, grad norm %.2f, %.1f s an update, ETA %.0f min",
                    run.update,
                    run.total,
                    np.mean(recent),
                    row["grad_norm"],
                    rate,
                    rate * (run.total - run.update) / 60,
                )
            if time.monotonic() - last_save >= checkpoint_minutes * 60 or run.update == run.total:
                run.save()
                last_save = time.monotonic()
            if stop_after is not None and done_here >= stop_after and run.update < run.total:
                run.save()
                return None
    finally:
        bar.close()
    return _finish(config, run, root, base_name, started, device=reader.device)


def _finish(
    config: TuneConfig, run: TuneRun, root: Path, base_name: str, started: str, *, device: str
) -> TuneReport:
    from scopeguard.detection.tune.export import gguf_base_info, write_gguf_adapter, write_reader_json
    from scopeguard.models import available_ggufs, local_gguf

    reader = run.reader
    reader.model.save_pretrained(str(root / PEFT_DIR))
    gguf_written = False
    if base_name in available_ggufs() or base_name.endswith(".gguf"):
        info = gguf_base_info(local_gguf(base_name))
        peft_config = reader.model.peft_config["default"]
        write_gguf_adapter(
            reader.lora_state(),
            root / GGUF_ADAPTER,
            architecture=info["architecture"],
            alpha=float(peft_config.lora_alpha),
            n_head=info["n_head"],
            n_head_kv=info["n_head_kv"],
        )
        gguf_written = True
    peft_config = reader.model.peft_config["default"]
    first, last = run.curve[0], run.curve[-1]
    keep = [k for k in last if ":" in k]
    report = TuneReport(
        out=root,
        updates=run.update,
        examples_seen=run.update * config.batch,
        seconds=run.seconds,
        skipped=sum(1 for row in run.train_log if row.get("skipped")),
        before={k: first[k] for k in keep if k in first},
        after={k: last[k] for k in keep},
        curve=run.curve,
        counts=run.examples.counts(),
    )
    where = machine(device)
    write_reader_json(
        root,
        base=base_name,
        rank=int(peft_config.r),
        alpha=float(peft_config.lora_alpha),
        targets=sorted(peft_config.target_modules),
        template=config.template,
        gguf=gguf_written,
        machine=where,
        trained=started,
        updates=run.update,
        adapt=reader.adapt,
    )
    (root / "card.md").write_text(render_card(config, report, where, started), encoding="utf-8")
    atomic_write_json(root / CURVE_FILE, {"validation": run.curve, "train": run.train_log})
    return report
