#!/bin/bash
# One table of weft on a Vulkan GPU beside PyTorch (CUDA) on the same GPU: the device's per-op
# kernels (eager latency per op, GEMM throughput), whole train steps (the GPT-like and the CNN
# step, eager and compiled: weft-bench-gpu-step beside torch_steps.py's eager and torch.compile)
# and device copy bandwidth. Runs on the GPU machine from the repository root, given
#   $BENCH: weft-bench-vulkan (compiling its shaders there: a WEFT_STATIC_LLVM build where the
#           machine has no LLVM 22), or by default build/release/benchmarks/weft-bench-vulkan-rt
#           (the runtime alone) with $PACK, a shader pack weft-bench-vulkan --write-pack wrote for
#           the ops it runs
#   $STEPS: weft-bench-gpu-step (a WEFT_STATIC_LLVM build where the machine has no LLVM 22;
#           empty: no step rows)
#   the Vulkan loader (and, where the machine lacks them, OpenBLAS's libraries in $LIBS)
# Prints: metric, weft, PyTorch, ratio (weft's time over PyTorch's; for TFLOP/s, weft's share).
set -euo pipefail
PACK=${PACK:-build/shaders.pack}
PY=${PY:-python3}
[ -n "${LIBS:-}" ] && export LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}"
if [ -n "${BENCH:-}" ]; then
  weft=$("$BENCH" | tee /dev/stderr | grep '^RESULT')
else
  weft=$(build/release/benchmarks/weft-bench-vulkan-rt --pack "$PACK" | tee /dev/stderr | grep '^RESULT')
fi
torch=$($PY benchmarks/gpu/torch_ops.py | grep '^RESULT')
if [ -n "${STEPS:-}" ]; then
  weft+=$'\n'$("$STEPS" | tee /dev/stderr | grep '^RESULT')
  torch+=$'\n'$($PY benchmarks/gpu/torch_steps.py | grep '^RESULT')
fi
printf '%-34s %14s %14s %10s\n' metric weft PyTorch ratio
while IFS='|' read -r name us tflops; do
  name=${name#RESULT }
  line=$(grep -F "RESULT $name|" <<<"$torch" || true)
  [ -z "$line" ] && continue
  IFS='|' read -r _ tus ttflops <<<"$line"
  printf '%-34s %12.1fus %12.1fus %9.2fx\n' "$name (latency)" "$us" "$tus" "$(awk -v a="$us" -v b="$tus" 'BEGIN { print a / b }')"
  if [ "$tflops" != "-" ]; then
    printf '%-34s %11s TF %11s TF %9.2fx\n' "$name (TFLOP/s)" "$tflops" "$ttflops" \
      "$(awk -v a="$tflops" -v b="$ttflops" 'BEGIN { print a / b }')"
  fi
done <<<"$weft"
