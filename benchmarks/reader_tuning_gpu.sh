#!/bin/bash
# Reader tuning on a GPU machine (CUDA; benchmarks/gpu_pack.py gets the model there): every run at
# once, one process each, sharing the GPU (one run alone leaves it mostly idle between small
# kernels): leave-one-dataset-out at BIG and SMALL training questions, a shipping candidate trained
# on all three sets, and the SMALL squad2-train fold again in float32 (a check on bf16). Each run is
# stopped after LIMIT seconds; every run's curve is on disk at each validation point, so a stopped
# run still shows how far it got. JSON, cards and curves end in OUT/results.tar, the candidate's
# adapters in OUT/ship_adapters.tar.
# Usage (repository root, PYTHONPATH holding scopeguard and the wheels the machine lacks: pydantic,
# pydantic-core, annotated-types, typing-inspection, gguf):
#   bash benchmarks/reader_tuning_gpu.sh GGUF DATA OUT
# Settings by environment: BIG, SMALL, SHIP, VALQ (val_questions), EVERY (eval_every), MICRO (micro_batch),
# LIMIT (seconds), FOLDS, WORK; SMALL= or SHIP= (empty) leaves those runs out; the float32 run takes
# SMALL's first size. BIG and SMALL must differ (one run folder per size). For the 1.5B (about
# 3x the 0.5B's time an update) one call holds the three BIG folds alone: SMALL= SHIP= BIG=4000.
# Eight 0.5B runs at micro-batches of 4 took 52 GB of an H100 (micro-batches of 8 did not fit 24 GB
# of CPU memory for four runs).
set -u
GGUF=$1; DATA=$2; OUT=$3; WORK=${WORK:-/tmp/gpuwork}
BIG=${BIG-4000}; SMALL=${SMALL-1000}; SHIP=${SHIP-4000}; LIMIT=${LIMIT:-420}; F32=${F32:-${SMALL%% *}}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error
mkdir -p "$WORK/res" "$OUT"
T=(squad2-train eloq-gold-dev subjqa)
TRAIN=("${T[@]/#/$DATA/}")
COMMON=(--base "$GGUF" --eval benchmarks/data/near-miss benchmarks/data/implied --threads 2)
SET=(adapt=all lr=1e-4 batch=8 micro_batch=${MICRO:-4} epochs=1 val_questions=${VALQ:-200} eval_every=${EVERY:-100})
S=benchmarks/studies/reader_tuning.py
log() { sed -u "s/^/[$1] /" >>"$OUT/log.txt"; }
# the GGUF is converted for transformers once, before the runs share the copy
python3 -c 'import sys; from scopeguard.models import converted_gguf_dir as c; print(c(sys.argv[1]))' "$GGUF" \
  >"$WORK/convert.txt" 2>&1 || { log convert <"$WORK/convert.txt"; echo "conversion failed" | log convert; exit 1; }
log convert <"$WORK/convert.txt"
nvidia-smi --query-gpu=name,memory.used --format=csv 2>&1 | log gpu
for n in $BIG $SMALL; do
  for t in ${FOLDS:-${T[@]}}; do
    timeout -k 30 -s INT "$LIMIT" python3 $S lodo "${COMMON[@]}" --work "$WORK" --train "${TRAIN[@]}" \
      --set "${SET[@]}" dtype=auto --sizes "$n" --left-out "$t" --out "$WORK/res/lodo_n${n}_$t.json" 2>&1 | log "n$n-$t" &
  done
done
[ -n "$SHIP" ] && timeout -k 30 -s INT "$LIMIT" python3 $S sweep "${COMMON[@]}" --work "$WORK" \
  --train "${TRAIN[@]}" --set "${SET[@]}" dtype=auto --runs "ship:max_questions=$SHIP" \
  --out "$WORK/res/ship.json" 2>&1 | log ship &
[ -n "$F32" ] && timeout -k 30 -s INT "$LIMIT" python3 $S lodo "${COMMON[@]}" --work "$WORK/f32" \
  --train "${TRAIN[@]}" --set "${SET[@]}" dtype=float32 --sizes "$F32" --left-out squad2-train \
  --out "$WORK/res/f32_n${F32}_squad2-train.json" 2>&1 | log f32 &
sleep 60; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>&1 | log gpu
wait
cd "$WORK" || exit 1
tar cf "$OUT/results.tar" --exclude=checkpoint --exclude=peft --exclude=adapter.gguf res $(ls -d n* ship f32/n* 2>/dev/null)
[ -d ship ] && tar cf "$OUT/ship_adapters.tar" --exclude=checkpoint ship
echo GPU_RUN_DONE | log done
