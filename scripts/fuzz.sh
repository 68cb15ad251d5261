#!/usr/bin/env bash
# Builds the libFuzzer targets (clang 22, ASan+UBSan) and fuzzes the IR text parser and verifier
# for a fixed time, starting from the golden tests in tests/ir/. A finding (crash, undefined
# behaviour, escaping exception, timeout, text that does not round-trip) fails with its input
# saved under build/fuzz/. Usage: scripts/fuzz.sh [seconds, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
corpus=build/fuzz/corpus
mkdir -p "$corpus"
cp tests/ir/*.weft "$corpus"/
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
log=build/fuzz/fuzz.log
status=0
build/fuzz/fuzz/weft_ir_fuzzer "$corpus" -dict=fuzz/ir.dict -max_total_time="$seconds" \
  -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 -artifact_prefix=build/fuzz/ \
  >"$log" 2>&1 || status=$?
grep -E "^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+ +DONE)" "$log" || true
if ((status != 0)); then
  tail -n 60 "$log"
  echo "fuzz: a finding (exit $status); the input is saved under build/fuzz/"
fi
exit "$status"
