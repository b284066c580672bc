#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (missing apt packages), builds gpufeed and runs its main job.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh"
source "$here/common.sh"
# Only the main job's program is built; the build tree is the one test.sh uses, with the same
# settings, so the two commands run in either order without reconfiguring each other.
GPUFEED_TARGETS=train_loop gpufeed_build "$gpufeed_root/build"
cd "$gpufeed_root"
# The demo dataset (about 314 MB of files and shards; 705 MB once an LMDB run added its shards)
# lives in the build tree, build/gpufeed-demo, so `rm -rf build` removes it with everything else
# and the checkout stays clean. --data DIR given here puts it elsewhere.
data=(--data "$gpufeed_root/build/gpufeed-demo")
for a in "$@"; do
  case "$a" in --data|--data=*) data=() ;; esac
done
"$gpufeed_root/build/examples/train_loop" "${data[@]}" "$@"
