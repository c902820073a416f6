#!/usr/bin/env bash
# Where `utilscope predict` misses, layer by layer, on the lent GPU, whichever it is (docs/predict.md, "Eager: the
# host side", the composition's misses): `utilscope layers` of each MODEL at batch BATCH (default 256) on BACKEND
# (default graph; eager times each layer as the host launches it) in CONDITION (one of scripts/gpu_conditions.sh's
# table). One JSON per model into $OUT/predict_layers/FOLDER/, FOLDER being GPU_CONDITION, then _BACKEND and _bBATCH
# where those are not the defaults (GPU: the first word after "NVIDIA" in nvidia-smi's name, lowercase; gzip them
# into benchmarks/results/predict/layers/FOLDER/); a model whose JSON is there already is skipped, so a cut-off
# call resumes; the call stops starting models LIMIT seconds in. Then, on any machine:
#   python3 scripts/predict_op_classes.py --layers benchmarks/results/predict/layers/GPU_CONDITION --gpu GPU_SXM ...
# Usage: scripts/gpu_predict_layers.sh LIMIT CONDITION MODEL...
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
source scripts/gpu_conditions.sh
[ $# -ge 3 ] || { echo "usage: $0 LIMIT CONDITION MODEL... (CONDITION: $CONDITIONS)" >&2; exit 2; }
end=$(($(date +%s) + $1))
condition=$2
shift 2
condition_args "$condition" || { echo "usage: $0 LIMIT CONDITION MODEL... (CONDITION: $CONDITIONS)" >&2; exit 2; }
gpu=$(lent_gpu)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
backend=${BACKEND:-graph}
batch=${BATCH:-256}
folder=${gpu}_$condition
[ "$backend" = graph ] || folder=${folder}_$backend
[ "$batch" = 256 ] || folder=${folder}_b$batch
done_dir=benchmarks/results/predict/layers/$folder
mkdir -p "$OUT/predict_layers/$folder"
for model in "$@"; do
  name=${model##*:}
  [ -s "$done_dir/$name.json.gz" ] && continue
  [ $((end - $(date +%s))) -le 20 ] && break
  echo "== $model $condition $(date -u +%T)"
  python3 -m utilscope.cli layers "$model" --batch "$batch" --backend "$backend" "${args[@]}" --json \
    >"$OUT/predict_layers/$folder/$name.json" 2>"$OUT/predict_layers/$folder/$name.log" ||
    echo "failed: $model (see its log)"
done
packed_out "predict_layers_$folder"
