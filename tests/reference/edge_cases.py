#!/usr/bin/env python3
# Reference results for tests/EdgeCaseTest.cpp: every op of the table below on 0-d, empty and
# NaN/Inf inputs, computed once with PyTorch (Debian's python3-torch 1.13, CPU, float64) and kept
# in edge_cases.txt beside this script, so the test suite itself needs no PyTorch.
#
#   /usr/bin/python3 tests/reference/edge_cases.py > tests/reference/edge_cases.txt
#
# One line per (op, input): "op|input|error" when PyTorch raises, else
# "op|input|ok|<output>;<output>...|<gradient>" with each output "dtype:shape:values" and the
# gradient of sum(output0 * w) with respect to the input (w = 1, 1.5, 2, 1, ... in row-major
# order), "-" when output 0 is not differentiable. The op names and their meaning must match the
# table in EdgeCaseTest.cpp, which checks that both list the same ops.
import math

import torch
import torch.nn.functional as F

nan, inf = float("nan"), float("inf")
specials = [nan, inf, -inf, 0.0, -0.0, 1.5, -2.0, 3.0]
INPUTS = {
    "scalar": lambda: torch.tensor(2.5, dtype=torch.float64),
    "scalar_nan": lambda: torch.tensor(nan, dtype=torch.float64),
    "specials": lambda: torch.tensor(specials, dtype=torch.float64),
    "specials2d": lambda: torch.tensor(specials, dtype=torch.float64).reshape(2, 4),
    "ties": lambda: torch.tensor([[3.0, 1.0, 3.0], [-1.0, -1.0, 2.0]], dtype=torch.float64),
    "empty": lambda: torch.zeros(0, dtype=torch.float64),
    "empty30": lambda: torch.zeros(3, 0, dtype=torch.float64),
    "empty03": lambda: torch.zeros(0, 3, dtype=torch.float64),
    # distinct values, none zero, in [-1.4375, 1.4375]: what shape ops of rank 3 need
    "cube": lambda: (torch.tensor([(i * 7) % 24 for i in range(24)], dtype=torch.float64) - 11.5)
    .div(8)
    .reshape(2, 3, 4),
}


def outer(f):
    """A binary op on every pair of the input's elements: x as a column against x as a row."""
    return lambda x: f(x.reshape(-1, 1), x.reshape(1, -1))


def all_dims(x):
    return list(range(x.dim()))


OPS = {
    # elementwise, one input
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp, "log": torch.log,
    "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "reciprocal": torch.reciprocal, "floor": torch.floor, "ceil": torch.ceil,
    "round": torch.round, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "logical_not": torch.logical_not,
    "clamp": lambda x: x.clamp(-1, 2), "clamp_min": lambda x: x.clamp(min=0.5),
    "clamp_max": lambda x: x.clamp(max=1), "square": lambda x: x.pow(2),
    "pow_half": lambda x: x.pow(0.5), "affine": lambda x: x * 2 + 1,
    "div_scalar": lambda x: x / 0.5, "rdiv_scalar": lambda x: 1 / x,
    "to_int64": lambda x: x.to(torch.int64), "to_int32": lambda x: x.to(torch.int32),
    "to_uint8": lambda x: x.to(torch.uint8), "to_bool": lambda x: x.to(torch.bool),
    "to_float32": lambda x: x.to(torch.float32),
    "masked_fill": lambda x: x.masked_fill(x > 0, 7.0),
    "where_sign": lambda x: torch.where(x > 0, x, -x),
    # elementwise, every pair of elements
    "add": outer(torch.add), "sub": outer(torch.sub), "mul": outer(torch.mul),
    "div": outer(torch.div), "pow": outer(torch.pow), "maximum": outer(torch.maximum),
    "minimum": outer(torch.minimum), "eq": outer(torch.eq), "ne": outer(torch.ne),
    "lt": outer(torch.lt), "le": outer(torch.le), "gt": outer(torch.gt), "ge": outer(torch.ge),
    "logical_and": outer(torch.logical_and), "logical_or": outer(torch.logical_or),
    "logical_xor": outer(torch.logical_xor),
    "where_max": outer(lambda a, b: torch.where(a > b, a, b)),
    # reductions and scans
    "sum": lambda x: x.sum(), "sum0": lambda x: x.sum(0), "sum_1k": lambda x: x.sum(-1, True),
    "mean": lambda x: x.mean(), "mean0": lambda x: x.mean(0), "prod": lambda x: x.prod(),
    "prod0": lambda x: x.prod(0), "amax": lambda x: x.amax(all_dims(x)),
    "amax0": lambda x: x.amax(0), "amin_1": lambda x: x.amin(-1),
    "max": lambda x: x.max(), "min": lambda x: x.min(),
    "max0": lambda x: x.max(0), "min_1k": lambda x: x.min(-1, True),
    "argmax": lambda x: x.argmax(), "argmax0": lambda x: x.argmax(0),
    "argmin_1": lambda x: x.argmin(-1),
    "var": lambda x: x.var(), "var0": lambda x: x.var(0), "std_1": lambda x: x.std(-1),
    "logsumexp0": lambda x: x.logsumexp(0), "logsumexp_1": lambda x: x.logsumexp(-1),
    "cumsum0": lambda x: x.cumsum(0), "cumsum_1": lambda x: x.cumsum(-1),
    "cumprod0": lambda x: x.cumprod(0), "cumprod_1": lambda x: x.cumprod(-1),
    # (PyTorch 1.13 counts NaNs in the first bin when given a range; weft counts no NaN)
    "histc": lambda x: torch.histc(x.nan_to_num(5.0), 4, -1, 2),
    "histc_own": lambda x: torch.histc(x.nan_to_num(5.0, 6.0, -6.0), 3),
    "cummax0": lambda x: x.cummax(0), "cummin_1": lambda x: x.cummin(-1),
    "logcumsumexp0": lambda x: x.logcumsumexp(0), "logcumsumexp_1": lambda x: x.logcumsumexp(-1),
    "sort0": lambda x: x.sort(0), "sort_desc": lambda x: x.sort(-1, True),
    "argsort0": lambda x: x.argsort(0), "topk1": lambda x: x.topk(1, 0),
    "softmax0": lambda x: x.softmax(0), "softmax_1": lambda x: x.softmax(-1),
    "log_softmax_1": lambda x: x.log_softmax(-1),
    # movement
    "flip0": lambda x: x.flip(0), "flip_all": lambda x: x.flip(all_dims(x)),
    "transpose": lambda x: x.transpose(0, -1), "t": lambda x: x.t(),
    "squeeze": lambda x: x.squeeze(), "squeeze0": lambda x: x.squeeze(0),
    "unsqueeze0": lambda x: x.unsqueeze(0), "flatten": lambda x: x.flatten(),
    "reshape": lambda x: x.reshape(-1), "view": lambda x: x.view(-1),
    "permute": lambda x: x.permute(list(reversed(all_dims(x)))),
    "expand": lambda x: x.expand(2, *x.shape),
    "slice_step": lambda x: x[1::2], "narrow": lambda x: x.narrow(0, 0, 1),
    "select": lambda x: x.select(0, -1), "chunk": lambda x: x.chunk(2, 0),
    "split": lambda x: x.split(1, 0), "cat": lambda x: torch.cat([x, x], 0),
    "stack": lambda x: torch.stack([x, x], 0), "pad": lambda x: F.pad(x, (1, 1)),
    # indexing and contractions
    "gather0": lambda x: x.gather(0, torch.zeros_like(x, dtype=torch.int64)),
    "scatter_add0": lambda x: x.scatter_add(0, torch.zeros_like(x, dtype=torch.int64), x),
    "index_select0": lambda x: x.index_select(0, torch.tensor([0])),
    "index_add0": lambda x: x.index_add(0, torch.tensor([0]), x.narrow(0, 0, 1)),
    "mask": lambda x: x[x > 0],
    "nonzero": lambda x: x.nonzero(),
    "matmul": lambda x: x @ x.t() if x.dim() == 2 else x @ x,
    "mm": lambda x: x.reshape(1, -1).mm(x.reshape(-1, 1)),
    "index_put": lambda x: x.clone().index_put_((torch.tensor([0]),), torch.tensor(5.0).double()),
    "clone": lambda x: x.clone(), "contiguous": lambda x: x.contiguous(),
    "detach": lambda x: x.detach(),
    "conv1d": lambda x: F.conv1d(x.reshape(1, 1, -1), torch.full((1, 1, 1), 0.5).double()),
    "max_pool1d": lambda x: F.max_pool1d(x.reshape(1, 1, -1), 1),
    "avg_pool1d": lambda x: F.avg_pool1d(x.reshape(1, 1, -1), 1),
    "embedding": lambda x: F.embedding(torch.tensor([0, 0]), x.reshape(-1, 1)),
    # composites: shapes
    "view_as": lambda x: x.view_as(x.reshape(-1)),
    "broadcast_to": lambda x: x.broadcast_to((2, *x.shape)),
    "swapaxes": lambda x: x.swapaxes(0, -1),
    "movedim": lambda x: x.movedim(0, -1),
    "movedim2": lambda x: x.movedim((0, 1), (-1, 0)),
    "unbind": lambda x: x.unbind(0),
    "unbind_1": lambda x: x.unbind(-1),
    "repeat": lambda x: x.repeat(*([2] * (x.dim() + 1))),
    "tile": lambda x: x.tile((2,)),
    "repeat_interleave": lambda x: x.repeat_interleave(2),
    "repeat_interleave0": lambda x: x.repeat_interleave(2, 0),
    "roll": lambda x: x.roll(3),
    "roll0": lambda x: x.roll(-1, 0),
    "roll2": lambda x: x.roll((1, 5), (0, -1)),
    "diagonal": lambda x: x.diagonal(),
    "diagonal_off": lambda x: x.diagonal(1, -1, 0),
    "diagonal_neg": lambda x: x.diagonal(-1),
    "diag": lambda x: x.diag(),
    "diag1": lambda x: x.diag(1),
    "diag_neg": lambda x: x.diag(-2),
    "trace": lambda x: x.trace(),
    "take_along_dim": lambda x: x.take_along_dim(x.argsort(-1), -1),
    "take_along_dim_flat": lambda x: x.take_along_dim(x.flatten().argsort()),
    "take_along_dim_bcast": lambda x: x.take_along_dim(torch.zeros([1] * x.dim(), dtype=torch.int64), 0),
    "masked_select": lambda x: x.masked_select(x > 0),
    "broadcast_tensors": lambda x: torch.broadcast_tensors(x.unsqueeze(0), torch.zeros([3] + [1] * x.dim(), dtype=torch.float64)),
    "meshgrid": lambda x: torch.meshgrid(x.flatten(), x.flatten()[:2], indexing="ij"),
    "meshgrid_xy": lambda x: torch.meshgrid(x.flatten(), x.flatten()[:3], indexing="xy"),
    # composites: products
    "outer_flat": lambda x: torch.outer(x.flatten(), x.flatten()),
    "dot": lambda x: torch.dot(x.flatten(), x.flatten()),
    "mv": lambda x: x.reshape(1, -1).mv(x.flatten()),
    "addmm": lambda x: x.reshape(-1, 1).addmm(x.reshape(-1, 1), x.reshape(1, -1), beta=0.5, alpha=2),
    "addmm_beta0": lambda x: x.reshape(-1, 1).addmm(x.reshape(-1, 1), x.reshape(1, -1), beta=0),
    "einsum_outer": lambda x: torch.einsum("i,j->ij", x.flatten(), x.flatten()),
    "einsum_mm": lambda x: torch.einsum("ij,kj->ik", x.reshape(1, -1), x.reshape(1, -1)),
    "einsum_batch": lambda x: torch.einsum("bij,bkj->bki", x, x),
    "einsum_implicit": lambda x: torch.einsum("bij,bkj", x, x),
    "einsum_ellipsis": lambda x: torch.einsum("...i,...i->...", x, x),
    "einsum_sum0": lambda x: torch.einsum("i...->...", x),
    "einsum_diag": lambda x: torch.einsum("ii->i", torch.outer(x.flatten(), x.flatten())),
    "einsum_three": lambda x: torch.einsum("i,j,k->", x.flatten(), x.flatten(), x.flatten()),
    "einsum_chain": lambda x: torch.einsum("ij,jk,kl->il", x.reshape(-1, 1), x.reshape(1, -1), x.reshape(-1, 1)),
    # composites: elementwise and reductions
    "atan2": outer(torch.atan2),
    "logaddexp": outer(torch.logaddexp),
    "isclose": outer(lambda a, b: torch.isclose(a, b, rtol=0.5, atol=0.1)),
    # (not broadcast: PyTorch 1.13's isclose with equal_nan fails to broadcast)
    "isclose_nan": lambda x: torch.isclose(x, x * 1.0000001, equal_nan=True),
    "allclose": lambda x: torch.tensor(torch.allclose(x, x + 1e-9)),
    "equal": lambda x: torch.tensor(torch.equal(x, x.clone())),
    "frac": lambda x: x.frac(),
    "type_as": lambda x: x.type_as(torch.zeros(1, dtype=torch.float32)),
    "new_full": lambda x: x.new_full((2, 3), 1.5),
    "nansum": lambda x: x.nansum(),
    "nansum0": lambda x: x.nansum(0),
    "count_nonzero": lambda x: x.count_nonzero(),
    "count_nonzero0": lambda x: x.count_nonzero(0),
    "median": lambda x: x.median(),
    "median0": lambda x: x.median(0),
    "median_1k": lambda x: x.median(-1, True),
    # composites: aliases
    "absolute": torch.absolute, "arccos": torch.arccos, "arcsinh": torch.arcsinh,
    "negative": torch.negative, "fix": torch.fix, "sgn": torch.sgn,
    "clip": lambda x: x.clip(-1, 2), "true_divide": outer(torch.true_divide),
    "deg2rad": torch.deg2rad, "rad2deg": torch.rad2deg,
    # composites: shapes
    "fliplr": torch.fliplr, "flipud": torch.flipud, "rot90": lambda x: x.rot90(),
    "rot90_2": lambda x: x.rot90(2, (0, -1)), "rot90_neg": lambda x: x.rot90(-1, (1, 0)),
    "ravel": torch.ravel, "tensor_split": lambda x: x.tensor_split(3),
    "tensor_split_idx": lambda x: x.tensor_split((1, 5), -1),
    "tensor_split_unordered": lambda x: x.tensor_split((1, 5, 2, -9, 8), -1),
    "hsplit": lambda x: x.hsplit(2), "vsplit_idx": lambda x: x.vsplit([1]),
    "diff": lambda x: x.diff(), "diff2": lambda x: x.diff(2, 0),
    "diff_prepend": lambda x: x.diff(dim=0, prepend=x.narrow(0, 0, 1)),
    "take": lambda x: x.take(torch.tensor([0, -1])),
    "diag_embed": lambda x: torch.diag_embed(x),
    "diag_embed_off": lambda x: torch.diag_embed(x, 1, 0, -1),
    # composites: products
    "inner": lambda x: torch.inner(x, x), "vdot": lambda x: torch.vdot(x.flatten(), x.flatten()),
    "kron": lambda x: torch.kron(x, torch.tensor([[1.0, -2.0]], dtype=torch.float64)),
    "cross": lambda x: torch.cross(x, x.flip(-1)),
    "addmv": lambda x: torch.ones(1, dtype=torch.float64).addmv(x.reshape(1, -1), x.flatten(), beta=0.5, alpha=2),
    "addr": lambda x: torch.ones(1, dtype=torch.float64).addr(x.flatten(), x.flatten(), beta=2),
    "baddbmm": lambda x: torch.ones(1, dtype=torch.float64).baddbmm(x.reshape(1, 1, -1), x.reshape(1, -1, 1), alpha=0.5),
    "matrix_power": lambda x: torch.outer(x.flatten(), x.flatten()).matrix_power(3),
    # composites: reductions
    "nanmean": lambda x: x.nanmean(), "nanmean0": lambda x: x.nanmean(0),
    "msort": torch.msort, "kthvalue": lambda x: x.kthvalue(2, 0),
    # composites: indexing and in-place forms (on a clone, so the gradient reaches x)
    "index_fill": lambda x: x.index_fill(0, torch.tensor([0, -1]), -1.5),
    "index_copy": lambda x: x.index_copy(0, torch.tensor([0]), x.narrow(0, 0, 1) * 2),
    "pow_": lambda x: x.clone().pow_(2), "clamp_min_": lambda x: x.clone().clamp_min_(0.5),
    "lerp_": lambda x: x.clone().lerp_(x * 2, 0.25),
    "addcmul_": lambda x: x.clone().addcmul_(x, x, value=0.5),
    "addcdiv_": lambda x: x.clone().addcdiv_(x, x * x + 1, value=-2),
    "index_add_": lambda x: x.clone().index_add_(0, torch.tensor([0]), x.narrow(0, 0, 1)),
    # composites: more elementwise
    "hypot": outer(torch.hypot), "fmax": outer(torch.fmax), "fmin": outer(torch.fmin),
    "erfc": torch.erfc, "greater": outer(torch.greater), "less_equal": outer(torch.less_equal),
    "not_equal": outer(torch.not_equal), "angle": torch.angle, "isposinf": torch.isposinf,
    "isneginf": torch.isneginf, "isreal": torch.isreal, "conj": torch.conj,
    "dist": lambda x: torch.dist(x, x.flip(0) if x.dim() else x * 2),
    "dist_inf": lambda x: torch.dist(x, torch.ones_like(x), float("inf")),
    "cov": torch.cov, "cov0": lambda x: torch.cov(x, correction=0), "corrcoef": torch.corrcoef,
    "prelu": lambda x: torch.prelu(x, torch.tensor([0.25], dtype=torch.float64)),
    "diagflat": torch.diagflat, "diagflat_off": lambda x: torch.diagflat(x, -1),
    "mH": lambda x: x.mH, "sum_to_size": lambda x: x.sum_to_size(*([1] * x.dim() or [1])),
    "slice_scatter": lambda x: torch.slice_scatter(x, x.narrow(0, 0, (x.shape[0] + 1) // 2) * 3, 0, 0, None, 2) if x.dim() else x,
    "select_scatter": lambda x: torch.select_scatter(x, x.select(0, -1) * 2, 0, 0),
    "diagonal_scatter": lambda x: torch.diagonal_scatter(x, x.diagonal() * -1),
    "float_power": lambda x: x.float_power(3), "logaddexp2": outer(torch.logaddexp2),
    "ldexp": outer(torch.ldexp), "sinc": torch.sinc, "logit": torch.logit,
    "logit_eps": lambda x: x.logit(0.25), "xlogy": outer(torch.xlogy),
    "signbit": torch.signbit, "copysign": outer(torch.copysign),
    "quantile": lambda x: x.quantile(0.3), "quantile0": lambda x: x.quantile(0.75, 0, True),
    "quantile_nearest": lambda x: x.quantile(0.5, -1, interpolation="nearest"),
    "quantile_midpoint": lambda x: x.quantile(0.4, 0, interpolation="midpoint"),
    # special functions (not digamma and polygamma: weft's derivatives of digamma come from the
    # Hurwitz zeta, exact to ~1e-16 where PyTorch's trigamma is ~3e-10 off, and infinite at the
    # poles where PyTorch gives 1.6e32; tests/MethodTest.cpp checks them to 1e-9)
    "lgamma": torch.lgamma, "erfinv": torch.erfinv, "xlog1py": outer(torch.special.xlog1py),
}

# Gradients where weft deliberately differs from PyTorch 1.13, each computed by the rule weft
# documents. They differ only on NaN/inf inputs or degenerate sizes; for finite inputs the rules
# agree with PyTorch's.


def nan_routed(reduce, dims):
    """torch.amax/amin's gradient is NaN everywhere when a slice's extremum is NaN (the mask
    x == max is empty and 0/0 spreads); weft routes it to the NaN elements, as torch.max() does."""

    def grad(x, w):
        d = dims(x)
        y = reduce(x, d, keepdim=True)
        mask = ((x == y) | (x.isnan() & y.isnan())).double()
        return w.reshape(y.shape) * mask / mask.sum(d, keepdim=True)

    return grad


def prod_rule(dims):
    """PyTorch differentiates prod over a dim through exclusive cumulative products, so NaN/inf
    elements spread into slices with zeros; weft uses PyTorch's full-reduction rule everywhere: a
    slice without zeros gives prod / x_i, with one zero the zero gets the product of the rest and
    the others 0, with more zeros all 0; a one-element slice passes the gradient on."""

    def grad(x, w):
        d = dims(x)
        y = x.prod() if d is None else x.prod(d, keepdim=True)
        kept = y.reshape([1] * x.dim()) if d is None else y
        wk = w.reshape(kept.shape)
        if x.numel() == kept.numel():
            return wk.expand(x.shape).clone()
        zero = x == 0
        count = zero.sum() if d is None else zero.sum(d, keepdim=True)
        nonzero = torch.where(zero, torch.ones_like(x), x)
        rest = nonzero.prod() if d is None else nonzero.prod(d, keepdim=True)
        at_zero = torch.where(count == 1, rest, torch.zeros_like(rest))
        others = torch.where(zero, at_zero.expand(x.shape),
                             torch.where((count == 0).expand(x.shape), kept / nonzero,
                                         torch.zeros_like(x)))
        return wk * others

    return grad


def var_composite(dims, root):
    """PyTorch's closed-form var gradient 2 (x - mean) / (n - 1) drops the mean's term, which is 0
    in exact arithmetic but NaN next to an infinity, and special-cases one element; weft
    differentiates var's definition, mean((x - mean(x))^2) * n / (n - 1), as written."""

    def grad(x, w):
        x = x.clone().requires_grad_()
        d = dims(x)
        n = x.numel() if d is None else x.shape[d] if x.dim() else 1
        dev = x - (x.mean() if d is None else x.mean(d, keepdim=True))
        v = (dev * dev).sum() if d is None else (dev * dev).sum(d)
        v = v / (n - 1)
        out = v.sqrt() if root else v
        (g,) = torch.autograd.grad((out * w.reshape(out.shape)).sum(), x)
        return g

    return grad


def nanmean_rule(dims):
    """PyTorch's nanmean, nansum / count, masks nansum's gradient by multiplying: a slice of NaNs
    only (count 0) gets inf * 0 = NaN there; weft's nansum selects 0 at each NaN, whatever the
    gradient, so a NaN element gets 0 and the others the gradient / count."""

    def grad(x, w):
        d = dims(x)
        count = (~x.isnan()).sum() if d is None else (~x.isnan()).sum(d, keepdim=True)
        return torch.where(x.isnan(), torch.zeros_like(x), w.reshape(count.shape) / count)

    return grad


def as_composed(f):
    """The gradient of weft's composite `f`, written here with PyTorch's ops (whose gradients the
    ops' own rows check)."""

    def grad(x, w):
        x = x.clone().requires_grad_()
        y = f(x)
        (g,) = torch.autograd.grad((y * w.reshape(y.shape)).sum(), x)
        return g

    return grad


def weft_logit(eps=None):
    """logit as log(z) - log1p(-z) (z clamped with eps): gradient 1/z + 1/(1 - z) wherever z is a
    number. PyTorch's is NaN outside [0, 1] (where the value is NaN anyway) and, with eps, at a
    NaN input (which clamp passes no gradient)."""

    def f(x):
        z = x if eps is None else x.clamp(eps, 1 - eps)
        return z.log() - (-z).log1p()

    return f


def weft_copysign(a, b):
    """copysign as |a| or -|a| by b's sign bit: gradient sign(a) or -sign(a). PyTorch's divides
    the result by a, NaN at an infinite a."""
    return torch.where(torch.signbit(b), -a.abs(), a.abs())


GRADIENT_RULES = {
    "logit": as_composed(weft_logit()),
    "logit_eps": as_composed(weft_logit(0.25)),
    "copysign": as_composed(outer(weft_copysign)),
    "nanmean": nanmean_rule(lambda x: None),
    "nanmean0": nanmean_rule(lambda x: 0 if x.dim() else None),
    "amax": nan_routed(torch.amax, lambda x: list(range(x.dim()))),
    "amax0": nan_routed(torch.amax, lambda x: 0),
    "amin_1": nan_routed(torch.amin, lambda x: -1),
    "prod": prod_rule(lambda x: None),
    "prod0": prod_rule(lambda x: 0 if x.dim() else None),
    "var": var_composite(lambda x: None, False),
    "var0": var_composite(lambda x: 0 if x.dim() else None, False),
    "std_1": var_composite(lambda x: -1 if x.dim() else None, True),
}


def weights(n):
    return torch.tensor([1.0 + 0.5 * (i % 3) for i in range(n)], dtype=torch.float64)


def fmt_values(t):
    if t.dtype == torch.bool or not t.is_floating_point():
        return ",".join(str(int(v)) for v in t.reshape(-1).tolist())
    return ",".join(repr(float(v)) for v in t.reshape(-1).tolist())


def fmt_tensor(t):
    dtype = str(t.dtype).replace("torch.", "")
    return "%s:%s:%s" % (dtype, ",".join(str(s) for s in t.shape), fmt_values(t))


def main():
    for op, f in OPS.items():
        for name, make in INPUTS.items():
            x = make().requires_grad_()
            try:
                out = f(x)
            except Exception:  # noqa: BLE001 - any error PyTorch raises
                print("%s|%s|error" % (op, name))
                continue
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            grad = "-"
            first = outs[0] if outs else None  # unbind along an empty dim gives no tensors
            if first is not None and first.requires_grad and first.is_floating_point():
                w = weights(first.numel()).reshape(first.shape)
                (g,) = torch.autograd.grad((first * w).sum(), x, allow_unused=True)
                if g is not None and g._is_zerotensor():  # sgn's: zeros without storage
                    g = torch.zeros_like(x)
                if op in GRADIENT_RULES:
                    g = GRADIENT_RULES[op](x.detach(), w)
                grad = fmt_values(g if g is not None else torch.zeros_like(x))
            print("%s|%s|ok|%s|%s" % (op, name, ";".join(fmt_tensor(o.detach()) for o in outs), grad))


if __name__ == "__main__":
    main()
