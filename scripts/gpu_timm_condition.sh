#!/usr/bin/env bash
# One call of the survey in timm's published condition on the lent GPU, whichever it is, into its own store
# (data/GPU/timm_condition.sqlite, GPU: the first word after "NVIDIA" in nvidia-smi's name, lowercase: h100, h200;
# docs/findings-gpus.md, docs/benchmarks.md): amp, NCHW, eager (or compile), batch 1024 with timm's out-of-memory
# halving, on the timm-CNN rows of timm's RTX 5090 table (the model lists under data/h200/, made for the H200's
# survey, serve every GPU). The stages run in turn; the call is cut at LIMIT seconds with SIGINT, on which a
# survey keeps what it stored and stores nothing for the cell in flight: every stage resumes on the next call. On a
# machine of N GPUs the survey runs N workers, one per GPU, on chunks of 25 models (150 on one GPU: fewer starts).
# timm is the machine's own (1.0.29 for the cells stored so far). The store is copied to $OUT every 60 s
# (scripts/copy_stores.py) and at the end, with the logs.
# Usage: scripts/gpu_timm_condition.sh LIMIT STAGE...   STAGE: eager (data/h200/timm_condition_models.txt, 992
# cells), compile (data/h200/timm_condition_compile_models.txt, 50 cells, beside timm's -dynamo tables),
# eager_channels_last (the eager stage's models in amp on channels_last, the condition of the hidden data-center test
# and of the channels_last amp profile, into data/GPU/amp_channels_last.sqlite: whole networks for that profile's
# network scales, scripts/fit_network_scales.py). MODELS_FILE names another list for the eager stages (a few rows
# of the 992 first, e.g. timm:resnet50@224).
set -uo pipefail
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
limit=$1
shift
end=$(($(date +%s) + limit))
source scripts/survey_stage.sh
source scripts/gpu_conditions.sh
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$gpus" -ge 1 ] || { echo "gpu_timm_condition.sh: no GPU (nvidia-smi -L lists none)" >&2; exit 2; }
gpu=$(lent_gpu)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import timm, torch; print('timm', timm.__version__, 'torch', torch.__version__)"
local_stores "$gpu" timm_condition amp_channels_last
store=${stores[0]} channels_last_store=${stores[1]}
models=${MODELS_FILE:-data/h200/timm_condition_models.txt}
per_worker=$([ "$gpus" -gt 1 ] && echo 25 || echo 150)
common=(--precision amp --batch 1024 --fit-batch timm --attribute none --min-time-ms 500
  --jobs "$gpus" --per-worker "$per_worker")
for stage in "$@"; do
  case $stage in
  eager) grid=(--models-file "$models" --backend eager --no-channels-last --db "$store") ;;
  compile) grid=(--models-file data/h200/timm_condition_compile_models.txt --backend compile --no-channels-last
    --db "$store") ;;
  eager_channels_last) grid=(--models-file "$models" --backend eager
    --db "$channels_last_store") ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
  survey_stage "$stage on $gpus GPU(s)" "$OUT/survey_$stage.log" "${grid[@]}" "${common[@]}" || break
done
stores_copied "${stores[@]}"
packed_out "timm_condition_$gpu"
