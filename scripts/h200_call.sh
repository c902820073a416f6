#!/usr/bin/env bash
# One call on a lent 2-GPU machine, as the H200 data under data/h200/ was measured: two stage lists of
# scripts/h200_dataset.sh side by side, one per GPU, each cut at LIMIT seconds (every stage resumes), then the stores
# are checkpointed (a run cut by `timeout` leaves its last rows in the -wal file) and copied to $OUT.
# Usage: scripts/h200_call.sh LIMIT "GPU0 stages" "GPU1 stages" [command run on GPU 1 after its stages, <= 150 s]
# FIRST_GPUS=0,1 JOBS=2 scripts/h200_call.sh LIMIT "survey-inference" "" runs one list on both GPUs; a scratch store
# named by SURVEY_DB (scripts/h200_dataset.sh) is checkpointed and copied too.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
limit=$1
gpu1_limit=$limit
[ -n "${4:-}" ] && gpu1_limit=$((limit - 160))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(
  timeout "$limit" scripts/h200_dataset.sh "${FIRST_GPUS:-0}" $2 >"$OUT/gpu0.log" 2>&1
  echo "rc=$? $(date -u +%T)" >>"$OUT/gpu0.log"
) &
[ -n "$3" ] && (
  timeout "$gpu1_limit" scripts/h200_dataset.sh 1 $3 >"$OUT/gpu1.log" 2>&1
  echo "rc=$? $(date -u +%T)" >>"$OUT/gpu1.log"
  if [ -n "${4:-}" ]; then CUDA_VISIBLE_DEVICES=1 timeout 150 bash -c "$4" >"$OUT/gpu1_extra.log" 2>&1; fi
) &
wait
python3 - <<'PY'
import os
import sqlite3
scratch = [os.environ["SURVEY_DB"]] if os.environ.get("SURVEY_DB") else []
for db in ["data/h200/survey.sqlite", "data/h200/nas.sqlite", *scratch]:
    c = sqlite3.connect(db); print(db, c.execute("pragma wal_checkpoint(TRUNCATE)").fetchall()); c.close()
PY
cp data/h200/survey.sqlite data/h200/nas.sqlite data/h200/*table*.json ${SURVEY_DB:+"$SURVEY_DB"} "$OUT/"
tail -n 5 "$OUT"/gpu*.log
