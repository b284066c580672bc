#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (missing apt packages), builds gpufeed and runs its main job.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh"
source "$here/common.sh"
gpufeed_build "$gpufeed_root/build" -DGPUFEED_BUILD_TESTS=OFF
cd "$gpufeed_root"
"$gpufeed_root/build/examples/train_loop" "$@"
