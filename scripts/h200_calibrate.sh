#!/usr/bin/env bash
# One call of the H200 calibration (docs/predict.md) on the lent GPU: resumes a shipped profile up to COUNT configs,
# cut at LIMIT seconds with SIGINT (the profile keeps what was timed), and copies the profile and the log to $OUT.
#   fp16 (default): src/utilscope/predict/profiles/h200_fp16_graph.json (fp16, channels_last, cuDNN as `profile`
#                   sets it by default)
#   amp:            src/utilscope/predict/profiles/h200_amp_graph.json (timm's condition: fp32 weights under
#                   autocast, NCHW)
# Usage: scripts/h200_calibrate.sh LIMIT [COUNT] [fp16|amp]
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
limit=$1
count=${2:-5000}
condition=${3:-fp16}
case $condition in
  fp16) args=() ;;
  amp) args=(--precision amp --no-channels-last) ;;
  *) echo "usage: $0 LIMIT [COUNT] [fp16|amp]" >&2; exit 2 ;;
esac
profile=src/utilscope/predict/profiles/h200_${condition}_graph.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
timeout -s INT "$limit" python3 -m utilscope.cli calibrate --out "$profile" --count "$count" "${args[@]}" \
  >"$OUT/calibrate.log" 2>&1
echo "rc=$? wall=$(($(date +%s) - start)) s" | tee -a "$OUT/calibrate.log"
tail -n 5 "$OUT/calibrate.log"
cp "$profile" "$OUT/"
