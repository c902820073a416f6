#!/usr/bin/env bash
# The `advise` validation on the lent H200 (docs/advise.md), one JSON per model into $OUT/advise/ (copy them to
# benchmarks/results/advise/h200/). A model whose JSON is already in benchmarks/results/advise/h200/ is skipped, so
# calls resume; the call stops starting models LIMIT seconds in. timm is the pinned one, carried in .vendor/.
# STAGE validation: the models and controls at batch 1 and 256, every change. STAGE timm: the timm CNNs of
# benchmarks/results/advise/timm_unaligned.csv (>= 10% of FLOPs unaligned; not those the pass cannot trace or finds
# nothing to pad in) at batch 256 on graph in fp16 (padding, folding, the other memory format and their best
# combination; no other backend or precision, no ladder), their JSONs kept apart in
# benchmarks/results/advise/h200/timm/ (a model the validation measured is skipped). Extra arguments go to every
# `utilscope advise` (e.g. --backends graph). $OUT/advise holds two files a model: tar it after the call.
# The timm stage goes from the largest model (GFLOPs an image) down, so a call starts the slowest ones while it has the
# most time left. ONLY="timm:a timm:b" limits the stage to those of its models.
# Usage: scripts/h200_advise.sh LIMIT STAGE [ADVISE OPTION...]
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
limit=$1
stage=$2
shift 2
end=$(($(date +%s) + limit))
case $stage in
validation)
  models=(timm:rexnet_100 timm:ghostnet_100 timm:repghostnet_100 timm:res2net50_26w_4s
    benchmarks/pruned_resnet50.py:build timm:resnet50 timm:efficientnet_b0)
  options=(--batch 1,256) ;;
timm)
  mapfile -t models < <(python3 -c "import sys; sys.path.insert(0, 'scripts'); import advise_validation as a
print('\n'.join(a.paddable().sort_values('gflops', ascending=False)['model']))")
  options=(--batch 256 --backends graph --precisions fp16 --ladder none) ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
results=benchmarks/results/advise/h200
done_dir=$results
[ "$stage" = timm ] && done_dir=$results/timm
mkdir -p "$OUT/advise"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import timm, torch; print('timm', timm.__version__, 'torch', torch.__version__)"
for model in "${models[@]}"; do
  [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $model "* ]] && continue
  name=$(basename "${model#timm:}" | sed 's/\.py:build//')
  [ -f "$done_dir/$name.json" ] || [ -f "$results/$name.json" ] && continue  # the validation's count for both
  left=$((end - $(date +%s)))
  [ "$left" -le 30 ] && break
  echo "== $model $(date -u +%T), ${left} s left"
  start=$(date +%s)
  timeout -s INT "$left" python3 -m utilscope.cli advise "$model" "${options[@]}" --json "$@" \
    >"$OUT/advise/$name.json.partial" 2>"$OUT/advise/$name.log"
  rc=$?
  echo "rc=$rc wall=$(($(date +%s) - start)) s"
  [ "$rc" -eq 0 ] && mv "$OUT/advise/$name.json.partial" "$OUT/advise/$name.json"
  tail -n 3 "$OUT/advise/$name.log"
done
