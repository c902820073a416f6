#!/usr/bin/env bash
# On the H200: does each store under data/h200/ still know its cells? Every grid that measured a store is planned
# again (--dry-run) on a copy of it, in this machine's configuration (GPU, driver, torch, cuDNN); a store whose grid
# was measured whole plans 0 cells. Usage: scripts/h200_resume_check.sh  (prints one "survey:" line per grid)
set -uo pipefail
export PYTHONPATH=$PWD/src
copies=$(mktemp -d)
cp -r data/h200/. "$copies/"
us() { python3 -m utilscope.cli "$@" --dry-run 2>&1 | grep -E "^survey:|error"; }
graph="--batch 1,8,32,128,256 --precision fp16 --backend graph"
echo "survey.sqlite, graph (305 cells):";     us survey --db "$copies/survey.sqlite" $graph
echo "survey.sqlite, inference (122 cells):"; us survey --db "$copies/survey.sqlite" --batch 1,256 --precision fp16 \
  --backend inference --attribute none
echo "cost/autotune.sqlite (260 of 305 measured):"; us survey --db "$copies/cost/autotune.sqlite" $graph
echo "cost/depthwise.sqlite:"; us survey --db "$copies/cost/depthwise.sqlite" $graph --cudnn-depthwise-heuristic
echo "cost/fast.sqlite:";      us survey --db "$copies/cost/fast.sqlite" $graph --no-cudnn-benchmark
echo "cost/heurb.sqlite:";     us survey --db "$copies/cost/heurb.sqlite" $graph --no-cudnn-benchmark
echo "cost/limit3.sqlite (294 of 305 measured):"; us survey --db "$copies/cost/limit3.sqlite" $graph \
  --cudnn-benchmark-limit 3
for space in mbv3 regnet; do
  nas="--precision fp16 --backend graph --min-time-ms 100 --no-cudnn-benchmark --db $copies/nas.sqlite"
  echo "nas.sqlite, $space at batch 1 and 256 (first 250):"
  us nas measure data/h200/${space}_archs.jsonl --batch 1,256 --limit 250 $nas
  echo "nas.sqlite, $space at batch 256 (600):"
  us nas measure data/h200/${space}_archs.jsonl --batch 256 $nas
done
rm -r "$copies"
