#!/usr/bin/env python3
# Reference values for tests/NnReferenceTest.cpp: every layer, activation, loss, optimizer and
# scheduler of weft::nn computed once with PyTorch (Debian's python3-torch 1.13, CPU, float64) and
# kept in nn_reference.safetensors beside this script, so the test suite itself needs no PyTorch.
#
#   /usr/bin/python3 tests/reference/nn_reference.py  # rewrites nn_reference.safetensors
#
# Keys are "<case>/<what>". A module or functional case records its inputs "in0", "in1", ...,
# "param/<name>" and "buffer/<name>" (loaded into weft's module with load_state_dict, so PyTorch's
# names), "const/<name>" (tensor options such as a loss's class weights), "out", a random
# cotangent "cot" shaped like the output, and after `(out * cot).sum().backward()` the gradients
# "grad/in<i>" (only for the inputs that require grad) and "grad/<parameter>", and every buffer
# after forward as "after/<name>". An optimizer case records "init/p<i>", the gradient of each of
# its steps "grads/p<i>" and the parameters after each step "params/p<i>" (both stacked over
# steps). A scheduler case records "lr": the learning rate of each group (columns) after
# construction and after each step (rows).
#
# To add a case: append `case("name", lambda: Module(...))` (or Functional / Loss / Optim / Sched)
# to the list below, regenerate, and add the entry of the same name to the matching table in
# NnReferenceTest.cpp (the test fails while the file and the tables list different cases). Each
# case runs under its own seed (from its name), so adding one leaves the others' values unchanged.
import json
import math
import struct
import warnings
import zlib
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
# Known and intended here: kl_div's reduction="mean", and SequentialLR calling step(0) internally.
warnings.filterwarnings("ignore", message="reduction: 'mean' divides")
warnings.filterwarnings("ignore", message="The epoch parameter")
STEPS = 3  # optimizer steps per case
EPOCHS = 12  # scheduler steps per case

# ---- inputs (drawn inside each case, under its seed) ----


def randn(*shape, scale=1.0):
    return torch.randn(*shape) * scale


def classes(c, *shape):
    """Class indices in [0, c)."""
    return torch.randint(0, c, shape)


def probs(*shape, dim=-1):
    """Probabilities summing to 1 over `dim`."""
    return torch.randn(*shape).softmax(dim)


def unit(*shape):
    """Values in (0.05, 0.95): BCE inputs and soft targets."""
    return torch.rand(*shape) * 0.9 + 0.05


def positive(*shape):
    """Values in (0.5, 1.5): class weights, variances."""
    return torch.rand(*shape) + 0.5


def signs(n):
    """A cosine-embedding target of +1 and -1, both present."""
    t = torch.where(torch.rand(n) < 0.5, 1, -1)
    t[0], t[1] = 1, -1
    return t


# ---- the kinds of case: each returns the case's tensors by key ----


def _backward(out, inputs, grad, params):
    cot = torch.randn_like(out)
    (out * cot).sum().backward()
    rec = {"out": out.detach(), "cot": cot}
    for i in grad:
        rec[f"grad/in{i}"] = inputs[i].grad
    for name, p in params:
        rec[f"grad/{name}"] = p.grad if p.grad is not None else torch.zeros_like(p)
    return rec


def _inputs(inputs, grad):
    if grad is None:
        grad = [i for i, t in enumerate(inputs) if t.is_floating_point()]
    for i in grad:
        inputs[i].requires_grad_()
    rec = {f"in{i}": t.detach().clone() for i, t in enumerate(inputs)}
    return rec, grad


def Module(m, *inputs, train=True, grad=None, forward=None):
    """A module with random parameters (and running statistics), in training or eval mode.
    `grad`: the indices of the inputs to differentiate (default: the floating ones);
    `forward(m, *inputs)`: how to call it (default: m(*inputs))."""
    inputs = list(inputs)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
        for name, b in m.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.5)
            elif name.endswith("running_var"):
                b.copy_(positive(*b.shape))
    m.train(train)
    rec, grad = _inputs(inputs, grad)
    rec.update({f"param/{n}": p.detach().clone() for n, p in m.named_parameters()})
    rec.update({f"buffer/{n}": b.clone() for n, b in m.named_buffers()})
    out = forward(m, *inputs) if forward else m(*inputs)
    rec.update(_backward(out, inputs, grad, list(m.named_parameters())))
    rec.update({f"after/{n}": b.clone() for n, b in m.named_buffers()})
    return rec


def Functional(fn, *inputs, grad=None, **options):
    """fn(*inputs, **options); tensor options are recorded as "const/<name>"."""
    inputs = list(inputs)
    rec, grad = _inputs(inputs, grad)
    rec.update({f"const/{k}": v for k, v in options.items() if isinstance(v, torch.Tensor)})
    out = fn(*inputs, **options)
    rec.update(_backward(out, inputs, grad, []))
    return rec


def Loss(fn, *inputs, grad=(0,), **options):
    """A loss: differentiated with respect to its input only unless `grad` says otherwise."""
    return Functional(fn, *inputs, grad=list(grad), **options)


def Optim(cls, lr0, lr1, **options):
    """Two parameters in two groups (learning rates lr0 and lr1, the other options shared), STEPS
    steps with fixed random gradients."""
    ps = [randn(2, 3), randn(4)]
    grads = [randn(STEPS, *p.shape) for p in ps]
    rec = {f"init/p{i}": p.clone() for i, p in enumerate(ps)}
    ps = [p.clone().requires_grad_() for p in ps]
    opt = cls([{"params": [ps[0]]}, {"params": [ps[1]], "lr": lr1}], lr=lr0, **options)
    after = [[] for _ in ps]
    for t in range(STEPS):
        for i, p in enumerate(ps):
            p.grad = grads[i][t].clone()
        opt.step()
        for i, p in enumerate(ps):
            after[i].append(p.detach().clone())
    for i in range(len(ps)):
        rec[f"grads/p{i}"] = grads[i]
        rec[f"params/p{i}"] = torch.stack(after[i])
    return rec


def Sched(make):
    """The learning rates of SGD with two groups (0.1 and 0.02) under make(optimizer)."""
    opt = torch.optim.SGD(
        [{"params": [torch.zeros(1, requires_grad=True)]},
         {"params": [torch.zeros(1, requires_grad=True)], "lr": 0.02}], lr=0.1)
    sched = make(opt)
    lrs = [[g["lr"] for g in opt.param_groups]]
    for _ in range(EPOCHS):
        opt.step()
        sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    return {"lr": torch.tensor(lrs)}


# ---- references PyTorch 1.13 lacks, written as PyTorch 2 documents them ----


class RMSNorm(nn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4): x / sqrt(mean(x^2) + eps) * weight over the trailing
    dimensions; eps None means the dtype's machine epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True):
        super().__init__()
        self.shape, self.eps = tuple(normalized_shape), eps
        self.weight = nn.Parameter(torch.ones(self.shape)) if elementwise_affine else None

    def forward(self, x):
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        dims = tuple(range(-len(self.shape), 0))
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y


class Hardsigmoid(nn.Module):
    """nn.Hardsigmoid's documented relu6(x + 3) / 6: PyTorch 1.13's own backward multiplies by
    the float constant 1.0f / 6.0f, 3e-8 off in float64."""

    def forward(self, x):
        return F.relu6(x + 3) / 6


def sdpa(q, k, v, attn_mask=None, is_causal=False):
    """torch.nn.functional.scaled_dot_product_attention's documented formula (no dropout)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if is_causal:
        allowed = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return scores.softmax(-1) @ v


def attention_mask(l, s):
    """A boolean mask (True: attend) with at least one allowed key per query."""
    m = torch.rand(l, s) < 0.6
    m[:, 0] = True
    return m


# ---- the cases ----

CASES = []  # (name, function returning the case's tensors), in file order


def case(name, make):
    CASES.append((name, make))


# layers
case("linear_bias", lambda: Module(nn.Linear(3, 4), randn(2, 2, 3)))
case("linear_nobias", lambda: Module(nn.Linear(3, 4, bias=False), randn(5, 3)))
case("bilinear", lambda: Module(nn.Bilinear(3, 2, 4), randn(5, 3), randn(5, 2)))
case("bilinear_nobias", lambda: Module(nn.Bilinear(2, 2, 3, bias=False), randn(4, 2), randn(4, 2)))
case("conv1d", lambda: Module(nn.Conv1d(2, 3, 3), randn(2, 2, 7)))
case("conv1d_stride_pad_dilation",
     lambda: Module(nn.Conv1d(2, 4, 3, stride=2, padding=2, dilation=2), randn(2, 2, 9)))
case("conv1d_groups", lambda: Module(nn.Conv1d(4, 6, 2, groups=2, bias=False), randn(2, 4, 5)))
case("conv2d", lambda: Module(nn.Conv2d(2, 3, 3), randn(2, 2, 5, 6)))
case("conv2d_stride_pad",
     lambda: Module(nn.Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 0)), randn(2, 2, 6, 5)))
case("conv2d_dilation",
     lambda: Module(nn.Conv2d(2, 3, 3, padding=2, dilation=2), randn(1, 2, 6, 6)))
case("conv2d_groups", lambda: Module(nn.Conv2d(4, 6, 3, groups=2, bias=False), randn(2, 4, 5, 5)))
case("conv2d_depthwise", lambda: Module(nn.Conv2d(3, 3, 3, padding=1, groups=3), randn(1, 3, 4, 4)))
case("conv_transpose2d", lambda: Module(nn.ConvTranspose2d(3, 2, 3), randn(2, 3, 3, 4)))
case("conv_transpose2d_stride_output_padding",
     lambda: Module(nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1),
                    randn(1, 2, 3, 4)))
case("conv_transpose2d_groups_dilation",
     lambda: Module(nn.ConvTranspose2d(4, 2, 2, stride=(1, 2), groups=2, dilation=2, bias=False),
                    randn(2, 4, 3, 3)))
case("batchnorm1d_train", lambda: Module(nn.BatchNorm1d(3), randn(6, 3)))
case("batchnorm1d_train_3d", lambda: Module(nn.BatchNorm1d(3, momentum=0.3), randn(4, 3, 5)))
case("batchnorm1d_eval", lambda: Module(nn.BatchNorm1d(3), randn(6, 3), train=False))
case("batchnorm2d_train", lambda: Module(nn.BatchNorm2d(3, eps=1e-3), randn(2, 3, 3, 4)))
case("batchnorm2d_eval", lambda: Module(nn.BatchNorm2d(3), randn(2, 3, 3, 4), train=False))
case("batchnorm2d_noaffine_train",
     lambda: Module(nn.BatchNorm2d(2, affine=False), randn(3, 2, 2, 3)))
case("batchnorm2d_untracked_eval",
     lambda: Module(nn.BatchNorm2d(2, track_running_stats=False), randn(3, 2, 2, 3), train=False))
case("layernorm", lambda: Module(nn.LayerNorm(4), randn(3, 4)))
case("layernorm_2d", lambda: Module(nn.LayerNorm([3, 4], eps=1e-3), randn(2, 3, 4)))
case("layernorm_noaffine",
     lambda: Module(nn.LayerNorm(5, elementwise_affine=False), randn(2, 3, 5)))
case("groupnorm", lambda: Module(nn.GroupNorm(2, 4), randn(2, 4, 3, 3)))
case("groupnorm_noaffine", lambda: Module(nn.GroupNorm(3, 6, affine=False), randn(2, 6, 5)))
case("groupnorm_instance", lambda: Module(nn.GroupNorm(3, 3, eps=1e-3), randn(2, 3, 4)))
case("rmsnorm", lambda: Module(RMSNorm([4], eps=1e-6), randn(3, 4)))
case("rmsnorm_2d_default_eps", lambda: Module(RMSNorm([2, 3]), randn(2, 2, 3)))
case("rmsnorm_noaffine",
     lambda: Module(RMSNorm([5], eps=1e-5, elementwise_affine=False), randn(2, 5)))
case("embedding", lambda: Module(nn.Embedding(5, 3), torch.tensor([[0, 4, 2], [2, 2, 1]])))
case("embedding_padding",
     lambda: Module(nn.Embedding(6, 3, padding_idx=1), torch.tensor([[1, 4, 2, 1], [0, 1, 5, 4]])))
case("embedding_padding_negative",
     lambda: Module(nn.Embedding(4, 2, padding_idx=-1), torch.tensor([3, 0, 3, 2])))
case("dropout_eval", lambda: Module(nn.Dropout(0.5), randn(3, 4), train=False))
case("dropout_p0_train", lambda: Module(nn.Dropout(0.0), randn(3, 4)))
case("maxpool2d", lambda: Module(nn.MaxPool2d(2), randn(2, 2, 4, 6)))
case("maxpool2d_stride_padding",
     lambda: Module(nn.MaxPool2d(3, stride=2, padding=1), randn(1, 2, 5, 6)))
case("maxpool2d_ceil_mode",
     lambda: Module(nn.MaxPool2d(3, stride=2, ceil_mode=True), randn(1, 2, 6, 6)))
case("maxpool2d_dilation", lambda: Module(nn.MaxPool2d(2, stride=1, dilation=2), randn(1, 1, 5, 5)))
case("avgpool2d", lambda: Module(nn.AvgPool2d(2), randn(2, 2, 4, 6)))
case("avgpool2d_stride_padding",
     lambda: Module(nn.AvgPool2d((3, 2), stride=(2, 1), padding=1), randn(1, 2, 5, 5)))
case("adaptive_avgpool2d", lambda: Module(nn.AdaptiveAvgPool2d((3, 2)), randn(2, 2, 7, 5)))
case("adaptive_avgpool2d_3d_up", lambda: Module(nn.AdaptiveAvgPool2d(4), randn(2, 3, 5)))
case("pixel_shuffle", lambda: Module(nn.PixelShuffle(2), randn(2, 8, 2, 3)))
case("upsample_nearest", lambda: Module(nn.Upsample(scale_factor=2), randn(1, 2, 3, 3)))
case("upsample_nearest_size", lambda: Module(nn.Upsample(size=(5, 2)), randn(1, 2, 3, 3)))
case("upsample_bilinear", lambda: Module(nn.Upsample(size=(5, 7), mode="bilinear"), randn(2, 1, 3, 4)))
case("upsample_bilinear_corners",
     lambda: Module(nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=True),
                    randn(1, 2, 3, 4)))
case("upsample_linear_down", lambda: Module(nn.Upsample(size=3, mode="linear"), randn(2, 2, 7)))
case("flatten", lambda: Module(nn.Flatten(), randn(2, 3, 2, 2)))
case("flatten_range", lambda: Module(nn.Flatten(0, 1), randn(2, 3, 4)))
case("unflatten", lambda: Module(nn.Unflatten(1, (2, 3)), randn(2, 6, 2)))
case("identity", lambda: Module(nn.Identity(), randn(3, 2)))

# activations (inputs spread over the interesting ranges; no exact kinks)
case("relu", lambda: Module(nn.ReLU(), randn(3, 4)))
case("silu", lambda: Module(nn.SiLU(), randn(3, 4, scale=2)))
case("mish", lambda: Module(nn.Mish(), randn(3, 4, scale=2)))
case("sigmoid", lambda: Module(nn.Sigmoid(), randn(3, 4, scale=2)))
case("tanh", lambda: Module(nn.Tanh(), randn(3, 4, scale=2)))
case("leaky_relu", lambda: Module(nn.LeakyReLU(), randn(3, 4)))
case("leaky_relu_slope", lambda: Module(nn.LeakyReLU(0.2), randn(3, 4)))
case("elu", lambda: Module(nn.ELU(), randn(3, 4, scale=2)))
case("elu_alpha", lambda: Module(nn.ELU(alpha=0.5), randn(3, 4, scale=2)))
case("gelu", lambda: Module(nn.GELU(), randn(3, 4, scale=2)))
case("gelu_tanh", lambda: Module(nn.GELU(approximate="tanh"), randn(3, 4, scale=2)))
case("softplus", lambda: Module(nn.Softplus(), randn(3, 4, scale=3)))
case("softplus_beta_threshold",
     lambda: Module(nn.Softplus(beta=2, threshold=3), randn(3, 4, scale=2)))
case("hardtanh", lambda: Module(nn.Hardtanh(), randn(3, 4, scale=2)))
case("hardtanh_range", lambda: Module(nn.Hardtanh(-0.5, 2.0), randn(3, 4, scale=2)))
case("softmax", lambda: Module(nn.Softmax(1), randn(2, 3, 4)))
case("log_softmax", lambda: Module(nn.LogSoftmax(0), randn(3, 4, scale=2)))
case("relu6", lambda: Module(nn.ReLU6(), randn(3, 4, scale=4)))
case("hardswish", lambda: Module(nn.Hardswish(), randn(3, 4, scale=3)))
case("hardsigmoid", lambda: Module(Hardsigmoid(), randn(3, 4, scale=3)))
case("selu", lambda: Module(nn.SELU(), randn(3, 4, scale=2)))
case("celu", lambda: Module(nn.CELU(0.5), randn(3, 4, scale=2)))
case("softsign", lambda: Module(nn.Softsign(), randn(3, 4, scale=2)))
case("logsigmoid", lambda: Module(nn.LogSigmoid(), randn(3, 4, scale=20)))
case("tanhshrink", lambda: Module(nn.Tanhshrink(), randn(3, 4, scale=2)))
case("softshrink", lambda: Module(nn.Softshrink(0.3), randn(3, 4)))
case("hardshrink", lambda: Module(nn.Hardshrink(), randn(3, 4)))
case("threshold", lambda: Module(nn.Threshold(0.1, 20.0), randn(3, 4)))
case("glu", lambda: Module(nn.GLU(1), randn(3, 4, 2)))
case("cosine_similarity", lambda: Module(nn.CosineSimilarity(), randn(3, 4), randn(3, 4)))
case("cosine_similarity_broadcast",
     lambda: Module(nn.CosineSimilarity(dim=-1, eps=1e-6), randn(2, 3, 4), randn(3, 4)))
case("pairwise_distance", lambda: Module(nn.PairwiseDistance(), randn(3, 4), randn(3, 4)))
case("pairwise_distance_p1_keepdim",
     lambda: Module(nn.PairwiseDistance(p=1.0, keepdim=True), randn(3, 4), randn(3, 4)))

# losses
for r in ["none", "mean", "sum"]:
    case(f"mse_{r}", lambda r=r: Loss(F.mse_loss, randn(3, 4), randn(3, 4), reduction=r))
    case(f"l1_{r}", lambda r=r: Loss(F.l1_loss, randn(3, 4), randn(3, 4), reduction=r))
    case(f"smooth_l1_{r}",
         lambda r=r: Loss(F.smooth_l1_loss, randn(3, 4), randn(3, 4), reduction=r))
    case(f"huber_{r}", lambda r=r: Loss(F.huber_loss, randn(3, 4), randn(3, 4), reduction=r))
    case(f"cross_entropy_{r}",
         lambda r=r: Loss(F.cross_entropy, randn(4, 5), classes(5, 4), reduction=r))
    case(f"nll_{r}", lambda r=r: Loss(F.nll_loss, probs(4, 5).log(), classes(5, 4), reduction=r))
    case(f"bce_{r}", lambda r=r: Loss(F.binary_cross_entropy, unit(4, 3), unit(4, 3), reduction=r))
    case(f"bce_logits_{r}",
         lambda r=r: Loss(F.binary_cross_entropy_with_logits, randn(4, 3), unit(4, 3), reduction=r))
    case(f"kl_div_{r}", lambda r=r: Loss(F.kl_div, probs(3, 4).log(), probs(3, 4), reduction=r))
    case(f"cosine_embedding_{r}",
         lambda r=r: Loss(F.cosine_embedding_loss, randn(4, 3), randn(4, 3), signs(4),
                          grad=(0, 1), reduction=r))
case("smooth_l1_beta_half",
     lambda: Loss(F.smooth_l1_loss, randn(3, 4), randn(3, 4), beta=0.5))
case("smooth_l1_beta_two_sum",
     lambda: Loss(F.smooth_l1_loss, randn(3, 4), randn(3, 4), reduction="sum", beta=2.0))
case("huber_delta_half", lambda: Loss(F.huber_loss, randn(3, 4), randn(3, 4), delta=0.5))
case("huber_delta_two_none",
     lambda: Loss(F.huber_loss, randn(3, 4), randn(3, 4), reduction="none", delta=2.0))
case("cross_entropy_probs", lambda: Loss(F.cross_entropy, randn(4, 5), probs(4, 5)))
case("cross_entropy_probs_none",
     lambda: Loss(F.cross_entropy, randn(4, 5), probs(4, 5), reduction="none"))
case("cross_entropy_probs_weight_smoothing",
     lambda: Loss(F.cross_entropy, randn(4, 5), probs(4, 5), weight=positive(5),
                  label_smoothing=0.2))
case("cross_entropy_ignore_index",
     lambda: Loss(F.cross_entropy, randn(5, 4), torch.tensor([1, 2, 0, 2, 3]), ignore_index=2))
case("cross_entropy_ignore_default",
     lambda: Loss(F.cross_entropy, randn(4, 3), torch.tensor([0, -100, 2, 1]), reduction="sum"))
case("cross_entropy_label_smoothing",
     lambda: Loss(F.cross_entropy, randn(4, 5), classes(5, 4), label_smoothing=0.1))
case("cross_entropy_weight", lambda: Loss(F.cross_entropy, randn(4, 5), classes(5, 4),
                                          weight=positive(5)))
case("cross_entropy_weight_sum", lambda: Loss(F.cross_entropy, randn(4, 5), classes(5, 4),
                                              weight=positive(5), reduction="sum"))
case("cross_entropy_weight_ignore_smoothing",
     lambda: Loss(F.cross_entropy, randn(5, 4), torch.tensor([1, 2, 0, 2, 3]), weight=positive(4),
                  ignore_index=2, label_smoothing=0.15))
case("cross_entropy_weight_ignore_smoothing_none",
     lambda: Loss(F.cross_entropy, randn(5, 4), torch.tensor([1, 2, 0, 2, 3]), weight=positive(4),
                  ignore_index=2, label_smoothing=0.15, reduction="none"))
case("cross_entropy_spatial", lambda: Loss(F.cross_entropy, randn(2, 4, 3, 2), classes(4, 2, 3, 2)))
case("cross_entropy_spatial_none",
     lambda: Loss(F.cross_entropy, randn(2, 3, 4), classes(3, 2, 4), reduction="none"))
case("cross_entropy_spatial_weight_smoothing",
     lambda: Loss(F.cross_entropy, randn(2, 3, 4), classes(3, 2, 4), weight=positive(3),
                  label_smoothing=0.1))
case("cross_entropy_spatial_probs",
     lambda: Loss(F.cross_entropy, randn(2, 3, 4), probs(2, 3, 4, dim=1)))
case("cross_entropy_unbatched", lambda: Loss(F.cross_entropy, randn(5), torch.tensor(3)))
case("nll_weight", lambda: Loss(F.nll_loss, probs(4, 5).log(), classes(5, 4), weight=positive(5)))
case("nll_ignore_index",
     lambda: Loss(F.nll_loss, probs(5, 3).log(), torch.tensor([0, 1, 1, 2, 1]), ignore_index=1))
case("nll_weight_ignore_sum",
     lambda: Loss(F.nll_loss, probs(5, 3).log(), torch.tensor([0, 1, 1, 2, 1]), ignore_index=1,
                  weight=positive(3), reduction="sum"))
case("nll_spatial_weight",
     lambda: Loss(F.nll_loss, probs(2, 3, 4, dim=1).log(), classes(3, 2, 4), weight=positive(3)))
case("bce_weight", lambda: Loss(F.binary_cross_entropy, unit(4, 3), unit(4, 3), weight=positive(3)))
case("bce_weight_none", lambda: Loss(F.binary_cross_entropy, unit(4, 3), unit(4, 3),
                                     weight=positive(4, 3), reduction="none"))
case("bce_logits_pos_weight",
     lambda: Loss(F.binary_cross_entropy_with_logits, randn(4, 3, scale=2), unit(4, 3),
                  pos_weight=positive(3)))
case("bce_logits_weight_pos_weight_sum",
     lambda: Loss(F.binary_cross_entropy_with_logits, randn(4, 3, scale=2), unit(4, 3),
                  weight=positive(3), pos_weight=positive(3), reduction="sum"))
case("kl_div_batchmean",
     lambda: Loss(F.kl_div, probs(3, 4).log(), probs(3, 4), reduction="batchmean"))
case("kl_div_log_target",
     lambda: Loss(F.kl_div, probs(3, 4).log(), probs(3, 4).log(), log_target=True))
case("kl_div_log_target_batchmean",
     lambda: Loss(F.kl_div, probs(3, 4).log(), probs(3, 4).log(), reduction="batchmean",
                  log_target=True))
case("cosine_embedding_margin",
     lambda: Loss(F.cosine_embedding_loss, randn(6, 3), randn(6, 3), signs(6), grad=(0, 1),
                  margin=-0.2))
case("cosine_embedding_margin_none",
     lambda: Loss(F.cosine_embedding_loss, randn(6, 3), randn(6, 3), signs(6), grad=(0, 1),
                  margin=0.3, reduction="none"))
for r in ["none", "mean", "sum"]:
    case(f"margin_ranking_{r}",
         lambda r=r: Loss(F.margin_ranking_loss, randn(6), randn(6), signs(6), grad=(0, 1),
                          margin=0.2, reduction=r))
    case(f"soft_margin_{r}",
         lambda r=r: Loss(F.soft_margin_loss, randn(2, 3), signs(6).reshape(2, 3).double(),
                          reduction=r))
    case(f"hinge_embedding_{r}",
         lambda r=r: Loss(F.hinge_embedding_loss, randn(2, 3), signs(6).reshape(2, 3).double(),
                          reduction=r))
    case(f"triplet_margin_{r}",
         lambda r=r: Loss(F.triplet_margin_loss, randn(4, 3), randn(4, 3), randn(4, 3),
                          grad=(0, 1, 2), reduction=r))
    case(f"poisson_nll_{r}",
         lambda r=r: Loss(F.poisson_nll_loss, randn(3, 4), torch.poisson(positive(3, 4) * 2),
                          reduction=r))
    case(f"gaussian_nll_{r}",
         lambda r=r: Loss(F.gaussian_nll_loss, randn(3, 4), randn(3, 4), positive(3, 4),
                          grad=(0, 2), reduction=r))
case("triplet_margin_swap_p1",
     lambda: Loss(F.triplet_margin_loss, randn(4, 3), randn(4, 3), randn(4, 3), grad=(0, 1, 2),
                  margin=0.5, p=1.0, swap=True))
case("poisson_nll_full_linear",
     lambda: Loss(F.poisson_nll_loss, positive(3, 4), torch.poisson(positive(3, 4) * 3),
                  log_input=False, full=True))
case("gaussian_nll_full_homoscedastic",
     lambda: Loss(F.gaussian_nll_loss, randn(3, 4), randn(3, 4), positive(3), grad=(0, 2),
                  full=True))

# recurrent layers: output and final states concatenated into one flat tensor


def flat(*ts):
    return torch.cat([t.flatten() for t in ts])


def rnn_out(m, *inputs):
    y, h = m(*inputs)
    return flat(y, h)


def lstm_out(m, x, *state):
    y, (h, c) = m(x, tuple(state) if state else None)
    return flat(y, h, c)


case("rnn_tanh", lambda: Module(nn.RNN(3, 4), randn(5, 2, 3), forward=rnn_out))
case("rnn_relu_two_layers_h0",
     lambda: Module(nn.RNN(3, 4, num_layers=2, nonlinearity="relu"), randn(4, 2, 3),
                    randn(2, 2, 4), forward=rnn_out))
case("rnn_bidirectional_batch_first_nobias",
     lambda: Module(nn.RNN(3, 4, bias=False, batch_first=True, bidirectional=True),
                    randn(2, 5, 3), forward=rnn_out))
case("lstm", lambda: Module(nn.LSTM(3, 4), randn(5, 2, 3), forward=lstm_out))
case("lstm_two_layers_bidirectional_states",
     lambda: Module(nn.LSTM(3, 4, num_layers=2, bidirectional=True), randn(4, 2, 3),
                    randn(4, 2, 4), randn(4, 2, 4), forward=lstm_out))
case("lstm_unbatched_batch_first",
     lambda: Module(nn.LSTM(3, 5, batch_first=True), randn(6, 3), forward=lstm_out))
case("gru", lambda: Module(nn.GRU(3, 4), randn(5, 2, 3), forward=rnn_out))
case("gru_two_layers_bidirectional_batch_first_h0",
     lambda: Module(nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True),
                    randn(2, 4, 3), randn(4, 2, 4), forward=rnn_out))

# attention and transformer layers (dropout 0: deterministic in training mode)


def mha_out(m, q, k, v, *rest, **kw):
    y, w = m(q, k, v, *rest, **kw)
    return flat(y, w)


def key_padding(n, s):
    """(n, s) bool, true at padding keys: the last keys of every other batch entry."""
    m = torch.zeros(n, s, dtype=torch.bool)
    m[1::2, s - 2:] = True
    return m


def causal(l):
    return torch.triu(torch.ones(l, l, dtype=torch.bool), 1)


case("mha_self", lambda: Module(nn.MultiheadAttention(8, 2), randn(5, 2, 8),
                                forward=lambda m, x: mha_out(m, x, x, x)))
case("mha_cross_key_padding",
     lambda: Module(nn.MultiheadAttention(8, 4), randn(3, 4, 8), randn(6, 4, 8), randn(6, 4, 8),
                    key_padding(4, 6),
                    forward=lambda m, q, k, v, p: mha_out(m, q, k, v, key_padding_mask=p)))
case("mha_causal_mask_unaveraged_batch_first",
     lambda: Module(nn.MultiheadAttention(6, 3, batch_first=True), randn(2, 4, 6),
                    forward=lambda m, x: mha_out(m, x, x, x, attn_mask=causal(4),
                                                 average_attn_weights=False)))
case("mha_float_mask_kdim_vdim_nobias",
     lambda: Module(nn.MultiheadAttention(4, 2, kdim=3, vdim=5, bias=False), randn(3, 2, 4),
                    randn(5, 2, 3), randn(5, 2, 5), randn(3, 5),
                    forward=lambda m, q, k, v, mask: mha_out(m, q, k, v, attn_mask=mask)))
case("transformer_encoder_post_norm",
     lambda: Module(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), randn(5, 2, 8),
                    forward=lambda m, x: m(x, src_mask=causal(5))))
case("transformer_encoder_pre_norm_gelu_key_padding",
     lambda: Module(nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True),
                    randn(4, 5, 8), key_padding(4, 5),
                    forward=lambda m, x, p: m(x, src_key_padding_mask=p)))
case("transformer_decoder_post_norm",
     lambda: Module(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), randn(4, 2, 8),
                    randn(6, 2, 8), forward=lambda m, x, mem: m(x, mem, tgt_mask=causal(4))))
case("transformer_decoder_pre_norm_memory_padding",
     lambda: Module(nn.TransformerDecoderLayer(8, 4, 16, dropout=0.0, norm_first=True,
                                               batch_first=True),
                    randn(2, 4, 8), randn(2, 6, 8), key_padding(2, 6),
                    forward=lambda m, x, mem, p: m(x, mem, memory_key_padding_mask=p)))

# scaled dot-product attention
case("sdpa", lambda: Functional(sdpa, randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 3)))
case("sdpa_bool_mask", lambda: Functional(sdpa, randn(1, 2, 3, 4), randn(1, 2, 5, 4),
                                          randn(1, 2, 5, 4), attention_mask(3, 5)))
case("sdpa_float_mask", lambda: Functional(sdpa, randn(2, 3, 4), randn(2, 3, 4), randn(2, 3, 2),
                                           randn(3, 3), grad=[0, 1, 2]))
case("sdpa_causal", lambda: Functional(sdpa, randn(2, 4, 3), randn(2, 4, 3), randn(2, 4, 3),
                                       is_causal=True))
case("sdpa_causal_bool_mask",
     lambda: Functional(sdpa, randn(2, 4, 3), randn(2, 4, 3), randn(2, 4, 3), attention_mask(4, 4),
                        is_causal=True))

# LibTorch's top-level functions (torch::nll_loss, ...) with ATen's positional arguments: each
# called as the ATen op, so that the argument order and the integer reduction (0 none, 1 mean,
# 2 sum) are checked, not only the nn::functional forms underneath
A = torch.ops.aten
case("aten_elu_scale", lambda: Functional(lambda x: A.elu(x, 1.5, 2.0, 0.5), randn(3, 4, scale=2)))
case("aten_log_sigmoid", lambda: Functional(A.log_sigmoid, randn(3, 4, scale=3)))
case("aten_nll_loss_weight_sum_ignore",
     lambda: Functional(lambda x, t, weight: A.nll_loss(x, t, weight, 2, 1),
                        randn(6, 3).log_softmax(1), classes(3, 6), weight=positive(3)))
case("aten_nll_loss2d_none",
     lambda: Functional(lambda x, t: A.nll_loss2d(x, t, None, 0, -100),
                        randn(2, 3, 2, 4).log_softmax(1), classes(3, 2, 2, 4)))
case("aten_cross_entropy_loss_weight_none_ignore_smoothing",
     lambda: Functional(lambda x, t, weight: A.cross_entropy_loss(x, t, weight, 0, 2, 0.1),
                        randn(5, 3), classes(3, 5), weight=positive(3)))
case("aten_binary_cross_entropy_weight_sum",
     lambda: Functional(lambda x, y, weight: A.binary_cross_entropy(x, y, weight, 2),
                        unit(4, 3), unit(4, 3), weight=positive(3), grad=[0]))
case("aten_binary_cross_entropy_with_logits_none",
     lambda: Functional(lambda x, y, weight, pos_weight:
                        A.binary_cross_entropy_with_logits(x, y, weight, pos_weight, 0),
                        randn(4, 3), unit(4, 3), weight=positive(3), pos_weight=positive(3),
                        grad=[0]))
case("aten_mse_loss_sum", lambda: Functional(lambda x, y: A.mse_loss(x, y, 2),
                                             randn(3, 4), randn(3, 4)))
case("aten_l1_loss_none", lambda: Functional(lambda x, y: A.l1_loss(x, y, 0),
                                             randn(3, 4), randn(3, 4)))
case("aten_smooth_l1_loss_sum_beta",
     lambda: Functional(lambda x, y: A.smooth_l1_loss(x, y, 2, 0.5), randn(3, 4), randn(3, 4)))
case("aten_huber_loss_none_delta",
     lambda: Functional(lambda x, y: A.huber_loss(x, y, 0, 2.0), randn(3, 4, scale=2),
                        randn(3, 4)))
case("aten_kl_div_mean_log_target",
     lambda: Functional(lambda x, y: A.kl_div(x, y, 1, log_target=True),
                        randn(3, 4).log_softmax(1), randn(3, 4).log_softmax(1)))
case("aten_margin_ranking_loss_sum",
     lambda: Functional(lambda x1, x2, t: A.margin_ranking_loss(x1, x2, t, 0.3, 2),
                        randn(6), randn(6), signs(6)))
case("aten_hinge_embedding_loss_none",
     lambda: Functional(lambda x, t: A.hinge_embedding_loss(x, t, 0.5, 0),
                        randn(2, 3), signs(6).reshape(2, 3).double(), grad=[0]))
case("aten_cosine_embedding_loss_sum",
     lambda: Functional(lambda x1, x2, t: A.cosine_embedding_loss(x1, x2, t, 0.2, 2),
                        randn(5, 3), randn(5, 3), signs(5)))
case("aten_soft_margin_loss_sum",
     lambda: Functional(lambda x, t: A.soft_margin_loss(x, t, 2), randn(2, 3),
                        signs(6).reshape(2, 3).double(), grad=[0]))
case("aten_triplet_margin_loss_swap_none",
     lambda: Functional(lambda a, p, n: A.triplet_margin_loss(a, p, n, 0.5, 1.0, 1e-6, True, 0),
                        randn(4, 3), randn(4, 3), randn(4, 3)))
case("aten_poisson_nll_loss_full_sum",
     lambda: Functional(lambda x, t: A.poisson_nll_loss(x, t, False, True, 1e-8, 2),
                        positive(3, 4), positive(3, 4) * 3, grad=[0]))
case("aten_batch_norm_eval",
     lambda: Functional(lambda x, w, b, running_mean, running_var:
                        A.batch_norm(x, w, b, running_mean, running_var, False, 0.1, 1e-3, False),
                        randn(4, 3, 2), randn(3), randn(3), running_mean=randn(3),
                        running_var=positive(3)))
case("aten_batch_norm_train_no_running_stats",
     lambda: Functional(lambda x, w, b: A.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
                        randn(4, 3, 2), randn(3), randn(3)))
case("aten_layer_norm", lambda: Functional(lambda x, w, b: A.layer_norm(x, [4], w, b, 1e-3, True),
                                           randn(2, 3, 4), randn(4), randn(4)))
case("aten_group_norm", lambda: Functional(lambda x, w, b: A.group_norm(x, 2, w, b, 1e-4, True),
                                           randn(2, 4, 3), randn(4), randn(4)))
case("aten_embedding_padding_idx",
     lambda: Functional(lambda w, i: A.embedding(w, i, 1), randn(5, 3), classes(5, 2, 4)))

# optimizers: group 0 at lr0, group 1 at lr1
case("sgd", lambda: Optim(torch.optim.SGD, 0.1, 0.05))
case("sgd_momentum", lambda: Optim(torch.optim.SGD, 0.1, 0.05, momentum=0.9))
case("sgd_momentum_dampening",
     lambda: Optim(torch.optim.SGD, 0.1, 0.05, momentum=0.8, dampening=0.3))
case("sgd_nesterov_weight_decay",
     lambda: Optim(torch.optim.SGD, 0.1, 0.05, momentum=0.9, nesterov=True, weight_decay=0.1))
case("sgd_weight_decay", lambda: Optim(torch.optim.SGD, 0.1, 0.05, weight_decay=0.2))
case("adam", lambda: Optim(torch.optim.Adam, 0.01, 0.03))
case("adam_betas_eps", lambda: Optim(torch.optim.Adam, 0.01, 0.03, betas=(0.8, 0.9), eps=1e-3))
case("adam_weight_decay", lambda: Optim(torch.optim.Adam, 0.01, 0.03, weight_decay=0.1))
case("adam_amsgrad", lambda: Optim(torch.optim.Adam, 0.01, 0.03, amsgrad=True, weight_decay=0.05))
case("adamw", lambda: Optim(torch.optim.AdamW, 0.01, 0.03))
case("adamw_weight_decay_amsgrad",
     lambda: Optim(torch.optim.AdamW, 0.01, 0.03, weight_decay=0.3, amsgrad=True,
                   betas=(0.85, 0.95)))
case("rmsprop", lambda: Optim(torch.optim.RMSprop, 0.01, 0.002))
case("rmsprop_momentum", lambda: Optim(torch.optim.RMSprop, 0.01, 0.002, momentum=0.9, alpha=0.9))
case("rmsprop_centered", lambda: Optim(torch.optim.RMSprop, 0.01, 0.002, centered=True))
case("rmsprop_centered_momentum_weight_decay",
     lambda: Optim(torch.optim.RMSprop, 0.01, 0.002, centered=True, momentum=0.5, weight_decay=0.1,
                   eps=1e-4))
case("adagrad", lambda: Optim(torch.optim.Adagrad, 0.1, 0.05))
case("adagrad_lr_decay_weight_decay",
     lambda: Optim(torch.optim.Adagrad, 0.1, 0.05, lr_decay=0.1, weight_decay=0.2))
case("adagrad_initial_accumulator_eps",
     lambda: Optim(torch.optim.Adagrad, 0.1, 0.05, initial_accumulator_value=0.5, eps=1e-3))

# learning-rate schedules
S = torch.optim.lr_scheduler
case("step_lr", lambda: Sched(lambda o: S.StepLR(o, step_size=3, gamma=0.5)))
case("multistep_lr", lambda: Sched(lambda o: S.MultiStepLR(o, milestones=[2, 5, 9], gamma=0.3)))
case("exponential_lr", lambda: Sched(lambda o: S.ExponentialLR(o, gamma=0.8)))
case("cosine_annealing_lr", lambda: Sched(lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.001)))
case("linear_lr", lambda: Sched(lambda o: S.LinearLR(o)))
case("linear_lr_decay",
     lambda: Sched(lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.25, total_iters=8)))
case("onecycle_lr", lambda: Sched(lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=20,
                                                         cycle_momentum=False)))
case("onecycle_lr_to_the_end",
     lambda: Sched(lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=EPOCHS, pct_start=0.25,
                                          div_factor=10, final_div_factor=100,
                                          cycle_momentum=False)))
case("sequential_lr",
     lambda: Sched(lambda o: S.SequentialLR(
         o, [S.LinearLR(o, start_factor=0.1, total_iters=4), S.ExponentialLR(o, gamma=0.7)],
         milestones=[4])))
case("sequential_lr_three",
     lambda: Sched(lambda o: S.SequentialLR(
         o, [S.ExponentialLR(o, gamma=0.9), S.StepLR(o, 2, gamma=0.5),
             S.CosineAnnealingLR(o, T_max=4)], milestones=[3, 7])))

# ---- the file ----

DTYPES = {torch.float64: ("F64", "<f8"), torch.int64: ("I64", "<i8"), torch.bool: ("BOOL", "?")}


def safetensors_bytes(tensors, metadata):
    """The safetensors format: an 8-byte little-endian header length, a JSON header (padded with
    spaces to a multiple of 8) giving each tensor's dtype, shape and byte range, then the bytes."""
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        dtype, numpy_dtype = DTYPES[t.dtype]
        data = t.detach().contiguous().numpy().astype(numpy_dtype).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def main():
    tensors = {}
    for name, make in CASES:
        assert "/" not in name and not any(n.startswith(name + "/") for n in tensors), name
        torch.manual_seed(zlib.crc32(name.encode()))
        for key, t in make().items():
            assert t.dtype in DTYPES, (name, key, t.dtype)
            tensors[f"{name}/{key}"] = t
    metadata = {"generator": "tests/reference/nn_reference.py", "torch": torch.__version__}
    path = Path(__file__).with_name("nn_reference.safetensors")
    path.write_bytes(safetensors_bytes(tensors, metadata))
    print(f"{len(CASES)} cases, {len(tensors)} tensors, {path.stat().st_size} bytes -> {path}")


if __name__ == "__main__":
    main()
