#!/usr/bin/env bash
# One call of the H200 calibration (docs/predict.md) on the lent GPU: resumes the shipped profile
# src/utilscope/predict/profiles/h200_fp16_graph.json
# (fp16, graph backend, cuDNN as `profile` sets it by default) up to COUNT configs, cut at LIMIT seconds with SIGINT
# (the profile keeps what was timed), and copies the profile and the log to $OUT.
# Usage: scripts/h200_calibrate.sh LIMIT [COUNT]
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
limit=$1
count=${2:-5000}
profile=src/utilscope/predict/profiles/h200_fp16_graph.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
timeout -s INT "$limit" python3 -m utilscope.cli calibrate --out "$profile" --count "$count" >"$OUT/calibrate.log" 2>&1
echo "rc=$? wall=$(($(date +%s) - start)) s" | tee -a "$OUT/calibrate.log"
tail -n 5 "$OUT/calibrate.log"
cp "$profile" "$OUT/"
