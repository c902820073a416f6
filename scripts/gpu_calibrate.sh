#!/usr/bin/env bash
# One call of the predictor's calibration (docs/predict.md) on the lent GPU, whichever it is: resumes each named
# condition's profile of this GPU up to COUNT configs, in turn, the whole call cut at LIMIT seconds with SIGINT (a
# profile keeps what was timed), and copies the profiles and the logs to $OUT. The profile of CONDITION on a GPU
# that nvidia-smi names "NVIDIA H100 ..." is $PROFILES/h100_CONDITION_graph.json (the first word after NVIDIA,
# lowercase); PROFILES defaults to src/utilscope/predict/profiles/. CONDITION (default fp16): one of
# scripts/gpu_conditions.sh's table, or `host`: the machine's host profile (`calibrate --host`, seconds) into
# $PROFILES/hosts/GPU_host.json. Each call's checkout holds the tracked files afresh, even on a warm machine, while
# git-ignored files stay as long as the machine does: PROFILES=.gpu_profiles (ignored) keeps the profiles between the
# calls of one warm machine, each first copied there from the shipped one when it is not there yet.
# Usage: scripts/gpu_calibrate.sh LIMIT [COUNT] [CONDITION...]
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
SHIPPED=src/utilscope/predict/profiles
PROFILES=${PROFILES:-$SHIPPED}
source scripts/gpu_conditions.sh
mkdir -p "$OUT" "$PROFILES"
limit=$1
count=${2:-5000}
shift $(($# < 2 ? $# : 2))
[ $# -gt 0 ] || set -- fp16
end=$(($(date +%s) + limit))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu=$(lent_gpu)
for condition in "$@"; do
  if [ "$condition" = host ]; then
    mkdir -p "$PROFILES/hosts"
    python3 -m utilscope.cli calibrate --host --out "$PROFILES/hosts/${gpu}_host.json" 2>&1 | tee "$OUT/calibrate_${gpu}_host.log"
    cp "$PROFILES/hosts/${gpu}_host.json" "$OUT/"
    continue
  fi
  condition_args "$condition" || { echo "usage: $0 LIMIT [COUNT] [$CONDITIONS|host]..." >&2; exit 2; }
  left=$((end - $(date +%s)))
  [ "$left" -le 20 ] && break
  profile=$PROFILES/${gpu}_${condition}_graph.json
  [ -f "$profile" ] || [ ! -f "$SHIPPED/${profile##*/}" ] || cp "$SHIPPED/${profile##*/}" "$profile"
  log=$OUT/calibrate_${gpu}_$condition.log
  start=$(date +%s)
  echo "== $gpu $condition $(date -u +%T), ${left} s left"
  timeout -s INT "$left" python3 -m utilscope.cli calibrate --out "$profile" --count "$count" "${args[@]}" >"$log" 2>&1
  echo "rc=$? wall=$(($(date +%s) - start)) s" | tee -a "$log"
  tail -n 3 "$log"
  cp "$profile" "${profile%.json}".rows-*.csv.gz "$OUT/" 2>/dev/null
done
packed_out "calibrate_$gpu"
