#!/usr/bin/env bash
# Builds weft and runs the whole test suite: every test in Release, then the core tests under
# AddressSanitizer+UBSan and under ThreadSanitizer. `--quick` runs the Release tests only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

run_preset() {
  echo "=== $1: configure, build, test"
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1"
  ctest --preset "$1"
}

run_preset release
if [[ "${1:-}" != "--quick" ]]; then
  run_preset asan
  run_preset tsan
fi
