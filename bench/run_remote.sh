#!/usr/bin/env bash
# gpufeed reading pack shards over HTTP on the loopback interface, against curl and against the
# same shards from local files, in one bounded run:
#   bash bench/run_remote.sh [GPUFEED]   # the gpufeed CLI (default: build/tools/gpufeed)
# Data (in DATA_DIR, default /tmp/gpufeed-remote-data): FILES files of about FILE_KIB KiB (half
# random, half repeated bytes), packed by `gpufeed pack --compress lz4` into shards of SHARD_MIB.
# `gpufeed bench` runs with --no-storage and, when CACHE_MIB is set, --cache-mib CACHE_MIB (see
# below). Steps, each bounded (bench/run_steps.sh), all within BUDGET_SECONDS:
#  (b) nginx serves the shards; `gpufeed bench URL/manifest.json` in block_shuffled and shuffled
#      order (WORKERS workers, PREFETCH prefetch, SECONDS_PER_RUN each), nginx logging every
#      request's Range;
#  (a) curl issues the GETs nginx logged for each order again, the same ranges, --parallel-max
#      WORKERS (as many at once as gpufeed's workers), giving curl's bytes/s for the same work;
#  (c) tests/remote/fault_server.py serves the shards with no faults, then with FAULT_RATE of
#      requests reset, then answered 503 SlowDown (block_shuffled), FAULT_ROUNDS (3) rounds of
#      the three: retries and the median over rounds of records/s against the same round's
#      fault-free run;
#  (d) `gpufeed bench` over the local shards in both orders, for reference.
# Writes $OUT/remote.log, one JSON per run, the access logs, and prints the table last.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
gpufeed=$(realpath "${1:-$root/build/tools/gpufeed}")
out=${OUT:-/tmp/gpufeed-remote-out}
data=${DATA_DIR:-/tmp/gpufeed-remote-data}
python=${PYTHON:-python3}
files=${FILES:-8192}
file_kib=${FILE_KIB:-64}
shard_mib=${SHARD_MIB:-32}
workers=${WORKERS:-4}
prefetch=${PREFETCH:-4}
seconds=${SECONDS_PER_RUN:-8}
fault_rate=${FAULT_RATE:-0.01}
fault_rounds=${FAULT_ROUNDS:-3}
helper=("$python" "$root/bench/remote_bench.py")
mkdir -p "$out" "$data"
log=$out/remote.log
: >"$log"
deadline=$(( $(date +%s) + ${BUDGET_SECONDS:-600} ))
source "$root/bench/run_steps.sh"  # step NAME LIMIT RESULT COMMAND...
{
  echo "gpufeed: $gpufeed"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: $(nproc) cores, $(uname -sr), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "nginx: $(nginx -v 2>&1)"
  echo "curl: $(curl --version | head -1)"
  echo "load before: $(cat /proc/loadavg) (other processes share the cores: figures move with it)"
  echo "files $files x ~$file_kib KiB, shards of $shard_mib MiB (lz4), workers $workers," \
       "prefetch $prefetch, $seconds s per run, cache ${CACHE_MIB:-automatic} (MiB when set)," \
       "fault rate $fault_rate, $fault_rounds fault rounds"
} >>"$log"

if [ ! -f "$data/shards/manifest.json" ]; then
  step make_input 120 - "${helper[@]}" make-input "$data/in" "$files" "$file_kib"
  step pack 120 - "$gpufeed" pack "$data/in" -o "$data/shards" --compress lz4 \
    --shard-size "${shard_mib}MiB" -q --force
fi
du -sb "$data/shards" >>"$log"

# One loader configuration per run, no storage pass (its requests would mix with the loader's in
# nginx's log). The decoded-chunk cache is the automatic one unless CACHE_MIB is set: what
# block_shuffled's window, decoded ahead, and the look-ahead need (about 330 MiB at the default
# knobs), below these shards' decoded size (about 540 MiB), so that every epoch fetches and
# decodes again, as over data larger than memory. An explicit budget below that need decodes
# some chunks twice per epoch in block_shuffled order (1.3x at 256 MiB).
cache=()
[ -n "${CACHE_MIB:-}" ] && cache=(--cache-mib "$CACHE_MIB")
bench=("$gpufeed" bench --json --seconds "$seconds" --workers "$workers" --prefetch "$prefetch"
       --no-storage "${cache[@]}")
limit=$(( seconds * 2 + 30 ))

# --- nginx on the loopback ---
ngx=$out/nginx
rm -rf "$ngx"; mkdir -p "$ngx"
port=$("${helper[@]}" port)
"${helper[@]}" nginx-conf "$ngx" "$port" "$data"
nginx -p "$ngx/" -c "$ngx/nginx.conf" -e "$ngx/error.log" &
nginx_pid=$!
fault_pid=
cleanup() {
  kill "$nginx_pid" 2>/dev/null
  [ -n "$fault_pid" ] && kill "$fault_pid" 2>/dev/null
  wait 2>/dev/null
}
trap cleanup EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
base=http://127.0.0.1:$port
for order in block_shuffled shuffled; do
  : >"$ngx/access.log"  # nginx appends (O_APPEND): the log holds this run's requests only
  step "http_$order" "$limit" "$out/http_$order.json" "${bench[@]}" --order "$order" \
    "$base/shards/manifest.json"
  cp "$ngx/access.log" "$out/http_$order.access.log"
  gzip -f "$out/http_$order.access.log"
  step "curl_$order" "$limit" - "${helper[@]}" curl-replay "$out/http_$order.access.log.gz" "$base" \
    "$workers" "$out/curl_$order.json"
done
# gpufeed's own ranged GETs alone (the bench's storage pass: one stream, then WORKERS at once).
step http_ranged "$limit" "$out/http_ranged.json" "$gpufeed" bench --json --seconds "$seconds" \
  --workers "$workers" --prefetch "$prefetch" "${cache[@]}" \
  --order block_shuffled "$base/shards/manifest.json"
kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null

# --- fault_server.py: no faults, resets, 503 SlowDown; FAULT_ROUNDS rounds of the three ---
# Rounds alternate the three runs, so each faulty run has a fault-free run of its own round to
# compare with (the load of the machine moves between runs seconds apart).
for round in $(seq "$fault_rounds"); do
  for fault in none reset slowdown; do
    fifo=$out/fault_port
    "$python" "$root/tests/remote/fault_server.py" --root "$data" --fault "$fault" \
      --rate "$fault_rate" --skip 20 --seed "$round" >"$fifo" &
    fault_pid=$!
    for _ in $(seq 100); do grep -q PORT "$fifo" 2>/dev/null && break; sleep 0.1; done
    fport=$(awk '/PORT/ {print $2}' "$fifo")
    name=fault_$fault
    [ "$round" -gt 1 ] && name=${name}_$round
    step "$name" "$limit" "$out/$name.json" "${bench[@]}" --order block_shuffled \
      "http://127.0.0.1:$fport/shards/manifest.json"
    kill "$fault_pid" 2>/dev/null; wait "$fault_pid" 2>/dev/null
    fault_pid=
  done
done

# --- the same shards from local files ---
for order in block_shuffled shuffled; do
  step "local_$order" "$limit" "$out/local_$order.json" "${bench[@]}" --order "$order" \
    "$data/shards"
done

echo "load after: $(cat /proc/loadavg)" >>"$log"
"${helper[@]}" table "$out" 2>&1 | tee -a "$log"
