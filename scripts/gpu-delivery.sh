#!/usr/bin/env bash
# Aggregate delivery on the GPUs of one host: one compressed_bench process per GPU under the
# bundled Open MPI's mpirun, each loader delivering its rank's share (--ranks-from-env) of
# page-cache shards of 16 KiB records, in shuffled and block_shuffled order, beside the bounds
# measured in the same call with every GPU's process running at once: the sum of the GPUs'
# pinned H2D rates and the host's parallel read rate of the shards. Then the loader cases again
# with each process's pinned slots and workers on its GPU's far NUMA node (--numa N), against
# its own node (the default). On the GPU machine, the bundle folder of scripts/ddp-bundle.sh
# carried, from that folder's copy of this script:
#   bash gpu-delivery.sh [GPUS]      (default: all the machine's GPUs; 1 works too)
# Writes $OUT/delivery.log (every rank's output) and $OUT/delivery.json; prints a table last.
# Exit status 1 when a rank failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
work=/tmp/gpufeed-delivery
if [ "${1:-}" = --rank ]; then
  # One rank: GPU = its local rank; "--numa far" becomes that GPU's far node.
  tag=$2
  shift 2
  r=${OMPI_COMM_WORLD_LOCAL_RANK:-0}
  args=()
  for a in "$@"; do
    if [ "$a" = far ]; then a=$(cat "$work/far-node-$r"); fi
    args+=("$a")
  done
  export CUDA_VISIBLE_DEVICES=$r
  exec "$here/bin/compressed_bench" --ranks-from-env --json "${args[@]}" \
    >"$work/$tag-rank$r.json" 2>"$work/$tag-rank$r.log"
fi
gpus=${1:-$(nvidia-smi -L | grep -c '^GPU')}
out=${OUT:-/tmp/gpufeed-out}
mkdir -p "$out" "$work"
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source "$here/gpu-mpi.sh"  # the bundled Open MPI; NVLink multicast off
log=$out/delivery.log
: >"$log"
cores=$(nproc)
workers=${WORKERS:-$(( cores / gpus > 3 ? cores / gpus - 2 : 1 ))}
seconds=${SECONDS_PER_CASE:-6}

# Each GPU's NUMA node (sysfs, by its PCI bus id) and a far node: another online node.
nodes=$(cat /sys/devices/system/node/online 2>/dev/null || echo 0)
far_ok=1
for ((r = 0; r < gpus; r++)); do
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$r" | tr 'A-Z' 'a-z')
  # nvidia-smi's 8-digit PCI domain, sysfs's 4: 00000000:17:00.0 -> 0000:17:00.0
  near=$(cat "/sys/bus/pci/devices/${bus:4}/numa_node" 2>/dev/null || echo -1)
  far=$(python3 -c 'import sys
near, spec = int(sys.argv[1]), sys.argv[2]
nodes = [n for part in spec.split(",") for n in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))]
print(next((n for n in nodes if n != near), -1) if near >= 0 else -1)' "$near" "$nodes")
  echo "$far" >"$work/far-node-$r"
  echo "GPU $r: bus $bus, node $near, far node $far (online nodes $nodes)" | tee -a "$log"
  [ "$far" -ge 0 ] || far_ok=0
done

# 16 KiB records, uncompressed shards (written by gpufeed pack from an h5py file), in the page cache.
data=$work/none
if ! ls "$data"/*.h5 >/dev/null 2>&1; then
  python3 "$root/bench/make_h5py_data.py" gzip "$work/h5py_gzip.h5" --rows "${ROWS:-65536}" >>"$log" 2>&1
  "$here/bin/gpufeed" pack --from "$work/h5py_gzip.h5" --dataset data --labels labels --compress none \
    -o "$data" -q >>"$log" 2>&1
fi
files=("$data"/*.h5)
cat "${files[@]}" >/dev/null

status=0
step() {  # step TAG ARGS...: every GPU's rank at once
  local tag=$1
  shift
  echo "== $tag: ${mpirun_[*]} $gpus ... $*" >>"$log"
  if ! timeout 300 "${mpirun_[@]}" "$gpus" --bind-to none bash "$here/gpu-delivery.sh" --rank "$tag" \
       --workers "$workers" --seconds "$seconds" "$@" "${files[@]}" >>"$log" 2>&1; then
    status=1
    echo "== $tag: FAILED" | tee -a "$log"
  fi
  for ((r = 0; r < gpus; r++)); do cat "$work/$tag-rank$r.log" >>"$log" 2>/dev/null; done
}
step h2d --cases h2d
step read --cases read
step near --cases shuffled,block
[ "$far_ok" = 1 ] && step far --cases shuffled,block --numa far

python3 - "$work" "$gpus" "$out/delivery.json" <<'PY' | tee -a "$log"
import json, sys
work, gpus, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(tag, r):
    try:
        with open(f"{work}/{tag}-rank{r}.json") as f:
            return {c["case"]: c for c in json.load(f)}
    except (OSError, ValueError):
        return {}
res = {tag: [load(tag, r) for r in range(gpus)] for tag in ["h2d", "read", "near", "far"]}
with open(dest, "w") as f:
    json.dump(res, f, indent=1)
def rate(tag, r, case):
    return res[tag][r].get(case, {}).get("gb_per_s", 0.0)
def total(tag, case):
    return sum(rate(tag, r, case) for r in range(gpus))
h2d, read = total("h2d", "h2d"), total("read", "read")
bound = min(h2d, read)
print(f"\n==== delivery on {gpus} GPU(s), 16 KiB records in the page cache (GB/s)")
print(f"{'GPU':<4} {'pinned H2D':>10} {'read':>8} {'shuffled':>9} {'block':>8} {'far: shuffled':>14} {'far: block':>11}  numa (near / far)")
for r in range(gpus):
    numa = [res[t][r].get("shuffled", {}).get("numa", {}) for t in ["near", "far"]]
    held = " / ".join(f"node {n.get('node', '?')} {'held' if n.get('honoured') else 'NOT held'}" if n else "-" for n in numa)
    print(f"{r:<4} {rate('h2d', r, 'h2d'):10.2f} {rate('read', r, 'read'):8.2f} "
          f"{rate('near', r, 'shuffled'):9.2f} {rate('near', r, 'block'):8.2f} "
          f"{rate('far', r, 'shuffled'):14.2f} {rate('far', r, 'block'):11.2f}  {held}")
print(f"{'all':<4} {h2d:10.2f} {read:8.2f} {total('near', 'shuffled'):9.2f} {total('near', 'block'):8.2f} "
      f"{total('far', 'shuffled'):14.2f} {total('far', 'block'):11.2f}")
for case in ["shuffled", "block"]:
    got = total("near", case)
    ok = bound > 0 and got >= 0.9 * bound
    print(f"target {case}: total >= 0.9 x min(sum of pinned H2D, host read) "
          f"{'PASS' if ok else 'FAIL'}: {got:.2f} against {0.9 * bound:.2f}")
PY
exit $status
