#!/usr/bin/env python3
# Which indices PyTorch's index-taking ops accept, for tests/IndexBoundsTest.cpp: every op of the
# table below with a negative, a too-large and the edge indices of a dim of 3 (or of 6 elements),
# and the cases on empty tensors, computed once with PyTorch (Debian's python3-torch 1.13, CPU,
# float64) and kept in index_bounds.txt beside this script, so the test suite needs no PyTorch.
#
#   /usr/bin/python3 tests/reference/index_bounds.py > tests/reference/index_bounds.txt
#
# One line per case: "name|index|error|<PyTorch's exception type>" where PyTorch raises, else
# "name|index|ok|<shape>|<values>" (row-major). The names and their meaning must match the table
# in IndexBoundsTest.cpp, which checks that both list the same cases.
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")  # scatter_reduce and index_reduce are "beta"
f64 = torch.float64


def x():
    return torch.arange(6, dtype=f64).reshape(2, 3)


def src():
    return torch.tensor([[10.0], [20.0]], dtype=f64)


def col(i):  # [[i], [i]]: one index per row of x, into dim 1
    return torch.full((2, 1), i, dtype=torch.long)


def vec(*v):
    return torch.tensor(v, dtype=torch.long)


def reduce_scatter(how):
    return lambda i: x().scatter_reduce(1, col(i), src(), how)


def reduce_index(how):
    return lambda i: x().index_reduce(1, vec(i), src(), how)


# Ops indexing dim 1 of x (size 3): tried with -4, -3, -1, 0, 2 and 3.
DIM_OPS = {
    "gather": lambda i: x().gather(1, col(i)),
    "scatter": lambda i: x().scatter(1, col(i), src()),
    "scatter_add": lambda i: x().scatter_add(1, col(i), src()),
    "scatter_reduce_sum": reduce_scatter("sum"),
    "scatter_reduce_prod": reduce_scatter("prod"),
    "scatter_reduce_mean": reduce_scatter("mean"),
    "scatter_reduce_amax": reduce_scatter("amax"),
    "scatter_reduce_amin": reduce_scatter("amin"),
    "index_select": lambda i: x().index_select(1, vec(i)),
    "index_add": lambda i: x().index_add(1, vec(i), src()),
    "index_copy": lambda i: x().index_copy(1, vec(i), src()),
    "index_fill": lambda i: x().index_fill(1, vec(i), 7.0),
    "index_reduce_prod": reduce_index("prod"),
    "index_reduce_mean": reduce_index("mean"),
    "index_reduce_amax": reduce_index("amax"),
    "index_reduce_amin": reduce_index("amin"),
    "take_along_dim": lambda i: x().take_along_dim(col(i), 1),
    "index": lambda i: x()[:, vec(i)],
    "index_put": lambda i: x().index_put((vec(0), vec(i)), torch.tensor(10.0, dtype=f64)),
    "index_put_accumulate": lambda i: x().index_put(
        (vec(0), vec(i)), torch.tensor(10.0, dtype=f64), accumulate=True
    ),
    "embedding": lambda i: F.embedding(vec(i), x().t().contiguous()),
    "one_hot": lambda i: F.one_hot(vec(i), 3),
    "nll_loss": lambda i: F.nll_loss(x(), vec(i, 0)),
    "cross_entropy": lambda i: F.cross_entropy(x(), vec(i, 0)),
    "bincount": lambda i: torch.bincount(vec(i)),
}
# Ops indexing x as a flat tensor of 6 elements: tried with -7, -6, -1, 0, 5 and 6.
FLAT_OPS = {
    "take": lambda i: x().take(vec(i)),
    "take_along_dim_flat": lambda i: x().take_along_dim(vec(i)),
    "put": lambda i: x().put(vec(i), torch.tensor([10.0], dtype=f64)),
    "put_accumulate": lambda i: x().put(vec(i), torch.tensor([10.0], dtype=f64), accumulate=True),
}


def e(*shape):
    return torch.zeros(*shape, dtype=f64)


# Empty tensors, empty dims and 0-d tensors, each with the one index its name says.
SPECIAL = {
    "gather_into_empty_dim": lambda: e(2, 0).gather(1, col(0)),
    "scatter_into_empty_dim": lambda: e(2, 0).scatter(1, col(0), src()),
    "scatter_add_into_empty_dim": lambda: e(2, 0).scatter_add(1, col(0), src()),
    "scatter_reduce_into_empty_dim": lambda: e(2, 0).scatter_reduce(1, col(-1), src(), "amax"),
    "gather_empty_index": lambda: x().gather(1, torch.zeros(2, 0, dtype=torch.long)),
    "index_select_empty_rows": lambda: e(0, 3).index_select(1, vec(5)),
    "index_select_empty_dim": lambda: e(2, 0).index_select(1, vec(0)),
    "index_select_empty_index": lambda: e(2, 0).index_select(1, vec()),
    "index_add_empty_rows": lambda: e(0, 3).index_add(1, vec(5), e(0, 1)),
    "index_copy_empty_rows": lambda: e(0, 3).index_copy(1, vec(5), e(0, 1)),
    "index_fill_empty_rows": lambda: e(0, 3).index_fill(1, vec(5), 1.0),
    "index_fill_empty_dim": lambda: e(2, 0).index_fill(1, vec(0), 1.0),
    "index_reduce_empty_rows": lambda: e(0, 3).index_reduce(1, vec(5), e(0, 1), "amax"),
    "index_empty_rows": lambda: e(0, 3)[:, vec(5)],
    "index_empty_dim": lambda: e(0, 3)[vec(0)],
    "index_put_empty_rows": lambda: e(3, 0).index_put((vec(5),), e(1, 0)),
    "take_from_empty": lambda: e(2, 0).take(vec(0)),
    "put_into_empty": lambda: e(2, 0).put(vec(0), torch.ones(1, dtype=f64)),
    "embedding_empty_weight": lambda: F.embedding(vec(5), e(3, 0)),
    "take_along_dim_flat_empty": lambda: e(0, 3).take_along_dim(vec(5)),
    "one_hot_no_indices": lambda: F.one_hot(torch.zeros(0, dtype=torch.long), 3),
    "scalar_gather_negative": lambda: torch.tensor(5.0, dtype=f64).gather(0, vec(-1)),
    "scalar_index_select_negative": lambda: torch.tensor(5.0, dtype=f64).index_select(0, vec(-1)),
    "scalar_index_fill_negative": lambda: torch.tensor(5.0, dtype=f64).index_fill(0, vec(-1), 1.0),
    "scalar_take_negative": lambda: torch.tensor(5.0, dtype=f64).take(vec(-1)),
}


def fmt(v):
    return repr(float(v))


def line(name, index, f):
    try:
        r = f()
    except Exception as err:  # PyTorch raises RuntimeError or IndexError
        return f"{name}|{index}|error|{type(err).__name__}"
    shape = ",".join(str(s) for s in r.shape)
    values = ",".join(fmt(v) for v in r.reshape(-1).tolist())
    return f"{name}|{index}|ok|{shape}|{values}"


for name, f in DIM_OPS.items():
    for i in (-4, -3, -1, 0, 2, 3):
        print(line(name, i, lambda: f(i)))
for name, f in FLAT_OPS.items():
    for i in (-7, -6, -1, 0, 5, 6):
        print(line(name, i, lambda: f(i)))
for name, f in SPECIAL.items():
    print(line(name, "-", f))
