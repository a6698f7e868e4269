"""Kernels of 50 µs or more for checking timing.measure against Nsight Compute.

    python bench/ncu_cases.py run CASE CALLS   # just call the case (run this under ncu)
    python bench/ncu_cases.py measure          # timing.measure of every case, JSON on stdout

Each case is one forward-like call; ncu's gpu__time_duration.sum of all kernels a call launches is
compared with the median timing.measure reports for that call (judge_throughput.py does this).
"""
from __future__ import annotations

import json
import sys

import torch


NVTX_RANGE = "kw_calls"  # ncu profiles only the kernels launched inside this range


def cases(device: str = "cuda") -> dict:
    """name -> zero-argument callable on preallocated data (no allocation inside the call). On the
    CPU (a smoke test of the scripts that use them) every size is divided by 16 per dimension."""
    torch.manual_seed(0)
    dev = device
    d = 16 if device == "cpu" else 1
    x = torch.randn(64 * 2**20 // d**2, device=dev)
    a = torch.randn(4096 // d, 4096 // d, device=dev)
    c = torch.empty_like(a)
    s = torch.randn(4096 // d, 16384 // d, device=dev)
    s_out = torch.empty_like(s)
    r = torch.randn(16, 4096 // d, 4095 // d, device=dev)
    r_out = torch.empty(16, 1, 4095 // d, device=dev)
    h = torch.randn(8192 // d, 8192 // d, device=dev, dtype=torch.bfloat16)
    h_out = torch.empty_like(h)
    return {
        "relu_64M": lambda: torch.relu(x),  # the output comes from the caching allocator: no extra kernel
        "matmul_fp32_4096": lambda: torch.matmul(a, a, out=c),
        "softmax_4096x16384": lambda: torch.softmax(s, 1),
        "sum_dim1_16x4096x4095": lambda: torch.sum(r, dim=1, keepdim=True, out=r_out),
        "matmul_bf16_8192": lambda: torch.matmul(h, h, out=h_out),
        # a kernel, not copy_: a same-dtype device copy is a cudaMemcpy, which ncu does not time
        "scale_256MiB": lambda: torch.mul(s, 2.0, out=s_out),
    }


def main() -> int:
    torch.backends.cuda.matmul.allow_tf32 = False
    mode = sys.argv[1]
    table = cases()
    if mode == "run":
        fn, calls = table[sys.argv[2]], int(sys.argv[3])
        torch.cuda.synchronize()  # the setup's own kernels (randn) stay outside the profiled range
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        return 0
    from kernelwright.judge.config import JudgeConfig
    from kernelwright.judge.timing import measure

    config = JudgeConfig(warmup_ms=50, rep_ms=300, min_reps=20, max_reps=500)
    result = {}
    for name, fn in table.items():
        stats, _ = measure(fn, config, "cuda")
        result[name] = {"median_ms": stats.median_ms, "iqr_ms": stats.iqr_ms, "n": stats.n}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
