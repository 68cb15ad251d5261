#!/usr/bin/env bash
# Builds weft and runs the main demo: train a model and watch its loss fall.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target train_eager
build/release/examples/train_eager
