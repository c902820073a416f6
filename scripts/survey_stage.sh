# Sourced by the GPU scripts that survey: one stage of a GPU call, cut at the call's end, and the copies of its stores.
# survey_stage LABEL LOG ARG...: `utilscope survey ARG...` until `end` (the caller's, in epoch seconds), stopped
# with SIGINT (a survey keeps what it stored and stores nothing for the cell in flight), its output appended to
# LOG, then its exit code and the log's last 25 lines; returns 1 without running when 20 s or less are left.
# STAGE_VERB names another verb that runs through the survey runner (e.g. "nas measure"; default survey).
survey_stage() {
  local label=$1 log=$2 left verb
  shift 2
  read -ra verb <<<"${STAGE_VERB:-survey}"
  left=$((end - $(date +%s)))
  [ "$left" -le 20 ] && return 1
  echo "== $label $(date -u +%T), ${left} s left"
  timeout -s INT "$left" python3 -m utilscope.cli "${verb[@]}" "$@" >>"$log" 2>&1
  echo "rc=$? $(date -u +%T)" | tee -a "$log"
  tail -n 25 "$log"
}
# copying_stores STORE...: a copy of each store in $OUT every 60 s (scripts/copy_stores.py: SQLite's online backup,
# checked before it replaces a copy), in the background, so a call the device ends early still brings back what was
# stored; stores_copied STORE... stops it and copies them a last time.
# local_stores GPU NAME...: the stores data/GPU/NAME.sqlite surveyed in a folder of the machine's local /tmp, not the
# working tree's (on the lent machines' gVisor runtime a store written there came back malformed once), each started
# from its kept copy where there is one: sets the array `stores` to their paths and starts copying_stores on them.
local_stores() {
  local gpu=$1 dir name
  shift
  dir=$(mktemp -d)
  stores=()
  for name in "$@"; do
    [ -f "data/$gpu/$name.sqlite" ] && cp "data/$gpu/$name.sqlite" "$dir/"
    stores+=("$dir/$name.sqlite")
  done
  mkdir -p "$OUT"
  copying_stores "${stores[@]}"
}
copying_stores() {
  python3 scripts/copy_stores.py "$OUT" "$@" &
  copier=$!
  trap 'kill $copier' EXIT
}
stores_copied() {
  kill "$copier"
  wait "$copier" 2>/dev/null
  trap - EXIT
  python3 scripts/copy_stores.py --once "$OUT" "$@"
}
