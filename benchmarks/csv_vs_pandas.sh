#!/usr/bin/env bash
# weft's CSV reader + DataLoader against pandas.read_csv + torch.utils.data.DataLoader, side by
# side: a 1,000,000 x 100 float CSV (made once, cached in /tmp) read and iterated in batches of 256
# with 2 threads each, 3 runs each (interleaved), medians in a table; then weft's DataLoader
# throughput on Fashion-MNIST with augmentation. Not run in CI.
#   cmake --build build/release --target weft_csv_bench && benchmarks/csv_vs_pandas.sh
# Needs Debian's python3-pandas and python3-torch. BUILD, CSV, RUNS override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
BENCH=$BUILD/benchmarks/weft_csv_bench
CSV=${CSV:-/tmp/weft_bench_1000000x100.csv}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
RUNS=${RUNS:-3}
THREADS=2
BATCH=256
PY=/usr/bin/python3

[[ -x $BENCH ]] || { echo "missing $BENCH: cmake --build $BUILD --target weft_csv_bench" >&2; exit 1; }
$PY -c 'import pandas, torch' 2>/dev/null ||
  { echo "needs python3-pandas and python3-torch: apt-get install python3-pandas python3-torch" >&2; exit 1; }
if [[ ! -f $CSV ]]; then
  echo "writing $CSV (once)..."
  "$BENCH" generate "$CSV.part" 1000000 100 && mv "$CSV.part" "$CSV"
fi
cat "$CSV" >/dev/null # both sides read it from the page cache

export WEFT_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((i = 1; i <= RUNS; ++i)); do
  echo "run $i/$RUNS..." >&2
  echo "weft $("$BENCH" csv "$CSV" $THREADS $BATCH)" >>"$results"
  echo "torch $($PY benchmarks/csv_pandas.py "$CSV" $THREADS $BATCH)" >>"$results"
done

echo
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads per side: $THREADS"
echo "file: $CSV ($(du -h "$CSV" | cut -f1)), batches of $BATCH, medians of $RUNS runs"
echo "versions: pandas $($PY -c 'import pandas; print(pandas.__version__)'), torch $($PY -c 'import torch; print(torch.__version__)')"
$PY - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    side, *kv = line.split()
    fields = dict(zip(kv[::2], map(float, kv[1::2])))
    runs.setdefault(side, []).append(fields)
med = {s: {k: statistics.median(r[k] for r in rs) for k in ("read", "batch")} for s, rs in runs.items()}
for m in med.values():
    m["total"] = m["read"] + m["batch"]
label = {"weft": "weft read_csv_tensor + DataLoader", "torch": "pandas.read_csv + torch DataLoader"}
print(f"{'':36} {'read s':>8} {'batch s':>8} {'total s':>8}")
for s in ("weft", "torch"):
    print(f"{label[s]:36} {med[s]['read']:8.3f} {med[s]['batch']:8.3f} {med[s]['total']:8.3f}")
ratio = {k: med["torch"][k] / med["weft"][k] for k in ("read", "batch", "total")}
print(f"{'speedup (pandas+torch / weft)':36} {ratio['read']:7.1f}x {ratio['batch']:7.1f}x {ratio['total']:7.1f}x")
PY

echo
if [[ -f $FMNIST/train-images-idx3-ubyte.gz || -f $FMNIST/train-images-idx3-ubyte ]]; then
  echo "Fashion-MNIST train, batch 128, 2 workers, Normalize + RandomCrop(28, 2) + RandomHorizontalFlip:"
  "$BENCH" fmnist "$FMNIST" 2 128 |
    awk '{printf "  load %.2f s, one epoch %.2f s: %d samples/s\n", $2, $4, $8}'
else
  echo "Fashion-MNIST not found at $FMNIST (Debian package dataset-fashion-mnist): skipped"
fi
