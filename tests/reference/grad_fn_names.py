#!/usr/bin/env python3
# The grad_fn names PyTorch 1.13 gives the ops of tests/GradFnNamesTest.cpp's table, computed once
# and kept in grad_fn_names.txt beside this script, so the test suite needs no PyTorch:
#
#   /usr/bin/python3 tests/reference/grad_fn_names.py > tests/reference/grad_fn_names.txt
#
# One line per case: "name|GradFnName". The case names and what they compute must match the
# table in GradFnNamesTest.cpp, which checks that both list the same cases.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
m = torch.randn(3, 4, requires_grad=True)
b = torch.randn(4, requires_grad=True)
img = torch.randn(1, 2, 4, 4, requires_grad=True)
w = torch.randn(3, 2, 3, 3, requires_grad=True)
v = torch.randn(3, requires_grad=True)
b3 = torch.randn(2, 3, 4, requires_grad=True)
t = torch.tensor([0, 2])
cases = {
 "add": lambda: x + x, "add_scalar": lambda: x + 1, "sub": lambda: x - x, "rsub_scalar": lambda: 1 - x,
 "mul": lambda: x * x, "div": lambda: x / 2, "neg": lambda: -x, "pow_scalar": lambda: x.pow(2), "pow_tensor": lambda: x.pow(x),
 "exp": lambda: x.exp(), "log": lambda: x.abs().log(), "sqrt": lambda: x.abs().sqrt(), "abs": lambda: x.abs(),
 "relu": lambda: x.relu(), "sigmoid": lambda: x.sigmoid(), "tanh": lambda: x.tanh(),
 "sum": lambda: x.sum(), "sum_dim": lambda: x.sum(1), "mean": lambda: x.mean(), "mean_dim": lambda: x.mean(1),
 "var": lambda: x.var(), "std": lambda: x.std(), "amax": lambda: x.amax(1), "max": lambda: x.max(), "max_dim": lambda: x.max(1)[0],
 "prod": lambda: x.prod(), "cumsum": lambda: x.cumsum(1), "logsumexp": lambda: x.logsumexp(1),
 "softmax": lambda: x.softmax(1), "log_softmax": lambda: x.log_softmax(1),
 "matmul_2d": lambda: x.matmul(m), "mm": lambda: x.mm(m), "matmul_1d": lambda: v.matmul(v), "matmul_3d": lambda: b3.matmul(torch.randn(4, 2)),
 "bmm": lambda: b3.bmm(b3.transpose(1, 2)),
 "linear": lambda: F.linear(x, m.t(), b), "linear_nobias": lambda: F.linear(x, m.t()),
 "view": lambda: x.view(6), "reshape": lambda: x.reshape(6), "transpose": lambda: x.transpose(0, 1), "t": lambda: x.t(),
 "permute": lambda: x.permute(1, 0), "unsqueeze": lambda: x.unsqueeze(0), "squeeze": lambda: x.unsqueeze(0).squeeze(), "squeeze_dim": lambda: x.unsqueeze(0).squeeze(0),
 "flatten": lambda: x.flatten(), "select": lambda: x.select(0, 1), "index_int": lambda: x[1], "narrow": lambda: x.narrow(1, 0, 2),
 "slice": lambda: x[:, 1:], "expand": lambda: v.expand(2, 3), "cat": lambda: torch.cat([x, x]), "stack": lambda: torch.stack([x, x]),
 "clone": lambda: x.clone(), "to_double": lambda: x.to(torch.float64), "contiguous_t": lambda: x.t().contiguous(),
 "clamp": lambda: x.clamp(-1, 1), "clamp_min": lambda: x.clamp(min=0), "where": lambda: torch.where(x > 0, x, x * 2),
 "gather": lambda: x.gather(1, t.view(1, 2).expand(2, 2)), "index_select": lambda: x.index_select(1, t), "index_tensor": lambda: x[torch.tensor([1, 0])],
 "masked_fill": lambda: x.masked_fill(x > 0, 0.0),
 "mse_loss": lambda: F.mse_loss(x, x.detach() * 2), "l1_loss": lambda: F.l1_loss(x, x.detach() * 2),
 "cross_entropy": lambda: F.cross_entropy(x, t), "nll_loss": lambda: F.nll_loss(x.log_softmax(1), t),
 "bce": lambda: F.binary_cross_entropy(x.sigmoid(), torch.ones(2, 3)), "bce_logits": lambda: F.binary_cross_entropy_with_logits(x, torch.ones(2, 3)),
 "smooth_l1": lambda: F.smooth_l1_loss(x, x.detach() * 2),
 "gelu": lambda: F.gelu(x), "silu": lambda: F.silu(x), "leaky_relu": lambda: F.leaky_relu(x), "elu": lambda: F.elu(x),
 "softplus": lambda: F.softplus(x), "hardtanh": lambda: F.hardtanh(x), "relu6": lambda: F.relu6(x), "logsigmoid": lambda: F.logsigmoid(x),
 "layer_norm": lambda: F.layer_norm(x, (3,)), "batch_norm": lambda: F.batch_norm(x, None, None, training=True),
 "conv2d": lambda: F.conv2d(img, w[:, :, :, :]), "max_pool2d": lambda: F.max_pool2d(img, 2), "avg_pool2d": lambda: F.avg_pool2d(img, 2),
 "adaptive_avg_pool2d": lambda: F.adaptive_avg_pool2d(img, 1), "dropout": lambda: F.dropout(x, 0.5, True),
 "embedding": lambda: F.embedding(t, m), "norm": lambda: x.norm(), "dist": lambda: x.dist(x * 2),
 "cosine_similarity": lambda: F.cosine_similarity(x, x * 2), "normalize": lambda: F.normalize(x),
 "mish": lambda: F.mish(x), "hardswish": lambda: F.hardswish(x), "hardsigmoid": lambda: F.hardsigmoid(x),
 "selu": lambda: F.selu(x), "celu": lambda: F.celu(x), "softsign": lambda: F.softsign(x),
 "tanhshrink": lambda: F.tanhshrink(x), "softshrink": lambda: F.softshrink(x), "hardshrink": lambda: F.hardshrink(x),
 "glu": lambda: F.glu(m), "threshold": lambda: F.threshold(x, 0.1, 2.0), "huber": lambda: F.huber_loss(x, x.detach() * 2),
 "group_norm": lambda: F.group_norm(img, 2), "conv1d": lambda: F.conv1d(img[:, :, 0], w[:, :, 0]),
 "pixel_shuffle": lambda: F.pixel_shuffle(img.reshape(1, 8, 2, 2), 2), "prelu": lambda: F.prelu(x, torch.tensor([0.25])),
}
for k, f in cases.items():
    y = f()
    print(f"{k}|{y.grad_fn.name() if y.grad_fn is not None else '-'}")
