#!/usr/bin/env bash
# The `advise` validation on the lent H200 (docs/advise.md): each model at batch 1 and 256, JSON per model into
# $OUT/advise/ (copy them to benchmarks/results/advise/h200/). A model whose JSON is already in
# benchmarks/results/advise/h200/ is skipped, so calls resume; the call stops starting models LIMIT seconds in.
# timm is the pinned one, carried in .vendor/. Extra arguments go to every `utilscope advise` (e.g. --backends graph
# to leave inductor's compile time out).
# Usage: scripts/h200_advise.sh LIMIT [ADVISE OPTION...]
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
limit=$1
shift
end=$(($(date +%s) + limit))
models=(timm:rexnet_100 timm:ghostnet_100 timm:repghostnet_100 timm:res2net50_26w_4s
  benchmarks/pruned_resnet50.py:build timm:resnet50 timm:efficientnet_b0)
done_dir=benchmarks/results/advise/h200
mkdir -p "$OUT/advise"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import timm, torch; print('timm', timm.__version__, 'torch', torch.__version__)"
for model in "${models[@]}"; do
  name=$(basename "${model#timm:}" | sed 's/\.py:build//')
  [ -f "$done_dir/$name.json" ] && continue
  left=$((end - $(date +%s)))
  [ "$left" -le 30 ] && break
  echo "== $model $(date -u +%T), ${left} s left"
  start=$(date +%s)
  timeout -s INT "$left" python3 -m utilscope.cli advise "$model" --batch 1,256 --json "$@" \
    >"$OUT/advise/$name.json.partial" 2>"$OUT/advise/$name.log"
  rc=$?
  echo "rc=$rc wall=$(($(date +%s) - start)) s"
  [ "$rc" -eq 0 ] && mv "$OUT/advise/$name.json.partial" "$OUT/advise/$name.json"
  tail -n 3 "$OUT/advise/$name.log"
done
