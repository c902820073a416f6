#!/usr/bin/env bash
# One call of the H200 calibration (docs/predict.md) on the lent GPU: resumes each named condition's shipped profile
# up to COUNT configs, in turn, the whole call cut at LIMIT seconds with SIGINT (a profile keeps what was timed), and
# copies the profiles and the logs to $OUT. CONDITION (default fp16), its flags and its profile under
# src/utilscope/predict/profiles/:
#   fp16       h200_fp16_graph.json       fp16, channels_last, cuDNN as `profile` sets it by default
#   amp        h200_amp_graph.json        timm's condition: fp32 weights under autocast, NCHW
#   amp_nhwc   h200_amp_nhwc_graph.json   fp32 weights under autocast, channels_last (most deployment code)
#   bf16       h200_bf16_graph.json       bf16, channels_last
# Usage: scripts/h200_calibrate.sh LIMIT [COUNT] [CONDITION...]
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
limit=$1
count=${2:-5000}
shift $(($# < 2 ? $# : 2))
[ $# -gt 0 ] || set -- fp16
end=$(($(date +%s) + limit))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for condition in "$@"; do
  case $condition in
    fp16) args=() ;;
    amp) args=(--precision amp --no-channels-last) ;;
    amp_nhwc) args=(--precision amp) ;;
    bf16) args=(--precision bf16) ;;
    *) echo "usage: $0 LIMIT [COUNT] [fp16|amp|amp_nhwc|bf16]..." >&2; exit 2 ;;
  esac
  left=$((end - $(date +%s)))
  [ "$left" -le 20 ] && break
  profile=src/utilscope/predict/profiles/h200_${condition}_graph.json
  log=$OUT/calibrate_$condition.log
  start=$(date +%s)
  echo "== $condition $(date -u +%T), ${left} s left"
  timeout -s INT "$left" python3 -m utilscope.cli calibrate --out "$profile" --count "$count" "${args[@]}" >"$log" 2>&1
  echo "rc=$? wall=$(($(date +%s) - start)) s" | tee -a "$log"
  tail -n 3 "$log"
  cp "$profile" "$OUT/"
done
