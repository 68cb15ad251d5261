#!/usr/bin/env python3
# Reference results for tests/KinkTest.cpp: each op evaluated with its inputs exactly at its kinks,
# ties and clamp bounds (and a point either side), computed once with PyTorch (Debian's
# python3-torch 1.13, CPU, float64) and kept in kinks.txt beside this script, so the test suite
# itself needs no PyTorch.
#
#   /usr/bin/python3 tests/reference/kinks.py > tests/reference/kinks.txt
#
# One line per case: "name|inputs|outputs|gradients". inputs: "dtype:shape:values:d" per input,
# joined by ';', d = 1 where the input is differentiable; outputs: "dtype:shape:values" per output;
# gradients: the gradient of sum(output0 * w) (w = 1, 1.5, 2, 1, ... in row-major order) with
# respect to each differentiable input, joined by ';'. The case names and their meaning must match
# the table in KinkTest.cpp, which checks that both list the same cases; the inputs are read from
# here.
#
# PyTorch's CPU kernels run an elementwise op through a vectorized loop and its tail through a
# scalar one, and at some points the two disagree (hardswish's gradient at 3 is 1 in the vectorized
# loop and 1.5 in the scalar one; hardtanh's at NaN is 0 and 1). For the elementwise cases the
# reference is the scalar loop's, the kernel's formula as written: each element is run alone too,
# and where that differs from the whole tensor's run, the element's own gradient is kept (and
# reported on stderr).
import math
import sys

import torch
import torch.nn.functional as F

nan, inf = float("nan"), float("inf")


def around(*points, d=0.25):
    """Each point and a point either side of it, ascending."""
    return sorted({p + k * d for p in points for k in (-1, 0, 1)})


def t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


def x1(values):
    """One differentiable input."""
    return [(t(values), True)]


def xs(*specs):
    """Inputs: (values, differentiable) or (values, differentiable, dtype)."""
    return [(t(s[0], s[2] if len(s) > 2 else torch.float64), s[1]) for s in specs]


# binary extrema's inputs: ties, and NaN on either side
TIED_PAIRS = xs(([1.0, 2.0, 3.0, nan, 2.0, nan, -0.0], True),
                ([2.0, 2.0, 2.0, 2.0, nan, nan, 0.0], True))

# activations: 1-D inputs at the kinks, either side of them, and NaN (whose forward must stay)
ELEMENTWISE = {
    "relu": (lambda x: F.relu(x), x1(around(0) + [-0.0, nan])),
    "relu6": (lambda x: F.relu6(x), x1(around(0, 6) + [-0.0, nan])),
    "leaky_relu": (lambda x: F.leaky_relu(x), x1(around(0) + [nan])),
    "leaky_relu_neg": (lambda x: F.leaky_relu(x, -0.2), x1(around(0) + [nan])),
    "prelu": (lambda x, w: F.prelu(x, w), xs((around(0) + [nan], True), ([0.25], True))),
    "prelu_channels": (
        lambda x, w: F.prelu(x, w),
        xs(([[-1.0, 0.0, 1.0], [0.0, -0.0, -0.25]], True), ([0.25, -0.5, 2.0], True)),
    ),
    "elu": (lambda x: F.elu(x), x1(around(0) + [-1000.0, 1000.0, nan])),
    "elu_alpha": (lambda x: F.elu(x, 0.5), x1(around(0) + [-1000.0, 1000.0, nan])),
    "celu": (lambda x: F.celu(x, 2.0), x1(around(0) + [-1000.0, 1000.0, nan])),
    "celu_small": (lambda x: F.celu(x, 0.5), x1(around(0) + [-1000.0, 1000.0, nan])),
    "selu": (lambda x: F.selu(x), x1(around(0) + [-1000.0, 1000.0, nan])),
    "gelu": (lambda x: F.gelu(x), x1(around(0) + [nan])),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), x1(around(0) + [nan])),
    "silu": (lambda x: F.silu(x), x1(around(0) + [nan])),
    "mish": (lambda x: F.mish(x), x1(around(0, 20) + [-1000.0, 1000.0, nan])),
    "softplus": (lambda x: F.softplus(x), x1(around(0, 20) + [-1000.0, 1000.0, nan])),
    "softplus_beta": (lambda x: F.softplus(x, 2.0, 1.0), x1(around(0.5) + [-400.0, 400.0, nan])),
    "hardtanh": (lambda x: F.hardtanh(x), x1(around(-1, 1) + [nan])),
    "hardtanh_shifted": (lambda x: F.hardtanh(x, -0.5, 2.0), x1(around(-0.5, 2) + [nan])),
    "hardtanh_point": (lambda x: F.hardtanh(x, 0.5, 0.5), x1(around(0.5) + [nan])),
    "hardsigmoid": (lambda x: F.hardsigmoid(x), x1(around(-3, 0, 3) + [nan])),
    "hardswish": (lambda x: F.hardswish(x), x1(around(-3, 0, 3) + [nan])),
    "softshrink": (lambda x: F.softshrink(x), x1(around(-0.5, 0.5) + [0.0, nan])),
    "softshrink_zero": (lambda x: F.softshrink(x, 0.0), x1(around(0) + [-0.0, nan])),
    "hardshrink": (lambda x: F.hardshrink(x), x1(around(-0.5, 0.5) + [0.0, nan])),
    "threshold": (lambda x: F.threshold(x, 1.0, 5.0), x1(around(1) + [nan])),
    "logsigmoid": (lambda x: F.logsigmoid(x), x1(around(0) + [-1000.0, 1000.0, nan])),
    "softsign": (lambda x: F.softsign(x), x1(around(0) + [-0.0, nan])),
    # elementwise
    "abs": (lambda x: x.abs(), x1(around(0) + [-0.0, nan])),
    "sign": (lambda x: x.sign(), x1(around(0) + [-0.0, nan])),
    "clamp": (lambda x: x.clamp(-1, 2), x1(around(-1, 2) + [nan])),
    "clamp_min": (lambda x: x.clamp(min=0.5), x1(around(0.5) + [nan])),
    "clamp_max": (lambda x: x.clamp(max=1), x1(around(1) + [nan])),
    "clamp_point": (lambda x: x.clamp(0.5, 0.5), x1(around(0.5) + [nan])),
    "clamp_inverted": (lambda x: x.clamp(2, 1), x1(around(1, 2) + [nan])),
    "floor": (lambda x: x.floor(), x1([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, nan])),
    "ceil": (lambda x: x.ceil(), x1([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, nan])),
    "round": (lambda x: x.round(), x1([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, nan])),
    "trunc": (lambda x: x.trunc(), x1([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, nan])),
    "frac": (lambda x: x.frac(), x1([-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, nan])),
    "sqrt": (lambda x: x.sqrt(), x1([0.0, -0.0, 0.25, 4.0])),
    "logit": (lambda x: x.logit(), x1([0.0, 0.25, 0.5, 1.0])),
    "logit_eps": (lambda x: x.logit(0.25), x1(around(0.25, 0.75) + [0.0, 1.0])),
    "pow_0": (lambda x: x.pow(0), x1([-1.0, 0.0, -0.0, 2.0])),
    "pow_half": (lambda x: x.pow(0.5), x1([0.0, 0.25, 4.0])),
    "pow_1": (lambda x: x.pow(1), x1([-1.0, 0.0, 2.0])),
    "pow_2": (lambda x: x.pow(2), x1([-1.0, 0.0, 2.0])),
    "pow_3": (lambda x: x.pow(3), x1([-1.0, 0.0, 2.0])),
    "pow_1_5": (lambda x: x.pow(1.5), x1([0.0, 0.25, 4.0])),
    "pow_neg1": (lambda x: x.pow(-1), x1([-1.0, 0.0, 2.0])),
    "pow_tensor": (
        lambda a, b: a.pow(b),
        xs(([0.0, 0.0, 0.0, 0.0, 0.0, 2.0, -1.0, 1.0], True),
           ([0.0, 0.5, 1.0, 2.0, 3.0, 0.0, 2.0, 0.0], True)),
    ),
    "fmod": (
        lambda a, b: torch.fmod(a, b),
        xs(([4.0, -4.0, 3.0, -3.0, 0.0, 5.5, 1.0], True),
           ([2.0, 2.0, -2.0, 2.0, 2.0, 0.5, 2.0], True)),
    ),
    "fmod_scalar": (lambda a: torch.fmod(a, 2.0), x1([-4.0, -3.0, -2.0, 0.0, 1.0, 2.0, 4.0])),
    "remainder": (
        lambda a, b: torch.remainder(a, b),
        xs(([4.0, -4.0, 3.0, -3.0, 0.0, 5.5, 1.0], True),
           ([2.0, 2.0, -2.0, 2.0, 2.0, 0.5, 2.0], True)),
    ),
    "remainder_scalar": (
        lambda a: torch.remainder(a, 2.0),
        x1([-4.0, -3.0, -2.0, 0.0, 1.0, 2.0, 4.0]),
    ),
    "maximum": (
        lambda a, b: torch.maximum(a, b),
        TIED_PAIRS,
    ),
    "minimum": (
        lambda a, b: torch.minimum(a, b),
        TIED_PAIRS,
    ),
    "fmax": (
        lambda a, b: torch.fmax(a, b),
        TIED_PAIRS,
    ),
    "fmin": (
        lambda a, b: torch.fmin(a, b),
        TIED_PAIRS,
    ),
    "where": (
        lambda c, a, b: torch.where(c, a, b),
        xs(([True, False, True, False], False, torch.bool), ([1.0, 2.0, 0.0, 0.0], True),
           ([1.0, 2.0, 0.0, nan], True)),
    ),
    "where_kink": (lambda x: torch.where(x > 0, x, x * -2.0), x1(around(0) + [nan])),
    "masked_fill": (lambda x: x.masked_fill(x >= 1, 5.0), x1(around(1) + [nan])),
}
CASES = dict(ELEMENTWISE)

# reductions with ties
TIES = [[3.0, 1.0, 3.0, -1.0], [-1.0, 3.0, 2.0, -1.0], [0.5, 0.5, 0.5, 0.5]]
CASES.update({
    "max": (lambda x: x.max(), x1(TIES)),
    "max_nan": (lambda x: x.max(), x1([[1.0, nan, 3.0], [nan, 3.0, 0.0]])),
    "amax_nan": (lambda x: x.amax(1), x1([[1.0, nan, nan], [2.0, 2.0, 0.0]])),
    "min": (lambda x: x.min(), x1(TIES)),
    "amax": (lambda x: x.amax(), x1(TIES)),
    "amin": (lambda x: x.amin(), x1(TIES)),
    "amax0": (lambda x: x.amax(0), x1(TIES)),
    "amax1": (lambda x: x.amax(1), x1(TIES)),
    "amin1_keepdim": (lambda x: x.amin(1, True), x1(TIES)),
    "amax01": (lambda x: x.amax((0, 1)), x1(TIES)),
    "max_dim1": (lambda x: x.max(1), x1(TIES)),
    "max_dim0": (lambda x: x.max(0), x1(TIES)),
    "min_dim1": (lambda x: x.min(1), x1(TIES)),
    "min_dim0_keepdim": (lambda x: x.min(0, True), x1(TIES)),
    "median": (lambda x: x.median(), x1(TIES)),
    "median_even": (lambda x: x.median(), x1([1.0, 2.0, 2.0, 3.0])),
    "median_dim1": (lambda x: x.median(1), x1(TIES)),
    "median_dim0": (lambda x: x.median(0), x1(TIES)),
    "nanmedian": (lambda x: x.nanmedian(), x1([2.0, nan, 1.0, 2.0, 2.0, nan])),
    "nanmedian_dim1": (lambda x: x.nanmedian(1), x1([[2.0, nan, 1.0, 2.0], [nan, 3.0, 3.0, nan]])),
    "kthvalue": (lambda x: x.kthvalue(2, 1), x1(TIES)),
    "kthvalue0": (lambda x: x.kthvalue(2, 0), x1(TIES)),
    "mode": (lambda x: x.mode(1), x1(TIES)),
    "mode0": (lambda x: x.mode(0), x1(TIES)),
    "sort": (lambda x: x.sort(1), x1(TIES)),
    "sort_desc": (lambda x: x.sort(1, True), x1(TIES)),
    "sort0": (lambda x: x.sort(0), x1(TIES)),
    "msort": (lambda x: x.msort(), x1(TIES)),
    "topk": (lambda x: x.topk(2, 1), x1(TIES)),
    "topk_smallest": (lambda x: x.topk(2, 1, largest=False), x1(TIES)),
    "topk0": (lambda x: x.topk(1, 0), x1(TIES)),
    "quantile": (lambda x: x.quantile(0.5, 1), x1(TIES)),
    "quantile_all": (lambda x: x.quantile(0.25), x1(TIES)),
    "cummax": (lambda x: x.cummax(1), x1(TIES)),
    "cummin": (lambda x: x.cummin(1), x1(TIES)),
    "cummax0": (lambda x: x.cummax(0), x1(TIES)),
    "logsumexp_ties": (lambda x: x.logsumexp(1), x1(TIES)),
    "logsumexp_neginf": (lambda x: x.logsumexp(1), x1([[-inf, 0.0, -inf], [-inf, -inf, 1.0]])),
    "logsumexp_all_neginf": (lambda x: x.logsumexp(1), x1([[-inf, -inf, -inf], [0.0, 1.0, 2.0]])),
    "std_constant": (lambda x: x.std(1), x1([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])),
    "std_all_constant": (lambda x: x.std(), x1([0.5, 0.5, 0.5, 0.5])),
    "std_inf": (lambda x: x.std(1), x1([[1.0, inf, 2.0], [1.0, 2.0, 4.0]])),
    "var_constant": (lambda x: x.var(1), x1([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])),
})

# norms: rows with all zeros, ties in |x| (opposite signs), and a zero among others
NORM_ROWS = [[0.0, 0.0, 0.0], [3.0, -3.0, 1.0], [2.0, -2.0, 3.0], [0.0, 1.0, -1.0]]
for name, p in [("2", 2), ("1", 1), ("inf", inf), ("neginf", -inf), ("half", 0.5), ("0", 0),
                ("3", 3), ("neg1", -1)]:
    CASES["vector_norm_" + name] = (
        lambda x, p=p: torch.linalg.vector_norm(x, p, 1), x1(NORM_ROWS))
for name, p in [("2", 2), ("1", 1), ("inf", inf), ("half", 0.5), ("3", 3)]:
    CASES["norm_" + name] = (lambda x, p=p: x.norm(p, 1), x1(NORM_ROWS))
CASES.update({
    "norm_zero": (lambda x: x.norm(), x1([0.0, 0.0, -0.0])),
    "norm_inf_zero": (lambda x: x.norm(inf), x1([0.0, 0.0, -0.0])),
    "vector_norm_all": (lambda x: torch.linalg.vector_norm(x, inf), x1(NORM_ROWS)),
    "matrix_norm_1": (lambda x: torch.linalg.matrix_norm(x, 1), x1([[1.0, -2.0], [-1.0, 0.0]])),
    "matrix_norm_inf": (lambda x: torch.linalg.matrix_norm(x, inf), x1([[1.0, -2.0], [-3.0, 0.0]])),
    "matrix_norm_fro_zero": (lambda x: torch.linalg.matrix_norm(x), x1([[0.0, 0.0], [0.0, 0.0]])),
    "dist_zero": (lambda a, b: a.dist(b), xs(([1.0, 2.0, 3.0], True), ([1.0, 2.0, 3.0], True))),
    "dist_1": (lambda a, b: a.dist(b, 1),
               xs(([1.0, 2.0, 3.0, 4.0], True), ([1.0, 0.0, 5.0, 4.0], True))),
    "dist_inf": (lambda a, b: a.dist(b, inf),
                 xs(([1.0, 2.0, 3.0, 4.0], True), ([1.0, 0.0, 5.0, 4.0], True))),
    "dist_half": (lambda a, b: a.dist(b, 0.5),
                  xs(([1.0, 2.0, 3.0, 4.0], True), ([1.0, 0.0, 5.0, 4.0], True))),
    "cdist": (lambda a, b: torch.cdist(a, b),
              xs(([[0.0, 0.0], [1.0, 1.0]], True), ([[0.0, 0.0], [1.0, 2.0], [1.0, 1.0]], True))),
    "cdist_1": (lambda a, b: torch.cdist(a, b, 1),
                xs(([[0.0, 0.0], [1.0, 1.0]], True), ([[0.0, 0.0], [1.0, 2.0], [1.0, 1.0]], True))),
    "cdist_inf": (lambda a, b: torch.cdist(a, b, inf),
                  xs(([[0.0, 0.0], [1.0, 1.0]], True),
                     ([[0.0, 0.0], [2.0, 2.0], [1.0, 1.0]], True))),
    "normalize": (lambda x: F.normalize(x), x1([[0.0, 0.0], [3.0, -4.0], [1e-13, 0.0]])),
    "normalize_1": (lambda x: F.normalize(x, 1.0), x1([[0.0, 0.0], [3.0, -4.0], [1e-13, 0.0]])),
    "cosine_similarity": (
        lambda a, b: F.cosine_similarity(a, b),
        xs(([[0.0, 0.0], [1.0, 0.0], [2.0, 2.0]], True),
           ([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0]], True)),
    ),
    "pairwise_distance": (
        lambda a, b: F.pairwise_distance(a, b, eps=0.0),
        xs(([[0.0, 0.0], [1.0, 1.0]], True), ([[0.0, 0.0], [1.0, 2.0]], True)),
    ),
    "renorm": (lambda x: x.renorm(2, 0, 5.0), x1([[3.0, 4.0], [6.0, 8.0], [0.0, 0.0]])),
})

# pooling: windows holding ties, padding, overlapping windows
CASES.update({
    "max_pool1d": (lambda x: F.max_pool1d(x, 2, 1), x1([[[1.0, 3.0, 3.0, 2.0, 2.0, 0.0]]])),
    "max_pool1d_pad": (lambda x: F.max_pool1d(x, 3, 2, 1), x1([[[-1.0, -1.0, 2.0, 2.0, -3.0]]])),
    "max_pool1d_dilation": (lambda x: F.max_pool1d(x, 2, 1, 0, 2),
                            x1([[[1.0, 0.0, 1.0, 0.0, 1.0]]])),
    "max_pool1d_ceil": (lambda x: F.max_pool1d(x, 2, 2, ceil_mode=True),
                        x1([[[4.0, 4.0, 1.0, 1.0, 5.0]]])),
    "max_pool1d_nan": (lambda x: F.max_pool1d(x, 2, 1), x1([[[1.0, nan, 2.0, 2.0, nan]]])),
    "max_pool2d": (
        lambda x: F.max_pool2d(x, 2),
        x1([[[[1.0, 1.0, 2.0, 0.0], [1.0, 1.0, 0.0, 2.0],
               [3.0, 0.0, 5.0, 5.0], [0.0, 3.0, 5.0, 5.0]]]]),
    ),
    "max_pool2d_overlap": (
        lambda x: F.max_pool2d(x, 3, 1, 1),
        x1([[[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]]]),
    ),
    "max_pool2d_stride": (
        lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1)),
        x1([[[[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]]]),
    ),
})

# losses at zero difference, at beta/delta and at their margins; logits at 0
INPUT = [0.0, 1.0, -1.0, 0.5, 1.25, -3.0, 2.0]
TARGET = [0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 0.0]
LOGITS = [[0.0, 0.0, 0.0, 0.0], [-1.0, 1.0, 0.0, 2.0]]
LABELS = [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.5, 1.0]]
CASES.update({
    "l1_loss": (lambda a, b: F.l1_loss(a, b), xs((INPUT, True), (TARGET, True))),
    "mse_loss": (lambda a, b: F.mse_loss(a, b), xs((INPUT, True), (TARGET, True))),
    "smooth_l1_loss": (lambda a, b: F.smooth_l1_loss(a, b), xs((INPUT, True), (TARGET, True))),
    "smooth_l1_loss_beta": (lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="sum"),
                            xs((INPUT, True), (TARGET, True))),
    "smooth_l1_loss_beta0": (lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, reduction="none"),
                             xs((INPUT, True), (TARGET, True))),
    "huber_loss": (lambda a, b: F.huber_loss(a, b), xs((INPUT, True), (TARGET, True))),
    "huber_loss_delta": (lambda a, b: F.huber_loss(a, b, delta=0.5, reduction="none"),
                         xs((INPUT, True), (TARGET, True))),
    "bce_logits_zero": (lambda x, y: F.binary_cross_entropy_with_logits(x, y),
                        xs(([0.0, 0.0, 0.0, 0.0], True), ([0.0, 1.0, 0.0, 1.0], True))),
    "bce_logits": (lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="sum"),
                   xs((LOGITS, True), (LABELS, True))),
    "bce_logits_pos_weight": (
        lambda x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
        xs((LOGITS, True), (LABELS, True), ([1.0, 2.0, 0.5, 3.0], False)),
    ),
    "bce_logits_weight": (
        lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=pw,
                                                               reduction="none"),
        xs((LOGITS, True), (LABELS, True), ([1.0, 0.5, 2.0, 1.0], False),
           ([3.0, 1.0, 2.0, 0.5], False)),
    ),
    "bce_logits_large": (
        lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
        xs(([-1000.0, 1000.0, -1000.0, 1000.0, 40.0], True), ([0.0, 1.0, 1.0, 0.0, 0.5], True)),
    ),
    "bce": (lambda x, y: F.binary_cross_entropy(x, y),
            xs(([0.5, 0.5, 0.25, 0.75], True), ([0.0, 1.0, 0.5, 1.0], True))),
    "bce_weight": (lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction="sum"),
                   xs(([0.5, 0.5, 0.25], True), ([0.0, 1.0, 1.0], True), ([2.0, 0.5, 1.0], False))),
    "bce_bounds": (lambda x, y: F.binary_cross_entropy(x, y, reduction="none"),
                   xs(([0.0, 1.0, 0.0, 1.0, 0.0, 1e-13, 0.5], True),
                      ([0.0, 1.0, 1.0, 0.0, 0.5, 1.0, 0.25], False))),
    "bce_bounds_target": (lambda x, y: F.binary_cross_entropy(x, y, reduction="none"),
                          xs(([0.0, 1.0, 1e-50, 0.5], True), ([0.0, 1.0, 1.0, 0.25], True))),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="sum"),
               xs(([-1.0, -2.0, -0.5, -1.0], True), ([0.0, 0.5, 0.25, 0.25], True))),
    "kl_div_log_target": (lambda x, y: F.kl_div(x, y, reduction="sum", log_target=True),
                          xs(([-1.0, -2.0, -0.5, -1.0], True), ([-30.0, -0.5, 0.0, -1.0], True))),
    "margin_ranking_loss": (
        lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.5, reduction="none"),
        xs(([1.5, 1.0, 0.5, 2.0], True), ([1.0, 1.0, 1.0, 1.0], True),
           ([1.0, 1.0, -1.0, -1.0], False)),
    ),
    "margin_ranking_loss_zero": (
        lambda a, b, y: F.margin_ranking_loss(a, b, y),
        xs(([1.0, 2.0, 0.0], True), ([1.0, 1.0, 0.0], True), ([1.0, -1.0, -1.0], False)),
    ),
    "hinge_embedding_loss": (
        lambda x, y: F.hinge_embedding_loss(x, y, reduction="none"),
        xs(([1.0, 0.5, 1.5, 0.0, 1.0, 1.0], True), ([-1.0, -1.0, -1.0, 1.0, 1.0, -1.0], False)),
    ),
    "soft_margin_loss": (
        lambda x, y: F.soft_margin_loss(x, y, reduction="none"),
        xs(([0.0, 1.0, -1.0, 0.0, 40.0], True), ([1.0, -1.0, 1.0, -1.0, -1.0], False)),
    ),
    "triplet_margin_loss": (
        lambda a, p, n: F.triplet_margin_loss(a, p, n, eps=0.0, reduction="none"),
        xs(([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]], True),
           ([[3.0, 4.0], [1.0, 1.0], [0.0, 1.0]], True),
           ([[0.0, 6.0], [1.0, 3.0], [0.0, 1.0]], True)),
    ),
    "triplet_margin_loss_swap": (
        lambda a, p, n: F.triplet_margin_loss(a, p, n, swap=True, eps=0.0, reduction="none"),
        xs(([[0.0, 0.0], [0.0, 0.0]], True), ([[0.0, 2.0], [0.0, 0.5]], True),
           ([[0.0, 1.0], [0.0, 3.0]], True)),
    ),
    "triplet_margin_loss_p1": (
        lambda a, p, n: F.triplet_margin_loss(a, p, n, p=1, eps=0.0, reduction="none"),
        xs(([[0.0, 0.0], [1.0, 1.0]], True), ([[1.0, 2.0], [1.0, 1.0]], True),
           ([[2.0, 2.0], [1.0, 2.0]], True)),
    ),
    "cosine_embedding_loss": (
        lambda a, b, y: F.cosine_embedding_loss(a, b, y, reduction="none"),
        xs(([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]], True),
           ([[0.0, 1.0], [1.0, 1.0], [2.0, 2.0], [1.0, 1.0]], True),
           ([-1.0, 1.0, 1.0, -1.0], False)),
    ),
    "cosine_embedding_loss_margin": (
        lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.6, reduction="none"),
        xs(([[3.0, 4.0], [1.0, 0.0]], True), ([[1.0, 0.0], [1.0, 0.0]], True),
           ([-1.0, -1.0], False)),
    ),
    "poisson_nll_loss": (
        lambda x, y: F.poisson_nll_loss(x, y, reduction="none"),
        xs(([0.0, 1.0, -1.0, 0.0], True), ([0.0, 1.0, 2.0, 0.5], True)),
    ),
    "poisson_nll_loss_full": (
        lambda x, y: F.poisson_nll_loss(x, y, full=True, reduction="none"),
        xs(([0.0, 1.0, -1.0, 0.0, 0.5], True), ([0.0, 1.0, 2.0, 0.5, 0.75], True)),
    ),
    "gaussian_nll_loss": (
        lambda x, y, v: F.gaussian_nll_loss(x, y, v, reduction="none"),
        xs(([0.0, 1.0, 2.0, 0.5], True), ([0.0, 0.0, 1.0, 1.0], True),
           ([1e-7, 1e-6, 2e-6, 1.0], True)),
    ),
    "poisson_nll_loss_prob": (
        lambda x, y: F.poisson_nll_loss(x, y, log_input=False, reduction="none"),
        xs(([0.0, 1.0, 2.0, 0.5], True), ([0.0, 1.0, 2.0, 0.5], True)),
    ),
})


def fmt(v):
    return repr(float(v))


def tensor_text(x):
    values = ",".join(fmt(v) for v in x.detach().reshape(-1).tolist())
    return f"{str(x.dtype).replace('torch.', '')}:{','.join(str(s) for s in x.shape)}:{values}"


def weights_like(y):
    w = torch.tensor([1.0 + 0.5 * (i % 3) for i in range(y.numel())], dtype=torch.float64)
    return w.reshape(y.shape).to(y.dtype)


def first(out):
    return out[0] if isinstance(out, tuple) else out


def gradients(fn, inputs, weights=weights_like):
    """Output(s) and the gradients of sum(output0 * w) with respect to the differentiable inputs."""
    args = [x.clone().requires_grad_(d) for x, d in inputs]
    out = fn(*args)
    outs = list(out) if isinstance(out, tuple) else [out]
    diff = [a for a, (_, d) in zip(args, inputs) if d]
    assert outs[0].requires_grad
    grads = torch.autograd.grad((outs[0] * weights(outs[0])).sum(), diff, allow_unused=True)
    return outs, [g if g is not None else torch.zeros_like(a) for g, a in zip(grads, diff)]


def same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


def scalar_loop(name, fn, inputs, outs, grads):
    """Runs an elementwise case element by element (PyTorch's scalar loop) and keeps each
    element's own gradient where the whole tensor's run (its vectorized loop) gives another."""
    n = outs[0].numel()
    if outs[0].dim() != 1:
        return
    sliced = [x.numel() == n for x, _ in inputs]
    for i in range(n):
        alone = [(x[i:i + 1] if s else x, d) for (x, d), s in zip(inputs, sliced)]
        w = 1.0 + 0.5 * (i % 3)
        o, g = gradients(fn, alone, lambda y: torch.full_like(y, w))
        if not same(o[0].item(), outs[0][i].item()):
            print(f"{name}: element {i}: value {outs[0][i].item()}, alone {o[0].item()}",
                  file=sys.stderr)
        k = 0
        for (x, d), s in zip(inputs, sliced):
            if not d:
                continue
            if s and not same(grads[k][i].item(), g[k].item()):
                print(f"{name}: element {i}: gradient {k} {grads[k][i].item()}, alone "
                      f"{g[k].item()}", file=sys.stderr)
                grads[k][i] = g[k]
            k += 1


def run(name, fn, inputs):
    outs, grads = gradients(fn, inputs)
    if name in ELEMENTWISE:
        scalar_loop(name, fn, inputs, outs, grads)
    ins = ";".join(f"{tensor_text(x)}:{int(d)}" for x, d in inputs)
    return "|".join([name, ins, ";".join(tensor_text(o) for o in outs),
                     ";".join(",".join(fmt(v) for v in g.reshape(-1).tolist()) for g in grads)])


if __name__ == "__main__":
    for name, (fn, inputs) in CASES.items():
        print(run(name, fn, inputs))
