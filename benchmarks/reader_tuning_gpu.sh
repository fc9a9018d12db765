#!/bin/bash
# Reader tuning on a GPU machine (CUDA; see benchmarks/gpu_pack.py for getting the model there):
# leave-one-dataset-out at BIG (4000) training questions, a shipping candidate trained on all three
# sets (its adapters come back), then the SMALL (250 1000) points of the learning curve. Each stage
# writes its JSON and a tar of its runs' cards and curves to OUT as it ends, so a run cut off by the
# call's time limit still returns the stages it finished.
# Usage (repository root, PYTHONPATH holding scopeguard and the wheels the machine lacks: pydantic,
# pydantic-core, annotated-types, typing-inspection, gguf):
#   bash benchmarks/reader_tuning_gpu.sh GGUF DATA OUT
# Settings by environment: BIG, SHIP, SMALL, VALQ (val_questions), EVERY (eval_every), DTYPE, WORK.
set -u
GGUF=$1; DATA=$2; OUT=$3; WORK=${WORK:-/tmp/gpuwork}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$WORK" "$OUT"
T=(squad2-train eloq-gold-dev subjqa)
TRAIN=("${T[@]/#/$DATA/}")
EVAL=(benchmarks/data/near-miss benchmarks/data/implied)
COMMON=(--base "$GGUF" --eval "${EVAL[@]}" --work "$WORK")
SET=(adapt=all lr=1e-4 batch=8 micro_batch=8 epochs=1 dtype=${DTYPE:-auto} val_questions=${VALQ:-300} eval_every=${EVERY:-50})
pack() {  # the finished runs' cards and curves (adapters too with a third argument) -> $OUT/$1.tar
  local skip=(--exclude=checkpoint); [ -z "${3:-}" ] && skip+=(--exclude=peft --exclude=adapter.gguf)
  (cd "$WORK" && tar cf "$OUT/$1.tar" "${skip[@]}" $(ls -d $2 2>/dev/null)) || true
}
python3 benchmarks/studies/reader_tuning.py lodo "${COMMON[@]}" --train "${TRAIN[@]}" --set "${SET[@]}" \
  --sizes ${BIG:-4000} --out "$OUT/lodo_big.json" 2>&1 | tee -a "$OUT/log.txt"
pack lodo_big "n${BIG:-4000}-*"
python3 benchmarks/studies/reader_tuning.py sweep "${COMMON[@]}" --train "${TRAIN[@]}" --set "${SET[@]}" \
  --runs ship:max_questions=${SHIP:-6000} --out "$OUT/ship.json" 2>&1 | tee -a "$OUT/log.txt"
pack ship "ship" adapters
python3 benchmarks/studies/reader_tuning.py lodo "${COMMON[@]}" --train "${TRAIN[@]}" --set "${SET[@]}" \
  --sizes ${SMALL:-250 1000} --out "$OUT/lodo_curve.json" 2>&1 | tee -a "$OUT/log.txt"
pack curve "n250-* n1000-*"
echo GPU_RUN_DONE | tee -a "$OUT/log.txt"
