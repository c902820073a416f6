#!/usr/bin/env bash
# The commands that measured the H200 datasets under data/h200/ (docs/findings.md, docs/nas.md).
# Usage: scripts/h200_dataset.sh GPU STAGE...  — stages run in turn on one GPU (CUDA_VISIBLE_DEVICES=GPU), so two
# lists can run side by side on a 2-GPU machine (or GPU "0,1" with JOBS=2 for one survey on both). Every stage
# resumes: cells (layers) already stored are skipped.
set -uo pipefail
export CUDA_VISIBLE_DEVICES=$1
shift
us() { python3 -m utilscope.cli "$@"; }

for stage in "$@"; do
echo "== $stage (GPU $CUDA_VISIBLE_DEVICES) $(date -u +%T)"
case $stage in
survey-graph) # the default survey: 61 CNNs x 5 batch sizes, fp16, CUDA graphs. For the cost-per-cell experiments
  # (docs/benchmarks.md), SURVEY_DB=/tmp/cost.sqlite SURVEY_OPTIONS="--min-time-ms 500 ..." runs it into a scratch store
  us survey --db "${SURVEY_DB:-data/h200/survey.sqlite}" --batch 1,8,32,128,256 --precision fp16 --backend graph \
    --per-worker 8 ${SURVEY_OPTIONS:-} ;;
survey-inference) # the same models with BN folded + inductor (freezing) + CUDA graphs, at batch 1 and 256;
  # JOBS=2 with GPU "0,1" runs two workers, one per GPU
  us survey --db data/h200/survey.sqlite --batch 1,256 --precision fp16 --backend inference --per-worker 8 \
    --attribute none --jobs "${JOBS:-1}" ${MODELS:+--models "$MODELS"} ;;
nas-measure-*) # 600 sampled architectures of a space at batch 256, the first 250 also at batch 1; cuDNN's
  # heuristics instead of autotuning (autotuning every new network's conv shapes costs seconds per network)
  space=${stage#nas-measure-}
  us nas measure data/h200/${space}_archs.jsonl --db data/h200/nas.sqlite --batch 1,256 --limit 250 \
    --precision fp16 --backend graph --min-time-ms 100 --per-worker 1000 --no-cudnn-benchmark
  us nas measure data/h200/${space}_archs.jsonl --db data/h200/nas.sqlite --batch 256 \
    --precision fp16 --backend graph --min-time-ms 100 --per-worker 1000 --no-cudnn-benchmark ;;
nas-table-mbv3) # every distinct layer of the mbv3 space (445) at batch 1 and 256
  us nas table --no-cudnn-benchmark --space mbv3 --batch 1,256 --out data/h200/mbv3_table.json ;;
nas-table-regnet-256) # the layers of the 600 sampled regnet architectures at batch 256
  us nas table --no-cudnn-benchmark --space regnet --archs data/h200/regnet_archs.jsonl --batch 256 --out data/h200/regnet_table_256.json ;;
nas-table-regnet-1) # the layers of the 250 regnet architectures measured at batch 1
  head -n 250 data/h200/regnet_archs.jsonl >/tmp/regnet_archs_250.jsonl
  us nas table --no-cudnn-benchmark --space regnet --archs /tmp/regnet_archs_250.jsonl --batch 1 --out data/h200/regnet_table_1.json ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
done
