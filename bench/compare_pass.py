"""How long the judge takes to compare one large output with its reference, in seconds.

    PYTHONPATH=. python bench/compare_pass.py [--elements 1610612736] [--repeats 3]

`check.compare` on one float32 output of `--elements` elements (19_ReLU's full size by default:
6.4 GB) against a reference that differs by rounding, with the reference on the GPU and in host
memory; once through the judge's one-pass kernel (judge/gpucompare.py) and once through the torch
path it replaces (float64 chunks). The kernel's compile (`gpucompare.warm`, an empty Triton
cache) and first call are reported apart. Wall seconds per comparison (device synchronised: the comparison reads its result back),
the median of `--repeats`. Writes $OUT/compare_pass.json (default: bench/results/).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from kernelwright.judge import JudgeConfig, check, gpucompare


def seconds(fn, repeats: int) -> float:
    found = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        found.append(time.perf_counter() - start)
    return statistics.median(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=4096 * 393216)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config, rows = JudgeConfig(), {}
    ref = torch.randn(args.elements, device="cuda")
    out = ref + 1e-6 * torch.randn_like(ref)
    compare = lambda r: check.compare([out], [r], config, "cuda")  # noqa: E731
    started = time.perf_counter()
    gpucompare.warm(gpucompare.wanted([ref], "cuda"), "cuda")  # as the worker does before candidate code
    rows["kernel_compile_s"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    first = compare(ref)
    torch.cuda.synchronize()
    rows["kernel_first_call_s"] = round(time.perf_counter() - started, 3)
    assert first.ok, first.message
    host = check.host_copy(ref)
    for where, r in (("device", ref), ("host", host)):
        rows[f"kernel_ref_on_{where}_s"] = round(seconds(lambda r=r: compare(r), args.repeats), 4)
    original = gpucompare.applies
    gpucompare.applies = lambda o, r: False  # the torch path
    try:
        for where, r in (("device", ref), ("host", host)):
            rows[f"torch_ref_on_{where}_s"] = round(seconds(lambda r=r: compare(r), args.repeats), 4)
    finally:
        gpucompare.applies = original
    data = {"device": torch.cuda.get_device_name(), "elements": args.elements,
            "bytes_per_tensor": args.elements * 4, "repeats": args.repeats, "seconds": rows,
            "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__}
    folder = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "compare_pass.json").write_text(json.dumps(data, indent=2))
    print(json.dumps(data, indent=2))


if __name__ == "__main__":
    main()
