# The train steps weft-bench-gpu-step times, in PyTorch on CUDA, built and timed the same way
# (benchmarks/TrainModels.h's GPT-like and CNN models, AdamW, cross-entropy over every position):
# `iterations` calls back to back, then the last loss read; the median of 5 runs, per call. fp32
# throughout (TF32 off, as weft's float32 GEMM is true float32), eager and torch.compile; and
# device-to-device copy bandwidth. Prints "RESULT name|us|-" lines.
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")


class Layer(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x, causal):
        b, t, d = x.shape
        hd = d // self.heads
        heads = lambda y: y.reshape(b, t, self.heads, hd).transpose(1, 2)
        n = self.ln1(x)
        att = heads(self.q(n)) @ heads(self.k(n)).transpose(-1, -2) / math.sqrt(hd)
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        y = x + self.proj((att @ heads(self.v(n))).transpose(1, 2).reshape(b, t, -1))
        return y + self.down(F.gelu(self.up(self.ln2(y))))


class Gpt(nn.Module):
    def __init__(self, vocab, context, dim, heads, layers, hidden):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Layer(dim, heads, hidden) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)
        self.register_buffer("causal", torch.ones(context, context, dtype=torch.bool).triu(1))

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x, self.causal)
        return self.head(self.norm(x))


class Cnn(nn.Module):
    def __init__(self, c1, c2, side, hidden, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.fc1 = nn.Linear(c2 * (side // 4) * (side // 4), hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def timed(f, iterations):
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iterations):
            last = f()
        last.reshape(-1)[0].item()
        times.append((time.perf_counter() - t0) / iterations)
    return sorted(times)[2]


def report(name, seconds):
    print("RESULT %s|%.3f|-" % (name, seconds * 1e6), flush=True)


def steps(name, make, x, y, iterations):
    for mode in ("eager", "compiled"):
        torch.manual_seed(0)
        model = make().to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(x, y):
            out = model(x)
            loss = F.cross_entropy(out.flatten(0, out.dim() - 2), y.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        call = torch.compile(step) if mode == "compiled" else step
        xd, yd = x.to(dev), y.to(dev)
        for _ in range(3):
            call(xd, yd)
        report("%s step, %s" % (name, mode), timed(lambda: call(xd, yd), iterations))


if __name__ == "__main__":
    models = sys.argv[1] if len(sys.argv) > 1 else "gpt,cnn,copy"
    torch.manual_seed(0)
    if "gpt" in models:
        x, y = torch.randint(0, 8192, (16, 256)), torch.randint(0, 8192, (16, 256))
        steps("gpt", lambda: Gpt(8192, 256, 512, 8, 4, 2048), x, y, 10)
    if "cnn" in models:
        x, y = torch.randn(128, 1, 28, 28), torch.randint(0, 10, (128,))
        steps("cnn", lambda: Cnn(32, 64, 28, 128, 10), x, y, 20)
    if "copy" in models:
        a, b = torch.randn(64 << 20, device=dev), torch.empty(64 << 20, device=dev)
        report("copy 256 MiB", timed(lambda: b.copy_(a), 20))
