#!/usr/bin/env bash
# One call of the timm survey on the lent H200 (data/h200/timm.sqlite, docs/findings-timm.md). The stages run in
# turn; the call is cut at LIMIT seconds with SIGINT, on which a survey keeps what it stored, stores nothing for the
# cell in flight and exits 130: every stage resumes on the next call. timm is the pinned one (model_sets.toml
# [timm] version), carried in .vendor/ (pip install --target .vendor --no-deps timm==VERSION).
# Usage: scripts/h200_timm.sh LIMIT STAGE...   STAGE: graph (every timm-cnn member, batch 1 and 256),
# inference (timm-cnn-popular at batch 256; the cuDNN depthwise heuristic is the graph stage's only); the store
# and the logs are copied to $OUT.
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
limit=$1
shift
end=$(($(date +%s) + limit))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import timm, torch; print('timm', timm.__version__, 'torch', torch.__version__)"
# A copy of the store in $OUT every 60 s (sqlite's online backup, consistent while the survey writes), so a call
# that the device ends before the last line still brings back what was stored up to the last copy.
python3 -c "import os, sqlite3, sys, time
while time.sleep(60) is None:
    with sqlite3.connect('data/h200/timm.sqlite') as source, sqlite3.connect(sys.argv[1] + '.part') as copy:
        source.backup(copy)
    os.replace(sys.argv[1] + '.part', sys.argv[1])" "$OUT/timm.sqlite" &
copier=$!
trap 'kill $copier' EXIT
common=(--db data/h200/timm.sqlite --precision fp16 --per-worker 24 --min-time-ms 500
  --fit-batch --attribute none)
for stage in "$@"; do
  case $stage in
  graph) grid=(--set timm-cnn --batch 1,256 --backend graph --cudnn-depthwise-heuristic) ;;
  inference) grid=(--set timm-cnn-popular --batch 256 --backend inference) ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
  left=$((end - $(date +%s)))
  [ "$left" -le 20 ] && break
  echo "== $stage $(date -u +%T), ${left} s left"
  timeout -s INT "$left" python3 -m utilscope.cli survey "${grid[@]}" "${common[@]}" >>"$OUT/timm_$stage.log" 2>&1
  echo "rc=$? $(date -u +%T)" | tee -a "$OUT/timm_$stage.log"
  tail -n 25 "$OUT/timm_$stage.log"
done
kill $copier
wait $copier 2>/dev/null
trap - EXIT
python3 -c "import sqlite3; c = sqlite3.connect('data/h200/timm.sqlite'); print(c.execute('pragma wal_checkpoint(TRUNCATE)').fetchall())"
cp data/h200/timm.sqlite "$OUT/"
