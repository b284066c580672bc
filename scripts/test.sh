#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (missing apt packages), builds gpufeed with its tests and runs
# them. GPU tests are built everywhere and skipped, with the reason, where there is no GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/setup.sh"
source "$here/common.sh"
# Tests are switched on explicitly: a build tree configured without them (by hand, or by an older
# run.sh) must not turn this into a run of zero tests, and ctest fails if it finds none.
gpufeed_build "$gpufeed_root/build" -DGPUFEED_BUILD_TESTS=ON -DGPUFEED_WERROR=ON
cd "$gpufeed_root/build"
ctest --output-on-failure --no-tests=error -j "$gpufeed_jobs" "$@"
