#!/bin/bash
# One epoch of examples/fashion_mnist (60,000 images, batch 128) on the Vulkan device (eager), and
# on the CPU eager and compiled, on the same machine; prints a table: run, epoch seconds, test
# accuracy. Runs from the repository root, given
#   $BIN/fashion_mnist  (a build whose codegen library the machine can load: WEFT_STATIC_LLVM=ON
#                        where it has no LLVM 22)
#   $DATA               the Fashion-MNIST files (idx, raw or .gz)
# ($IMAGES: only the first N images of each set, for a quick check.)
set -euo pipefail
BIN=${BIN:-build/release/examples}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
EPOCHS=${EPOCHS:-1}
run() { # name, then the example's arguments
  local name=$1
  shift
  local out
  out=$("$BIN/fashion_mnist" --epochs "$EPOCHS" --data "$DATA" --out /tmp/fashion_mnist_bench \
    ${IMAGES:+--images "$IMAGES"} "$@")
  echo "$out" >&2
  # "epoch 1: train loss 0.4512, test accuracy 85.10%, 12.3 s"
  awk -v name="$name" '/^epoch / { s = $NF == "s" ? $(NF - 1) : $NF; acc = $(NF - 2) }
    END { printf "%-28s %10.1f s %12s\n", name, s, acc }' <<<"$out" | tr -d ','
}
printf '%-28s %12s %12s\n' run "epoch" "accuracy"
run "vulkan eager" --device vulkan
run "cpu eager" --eager
run "cpu compiled"
