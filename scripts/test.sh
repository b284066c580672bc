#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (missing apt packages), builds gpufeed with its tests and runs
# them. GPU tests are built everywhere and skipped, with the reason, where there is no GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh"
source "$here/common.sh"
gpufeed_build "$gpufeed_root/build" -DGPUFEED_WERROR=ON
cd "$gpufeed_root/build"
ctest --output-on-failure -j "$gpufeed_jobs" "$@"
