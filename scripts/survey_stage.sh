# Sourced by the h200_* survey scripts: one stage of a GPU call, cut at the call's end.
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
