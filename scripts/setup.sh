#!/usr/bin/env bash
# Installs every Debian 12 package weft needs to build, test and run. Idempotent; run as root.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  libopenblas-dev zlib1g-dev
  dataset-fashion-mnist fortunes-min
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools liblld-22-dev
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers spirv-tools
  libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-22 libclang-rt-22-dev
  ccache
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "weft: all ${#packages[@]} packages present"
