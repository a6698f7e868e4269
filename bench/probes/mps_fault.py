"""Probe: under a private MPS server, does one client's illegal memory access hurt the others?
And can a process without MPS use the GPU beside the MPS clients?

Run with CUDA_MPS_PIPE_DIRECTORY set (the server already started). Roles (argv[1]):
  bystander : loops small kernels for ~6 s, prints how many ran and any error
  faulty    : after 1 s, a Triton kernel stores to an unmapped address
  plain     : (started without the MPS variables) loops kernels, prints any error
"""
import sys
import time

import torch


def loop(role, seconds=6.0):
    x = torch.randn(1 << 20, device="cuda")
    n, err = 0, None
    end = time.time() + seconds
    try:
        while time.time() < end:
            x = torch.relu(x) + 0.0
            torch.cuda.synchronize()
            n += 1
    except Exception as exc:  # noqa: BLE001
        err = f"{type(exc).__name__}: {str(exc)[:160]}"
    # after an error, can this process still use the GPU?
    after = None
    if err:
        try:
            torch.ones(4, device="cuda").sum().item()
            after = "usable"
        except Exception as exc:  # noqa: BLE001
            after = f"unusable: {type(exc).__name__}"
    print(f"{role}: iterations={n} error={err} after={after}", flush=True)


def faulty():
    import triton
    import triton.language as tl

    @triton.jit
    def bad(ptr):
        tl.store(ptr + (1 << 40), 1.0)

    x = torch.zeros(4, device="cuda")
    torch.cuda.synchronize()
    time.sleep(1.0)
    try:
        bad[(1,)](x)
        torch.cuda.synchronize()
        print("faulty: no error", flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"faulty: {type(exc).__name__}: {str(exc)[:160]}", flush=True)


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "faulty":
        faulty()
    else:
        loop(role)
