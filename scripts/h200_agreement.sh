#!/usr/bin/env bash
# The timm/torchvision pairs that disagree by more than 5% (docs/findings-timm.md, "The same architectures") on the
# lent H200. One JSON per run into $OUT/agreement/ (gzip them into benchmarks/results/agreement/h200/); a run whose
# JSON.gz is already in benchmarks/results/agreement/h200/ is skipped, so a cut-off call resumes. The outputs are many
# files: tar them.
# STAGE layers: `utilscope layers` of both twins at batch 1 on `graph`, once with full cuDNN autotuning (as the
#   torchvision survey ran) and once with --cudnn-depthwise-heuristic (as the timm survey ran); about 20 s a run;
#   then `python3 scripts/agreement_layers.py` compares them.
# STAGE inference: `utilscope profile` of both twins at batch 256 on `inference`, one twin right after the other
#   in one call (the two surveys measured them on different days), about 30 s a run; agreement_layers.py prints
#   their ratio beside the surveys'.
# STAGE inference-layers: `utilscope layers` of both twins at batch 256 on `inference` (time per fused region),
#   for the pairs that stay apart in one call; about 45 s a run.
# The pairs are agreement_layers.py's (PAIRS, INFERENCE_PAIRS, INFERENCE_LAYER_PAIRS).
# Usage: scripts/h200_agreement.sh [layers|inference|inference-layers]
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
stage=${1:-layers}
mkdir -p "$OUT/agreement"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() {  # NAME COMMAND...: one run into $OUT/agreement/NAME.json unless it is stored already
  local name=$1
  shift
  [ -s "benchmarks/results/agreement/h200/$name.json.gz" ] && return  # measured in an earlier call
  echo "== $name $(date -u +%T)"
  python3 -m utilscope.cli "$@" --json >"$OUT/agreement/$name.json" 2>"$OUT/agreement/$name.log" ||
    echo "failed: $name (see its log)"
}
twins() {  # the twins of scripts/agreement_layers.py's PAIRS or INFERENCE_PAIRS, one model a line
  python3 -c "import sys; sys.path.insert(0, 'scripts'); import agreement_layers as a
print('\n'.join(model for pair in getattr(a, sys.argv[1]).items() for model in pair))" "$1"
}
case $stage in
layers)
  mapfile -t pairs < <(twins PAIRS)
  for model in "${pairs[@]}"; do
    run "${model/:/_}_autotune" layers "$model" --batch 1 --backend graph --precision fp16
    run "${model/:/_}_depthwise-heuristic" layers "$model" --batch 1 --backend graph --precision fp16 \
      --cudnn-depthwise-heuristic
  done ;;
inference)
  mapfile -t pairs < <(twins INFERENCE_PAIRS)
  for model in "${pairs[@]}"; do
    run "${model/:/_}_inference" profile "$model" --batch 256 --backend inference --precision fp16
  done ;;
inference-layers)
  mapfile -t pairs < <(twins INFERENCE_LAYER_PAIRS)
  for model in "${pairs[@]}"; do
    run "${model/:/_}_inference-layers" layers "$model" --batch 256 --backend inference --precision fp16
  done ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
