#!/usr/bin/env bash
# One call of the predictor's calibration (docs/predict.md) on the lent GPU, whichever it is: resumes each named
# condition's profile of this GPU up to COUNT configs, in turn, the whole call cut at LIMIT seconds with SIGINT (a
# profile keeps what was timed), and copies the profiles and the logs to $OUT. The profile of CONDITION on a GPU
# that nvidia-smi names "NVIDIA H100 ..." is $PROFILES/h100_CONDITION_graph.json (the first word after NVIDIA,
# lowercase); PROFILES defaults to src/utilscope/predict/profiles/. CONDITION (default fp16) and its flags:
#   fp16         fp16, channels_last, cuDNN as `profile` sets it by default
#   fp16_nchw    fp16, NCHW
#   amp          timm's condition: fp32 weights under autocast, NCHW
#   amp_nhwc     fp32 weights under autocast, channels_last (most deployment code)
#   bf16         bf16, channels_last
#   amp_bf16     fp32 weights under bf16 autocast, channels_last
#   fp32         fp32 tensors as PyTorch runs them by default (cuDNN convolutions in TF32), channels_last
#   fp32_strict  fp32, no TF32 anywhere, channels_last
#   tf32         fp32 tensors, TF32 in convolutions and matmuls, channels_last
#   fp32_nchw, fp32_strict_nchw, tf32_nchw, amp_bf16_nchw: the same on NCHW tensors (how most PyTorch code and
#                NVIDIA's DeepLearningExamples run fp32 and TF32)
# Usage: scripts/gpu_calibrate.sh LIMIT [COUNT] [CONDITION...]
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
PROFILES=${PROFILES:-src/utilscope/predict/profiles}
mkdir -p "$OUT" "$PROFILES"
limit=$1
count=${2:-5000}
shift $(($# < 2 ? $# : 2))
[ $# -gt 0 ] || set -- fp16
end=$(($(date +%s) + limit))
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu=$(echo "$name" | awk '{print tolower($2)}')
for condition in "$@"; do
  case $condition in
    fp16) args=() ;;
    fp16_nchw) args=(--no-channels-last) ;;
    amp) args=(--precision amp --no-channels-last) ;;
    amp_nhwc) args=(--precision amp) ;;
    bf16 | amp_bf16 | fp32 | fp32_strict | tf32) args=(--precision "$condition") ;;
    amp_bf16_nchw | fp32_nchw | fp32_strict_nchw | tf32_nchw) args=(--precision "${condition%_nchw}" --no-channels-last) ;;
    *) echo "usage: $0 LIMIT [COUNT] [fp16|fp16_nchw|amp|amp_nhwc|bf16|amp_bf16|fp32|fp32_strict|tf32][_nchw]..." >&2; exit 2 ;;
  esac
  left=$((end - $(date +%s)))
  [ "$left" -le 20 ] && break
  profile=$PROFILES/${gpu}_${condition}_graph.json
  log=$OUT/calibrate_${gpu}_$condition.log
  start=$(date +%s)
  echo "== $gpu $condition $(date -u +%T), ${left} s left"
  timeout -s INT "$left" python3 -m utilscope.cli calibrate --out "$profile" --count "$count" "${args[@]}" >"$log" 2>&1
  echo "rc=$? wall=$(($(date +%s) - start)) s" | tee -a "$log"
  tail -n 3 "$log"
  cp "$profile" "$OUT/"
done
