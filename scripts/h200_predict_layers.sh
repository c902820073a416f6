#!/usr/bin/env bash
# Where `utilscope predict` misses on timm CNNs at batch 256 (docs/predict.md, "Limits"), layer by layer on the lent
# H200: `utilscope layers` of the worst-predicted families' smallest members at batch 256 on `graph`, fp16, with
# --cudnn-depthwise-heuristic as the timm survey ran. One JSON per model into $OUT/predict_layers/ (gzip them into
# benchmarks/results/predict/layers/h200/); a model whose JSON is there already is skipped, so a cut-off call
# resumes; the call stops starting models LIMIT seconds in. Then, on any machine:
#   python3 scripts/predict_op_classes.py --layers benchmarks/results/predict/layers/h200
# Usage: scripts/h200_predict_layers.sh LIMIT
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
end=$(($(date +%s) + $1))
models=(convnext_atto fastvit_t8 regnetx_080 resnetblur18 inception_next_atto skresnet18 starnet_s1
  mambaout_femto resnest26d resnet50_gn nf_resnet26 nfnet_f0 focalnet_tiny_srf resnetv2_50x1_bit
  mobilenetv4_conv_blur_medium)
done_dir=benchmarks/results/predict/layers/h200
mkdir -p "$OUT/predict_layers"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for name in "${models[@]}"; do
  [ -s "$done_dir/$name.json.gz" ] && continue
  [ $((end - $(date +%s))) -le 30 ] && break
  echo "== $name $(date -u +%T)"
  python3 -m utilscope.cli layers "timm:$name" --batch 256 --backend graph --precision fp16 \
    --cudnn-depthwise-heuristic --json >"$OUT/predict_layers/$name.json" 2>"$OUT/predict_layers/$name.log" ||
    echo "failed: $name (see its log)"
done
