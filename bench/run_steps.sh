# Sourced by the GPU machine's bench scripts (run_h200_compressed.sh, run_gpu_decode.sh): each
# step bounded by what is left of one device call. The caller sets `log` (the log file) and
# `deadline` (epoch seconds) first.
#   step NAME LIMIT_SECONDS RESULT_FILE COMMAND...   runs COMMAND under at most LIMIT_SECONDS (less
#                                                    when the deadline is nearer), its stdout to
#                                                    RESULT_FILE (- for the log), stderr to the log
step() {
  local name=$1 limit=$2 res=$3
  shift 3
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then echo "===== $name: skipped (no time left)" | tee -a "$log"; return; fi
  echo "===== $name (limit ${limit}s): $*" >>"$log"
  local t0=$(date +%s)
  if [ "$res" = - ]; then
    timeout "$limit" "$@" >>"$log" 2>&1
  else
    timeout "$limit" "$@" >"$res" 2>>"$log"
  fi
  echo "===== $name: exit $? after $(( $(date +%s) - t0 )) s" | tee -a "$log"
}
