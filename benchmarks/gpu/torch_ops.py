# The ops weft-bench-vulkan times, in PyTorch on CUDA, measured the same way: `iterations` calls
# back to back, then a synchronize; the median of 5 such runs, per call. fp32 throughout (TF32 off,
# as weft's float32 GEMM is true float32). Prints "RESULT name|us|TFLOP/s" lines.
import time
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")


def timed(f, iterations):
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iterations):
            f()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / iterations)
    return sorted(times)[2]


def report(name, seconds, flops=0.0):
    tflops = "%.2f" % (flops / seconds / 1e12) if flops else "-"
    print("RESULT %s|%.3f|%s" % (name, seconds * 1e6, tflops), flush=True)


a, b = torch.randn(1 << 20, device=dev), torch.randn(1 << 20, device=dev)
report("add [1M]", timed(lambda: a + b, 200))
m = torch.randn(1024, 1024, device=dev)
report("matmul 1024^3", timed(lambda: m @ m, 50), 2.0 * 1024**3)
x, w = torch.randn(32, 64, 56, 56, device=dev), torch.randn(64, 64, 3, 3, device=dev)
report("conv 32x64x56x56 k3", timed(lambda: torch.nn.functional.conv2d(x, w, padding=1), 20),
       2.0 * 32 * 64 * 56 * 56 * 64 * 9)
s = torch.randn(4096, 1024, device=dev)
report("softmax [4096, 1024]", timed(lambda: s.softmax(1), 50))
v = torch.randn(1 << 24, device=dev)
report("sum [16M]", timed(lambda: v.sum(), 50))
g = torch.randn(4096, 4096, device=dev)
report("gemm 4096^3 fp32", timed(lambda: g @ g, 20), 2.0 * 4096**3)
