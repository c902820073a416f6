#!/usr/bin/env bash
# The commands that measured the H200 datasets under data/h200/ (docs/findings.md, docs/nas.md).
# Usage: scripts/h200_dataset.sh STAGE [GPU]   — every stage resumes: cells already in the store are skipped.
# Stages run on one GPU each (CUDA_VISIBLE_DEVICES=GPU), so two stages can run side by side on a 2-GPU machine.
set -euo pipefail
stage=$1
export CUDA_VISIBLE_DEVICES=${2:-0}
us() { python3 -m utilscope.cli "$@"; }

case $stage in
survey-graph) # the default survey: 61 CNNs x 5 batch sizes, fp16, CUDA graphs
  us survey --db data/h200/survey.sqlite --batch 1,8,32,128,256 --precision fp16 --backend graph --per-worker 8 ;;
survey-inference) # the same models with BN folded + inductor (freezing) + CUDA graphs, at batch 1 and 256
  us survey --db data/h200/survey.sqlite --batch 1,256 --precision fp16 --backend inference --per-worker 8 \
    --attribute none ${MODELS:+--models "$MODELS"} ;;
nas-measure) # 600 sampled architectures per space at batch 256, the first 250 also at batch 1
  for space in mbv3 regnet; do
    us nas measure data/h200/${space}_archs.jsonl --db data/h200/nas.sqlite --batch 1,256 --limit 250 \
      --precision fp16 --backend graph --min-time-ms 150 --per-worker 50
    us nas measure data/h200/${space}_archs.jsonl --db data/h200/nas.sqlite --batch 256 \
      --precision fp16 --backend graph --min-time-ms 150 --per-worker 50
  done ;;
nas-table-mbv3) # every distinct layer of the mbv3 space (445) at batch 1 and 256
  us nas table --space mbv3 --batch 1,256 --out data/h200/mbv3_table.json ;;
nas-table-regnet-256) # the layers of the 600 sampled regnet architectures at batch 256
  us nas table --space regnet --archs data/h200/regnet_archs.jsonl --batch 256 --out data/h200/regnet_table_256.json ;;
nas-table-regnet-1) # the layers of the 250 regnet architectures measured at batch 1
  head -n 250 data/h200/regnet_archs.jsonl >/tmp/regnet_archs_250.jsonl
  us nas table --space regnet --archs /tmp/regnet_archs_250.jsonl --batch 1 --out data/h200/regnet_table_1.json ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
