#!/usr/bin/env bash
# The timm/torchvision pairs that disagree by more than 5% (docs/findings-timm.md, "The same architectures"), layer
# by layer on the lent H200: `utilscope layers` of both twins at batch 1 on `graph`, once with full cuDNN
# autotuning (as the torchvision survey ran) and once with --cudnn-depthwise-heuristic (as the timm survey ran).
# One JSON per model and setting into $OUT/agreement/ (copy them to benchmarks/results/agreement/h200/); then
# `python3 scripts/agreement_layers.py` compares them. About 20 s per run, 12 runs; a run whose JSON is already in
# benchmarks/results/agreement/h200/ is skipped, so a cut-off call resumes. The outputs are many files: tar them.
# Usage: scripts/h200_agreement.sh
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
pairs=(timm:efficientnet_b0 torchvision:efficientnet_b0 timm:efficientnet_b1 torchvision:efficientnet_b1
  timm:mnasnet_050 torchvision:mnasnet0_5)
mkdir -p "$OUT/agreement"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for model in "${pairs[@]}"; do
  for setting in autotune depthwise-heuristic; do
    extra=()
    [ "$setting" = depthwise-heuristic ] && extra=(--cudnn-depthwise-heuristic)
    name="${model/:/_}_$setting"
    [ -s "benchmarks/results/agreement/h200/$name.json" ] && continue  # timed in an earlier call
    echo "== $model $setting $(date -u +%T)"
    python3 -m utilscope.cli layers "$model" --batch 1 --backend graph --precision fp16 "${extra[@]}" --json \
      >"$OUT/agreement/$name.json" 2>"$OUT/agreement/$name.log" || echo "failed: $name (see its log)"
  done
done
