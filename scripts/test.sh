#!/usr/bin/env bash
# Builds weft and runs the whole test suite: every test in Release, two consumer projects
# (find_package and add_subdirectory), then the core tests under AddressSanitizer+UBSan and under
# ThreadSanitizer, and 45 s each of fuzzing the IR text parser, the pass pipeline, the artifact
# loader and the safetensors reader.
# `--quick` runs the Release tests only.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# ccache lets the add_subdirectory consumer below reuse the Release objects (same flags, paths
# made relative to the checkout), and a rerun reuse everything unchanged.
export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$PWD"

run_preset() {
  echo "=== $1: configure, build, test"
  cmake --preset "$1" >/dev/null
  cmake --build --preset "$1"
  ctest --preset "$1"
}

run_preset release

echo "=== consumers: find_package(weft) on an installed tree, and add_subdirectory"
rm -rf build/install build/consumer-*
cmake --install build/release --prefix build/install >/dev/null
cmake -S tests/consumer -B build/consumer-installed -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer-installed
build/consumer-installed/consumer
cmake -S tests/consumer -B build/consumer-subdir -G Ninja -DWEFT_SOURCE_DIR="$PWD" \
  -DCMAKE_BUILD_TYPE=Release -DWEFT_WERROR=ON >/dev/null
cmake --build build/consumer-subdir -j2
build/consumer-subdir/consumer

if [[ "${1:-}" != "--quick" ]]; then
  run_preset asan
  run_preset tsan
  echo "=== fuzz: the IR text parser, the pass pipeline, the artifact loader, safetensors, 45 s each"
  scripts/fuzz.sh 45
fi
