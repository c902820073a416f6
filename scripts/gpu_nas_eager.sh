#!/usr/bin/env bash
# One call of the eager validation of `nas predict` (docs/nas.md) on the lent GPU, whichever it is: the first N
# architectures (default 100) of each search space's sample (data/h200/SPACE_archs.jsonl, the sample the H200's NAS
# store measured) timed by `nas measure` in eager PyTorch (fp16, channels_last; cuDNN's heuristics, as that store) at
# batch 1, 32 and 64, the batch sizes of issue 63's population rankings, into data/GPU/nas_eager.sqlite (GPU: the
# first word after "NVIDIA" in nvidia-smi's name, lowercase: h100, h200). The call is cut at LIMIT seconds with
# SIGINT (what was stored is kept); cells already stored are skipped, so the next call goes on, and a larger N adds
# architectures. The store is written on the machine's local /tmp (survey_stage.sh's local_stores) and copied to
# $OUT every 60 s and at the end (scripts/copy_stores.py, integrity-checked), with the log. Scored by
# `benchmarks/nas_general_validation.py --db data/GPU/nas_eager.sqlite`.
# Usage: scripts/gpu_nas_eager.sh LIMIT [N]
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
source scripts/gpu_conditions.sh
source scripts/survey_stage.sh
[ $# -ge 1 ] || { echo "usage: $0 LIMIT [N]" >&2; exit 2; }
limit=$1
count=${2:-100}
end=$(($(date +%s) + limit))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu=$(lent_gpu)
local_stores "$gpu" nas_eager
for space in mbv3 regnet; do
  STAGE_VERB="nas measure" survey_stage "$gpu $space eager" "$OUT/nas_eager_$gpu.log" "data/h200/${space}_archs.jsonl" \
    --db "${stores[0]}" --limit "$count" --batch 1,32,64 --precision fp16 --backend eager --min-time-ms 200 \
    --per-worker 1000 --no-cudnn-benchmark || break
done
stores_copied "${stores[@]}"
packed_out "nas_eager_$gpu"
