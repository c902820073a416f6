#!/usr/bin/env bash
# One call of the per-precision validation of `predict` (docs/predict.md) on the lent GPU, whichever it is: the 61
# curated torchvision CNNs at batch 1 and 256 on the `graph` backend (the profiles' backend), measured by `survey`
# in each named condition in turn, into data/GPU/precisions.sqlite (GPU: the first word after "NVIDIA" in
# nvidia-smi's name, lowercase: h100, h200). CONDITION: one of scripts/gpu_conditions.sh's table. The call is cut at
# LIMIT seconds with SIGINT (a survey keeps what it stored); cells already stored are skipped, so the next call goes
# on. The survey writes a copy of the store on the machine's local /tmp, not the working tree's folder (on the lent
# machines' gVisor runtime a store written there by the survey's processes came back malformed once, with "disk I/O
# error"s before): the copy goes to $OUT every 60 s (scripts/copy_stores.py) and at the end, with the log, each
# checked with SQLite's integrity_check first (a malformed store, as one call's was, never replaces a good copy).
# The environment chooses another validation: BACKEND (default graph), BATCHES (default 1,256), MODELS_FILE (default
# none: the 61), STORE (default precisions, the store data/GPU/STORE.sqlite) and MIN_TIME_MS (default 500). Eager's (docs/predict.md, "Eager:
# the host side"): STORE=eager BACKEND=eager BATCHES=1,8,64,256 MODELS_FILE=data/eager_validation_models.txt.
# Usage: scripts/gpu_validation.sh LIMIT CONDITION...
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
source scripts/gpu_conditions.sh
source scripts/survey_stage.sh
[ $# -ge 2 ] || { echo "usage: $0 LIMIT CONDITION... (CONDITION: $CONDITIONS)" >&2; exit 2; }
limit=$1
shift
for condition in "$@"; do
  condition_args "$condition" || { echo "usage: $0 LIMIT CONDITION... (CONDITION: $CONDITIONS)" >&2; exit 2; }
done
end=$(($(date +%s) + limit))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gpu=$(lent_gpu)
name=${STORE:-precisions}
models=()
[ -n "${MODELS_FILE:-}" ] && models=(--models-file "$MODELS_FILE")
local_stores "$gpu" "$name"
for condition in "$@"; do
  condition_args "$condition"
  survey_stage "$gpu $condition" "$OUT/validation_${gpu}_$name.log" --db "${stores[0]}" --batch "${BATCHES:-1,256}" \
    --backend "${BACKEND:-graph}" --attribute none --min-time-ms "${MIN_TIME_MS:-500}" --per-worker 61 "${models[@]}" "${args[@]}" || break
done
stores_copied "${stores[@]}"
packed_out "validation_${gpu}_$name"
