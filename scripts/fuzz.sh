#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 22, ASan+UBSan) and runs each for a fixed time from its
# seeds: the IR text parser and verifier and the pass pipeline compile() runs (from the golden
# tests in tests/ir/), the artifact loader and the safetensors reader (from fuzz/corpus/). A
# finding (crash, undefined behaviour, escaping exception, timeout, text that does not round-trip)
# fails with its input saved under build/fuzz/. Usage: scripts/fuzz.sh [seconds per target,
# default 60]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
# target, seed folder, max input length, libFuzzer's extra options
targets=(
  "weft_ir_fuzzer tests/ir/*.wir 4096 -dict=fuzz/ir.dict"
  "weft_passes_fuzzer tests/ir/*.wir 4096 -dict=fuzz/ir.dict"
  "weft_artifact_fuzzer fuzz/corpus/artifact/* 16384"
  "weft_safetensors_fuzzer fuzz/corpus/safetensors/* 4096"
)
for entry in "${targets[@]}"; do
  read -r target seeds maxlen extra <<<"$entry"
  corpus="build/fuzz/corpus-$target"
  mkdir -p "$corpus"
  cp $seeds "$corpus"/
  log="build/fuzz/$target.log"
  echo "=== $target, $seconds s"
  "build/fuzz/fuzz/$target" "$corpus" ${extra:-} -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len="$maxlen" -print_final_stats=1 -artifact_prefix=build/fuzz/ \
    >"$log" 2>&1 || status=$?
  grep -E "^(stat::number_of_executed_units|stat::new_units_added)" "$log" || true
  if ((status != 0)); then
    tail -n 60 "$log"
    echo "fuzz: $target found a problem (exit $status); the input is saved under build/fuzz/"
    exit "$status"
  fi
done
