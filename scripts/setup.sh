#!/usr/bin/env bash
# Installs every Debian 12 package weft needs to build, test and run. Idempotent; run as root.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  libopenblas-dev zlib1g-dev
  dataset-fashion-mnist fortunes-min
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools liblld-22-dev
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers spirv-tools
  libprotobuf-dev protobuf-compiler libonnx-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-22 libclang-rt-22-dev
  ccache
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm run onnxruntime in the ONNX export tests (a nodejs that bundles npm counts).
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# onnxruntime for those tests: npm's prebuilt package, pinned, without its install script (which
# fetches GPU builds from outside npm).
ort="$(cd "$(dirname "$0")/.." && pwd)/build/onnxruntime-node"
if [[ ! -f "$ort/node_modules/onnxruntime-node/package.json" ]]; then
  npm install --prefix "$ort" --ignore-scripts --no-audit --no-fund --loglevel=error \
    onnxruntime-node@1.30.0 >/dev/null
fi
echo "weft: all ${#packages[@]} packages present, and onnxruntime-node in build/onnxruntime-node"
