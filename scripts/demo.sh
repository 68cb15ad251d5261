#!/usr/bin/env bash
# Builds weft and runs the main demo: train a model with a compiled train step; its loss falls.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target train_compiled
build/release/examples/train_compiled
