#!/usr/bin/env bash
# Runs every program in the bundle's bin/ (scripts/gpu-bundle.sh) whose name starts with test_ (on the GPU machine), appends their
# output to $OUT/tests.log (one file: the device tool returns few files), and prints a
# pass/skip/fail table last. Exit 77 = skipped; on the GPU machine a skip means the device (or its
# memory) was not usable, so it counts as a failure: GPUFEED_REQUIRE_GPU=1 makes the test programs
# themselves exit 1 instead of 77, and any 77 that still comes back fails the run.
set -u
export GPUFEED_REQUIRE_GPU=1
root=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-/tmp/gpufeed-out}
mkdir -p "$out"
pass=0 fail=0 skip=0 table=""
for t in "$root"/bin/test_*; do
  name=$(basename "$t")
  start=$(date +%s%N)
  echo "===== $name" >>"$out/tests.log"
  "$t" >"$out/$name.tmp" 2>&1
  rc=$?
  cat "$out/$name.tmp" >>"$out/tests.log"
  secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
  case $rc in
    0) status=PASS; pass=$((pass+1));;
    77) status="SKIP=FAIL"; skip=$((skip+1)); tail -5 "$out/$name.tmp";;
    *) status="FAIL($rc)"; fail=$((fail+1)); tail -30 "$out/$name.tmp";;
  esac
  rm -f "$out/$name.tmp"
  table+=$(printf '%-36s %-9s %8ss' "$name" "$status" "$secs")$'\n'
done
echo "----"
printf '%s' "$table"
echo "passed $pass, skipped $skip (failures here), failed $fail"
[ "$fail" -eq 0 ] && [ "$skip" -eq 0 ]
