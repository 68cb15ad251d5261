"""The baseline of csv_vs_pandas.sh: pandas.read_csv, then one pass of torch's DataLoader.

Usage: csv_pandas.py PATH THREADS BATCH. Prints "read <s> batch <s> rows <n> batches <n>".
"""
import sys
import time

import numpy
import pandas
import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    path, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    start = time.perf_counter()
    # float32, as weft reads it: the same bytes reach the loader.
    table = torch.from_numpy(pandas.read_csv(path, dtype=numpy.float32).values)
    read = time.perf_counter() - start
    start = time.perf_counter()
    loader = DataLoader(TensorDataset(table), batch_size=batch, num_workers=threads)
    rows = batches = 0
    for (b,) in loader:
        rows += b.shape[0]
        batches += 1
    iterate = time.perf_counter() - start
    print(f"read {read:.4f} batch {iterate:.4f} rows {rows} batches {batches}")


if __name__ == "__main__":
    main()
