#!/usr/bin/env bash
# One call of the timm survey on the lent H200 (data/h200/timm.sqlite, docs/findings-timm.md). The stages run in
# turn; the call is cut at LIMIT seconds with SIGINT, on which a survey keeps what it stored, stores nothing for the
# cell in flight and exits 130: every stage resumes on the next call. timm is the pinned one (model_sets.toml
# [timm] version), carried in .vendor/ (pip install --target .vendor --no-deps timm==VERSION).
# Usage: scripts/h200_timm.sh LIMIT STAGE...   STAGE: graph (every timm-cnn member, batch 1 and 256),
# inference (timm-cnn-popular at batch 256; the cuDNN depthwise heuristic is the graph stage's only), reference
# (timm-reference's transformers, hybrids and MLPs as graph, into their own store data/h200/timm_reference.sqlite,
# so that the CNN population's store holds CNNs only); the stores and the logs are copied to $OUT.
set -uo pipefail
export PYTHONPATH=$PWD/.vendor:$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-./out}  # what comes back from the lent GPU machine; ./out elsewhere (scripts/README.md)
mkdir -p "$OUT"
limit=$1
shift
end=$(($(date +%s) + limit))
source scripts/survey_stage.sh
stores=(data/h200/timm.sqlite data/h200/timm_reference.sqlite)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import timm, torch; print('timm', timm.__version__, 'torch', torch.__version__)"
copying_stores "${stores[@]}"
common=(--precision fp16 --per-worker 24 --min-time-ms 500 --fit-batch --attribute none)
for stage in "$@"; do
  case $stage in
  graph) grid=(--db "${stores[0]}" --set timm-cnn --batch 1,256 --backend graph --cudnn-depthwise-heuristic) ;;
  inference) grid=(--db "${stores[0]}" --set timm-cnn-popular --batch 256 --backend inference) ;;
  reference) grid=(--db "${stores[1]}" --set timm-reference --batch 1,256 --backend graph --cudnn-depthwise-heuristic) ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
  survey_stage "$stage" "$OUT/timm_$stage.log" "${grid[@]}" "${common[@]}" || break
done
# The inference rows whose BatchNorm folding failed (tracing, the check, or a refused fold: utilscope.measure.folding);
# the 79 rows measured again since that check was added must show none.
python3 -c "import sqlite3, sys
sql = \"select model, notes from measurements where backend = 'inference' and notes like '%BatchNorm folding%'\"
rows = sqlite3.connect(sys.argv[1]).execute(sql).fetchall()
print(f'inference rows whose BatchNorm folding failed: {len(rows)}', *rows[:10], sep='\\n')" "${stores[0]}"
stores_copied "${stores[@]}"
